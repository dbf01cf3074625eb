"""Whether the chat template a run trains with keeps the parent's reasoning."""

from __future__ import annotations

from overbrainer.config.model import Training

REASONING_TEMPLATES = ("qwen3", "qwen3_5", "exaone4", "gemma4", "gemma4_unified")
"""Axolotl's built-in chat templates that render an assistant turn's ``reasoning_content``."""

_KEEPS = "tokenizer_default (the model's own template), " + ", ".join(REASONING_TEMPLATES)


def reasoning_template_warning(training: Training) -> str | None:
    """A warning when the chat template may drop the reasoning the dataset carries, else None.

    Each assistant turn holds the parent's reasoning in ``reasoning_content``; a template
    that does not render it trains the child on the answers alone.
    """
    jinja, jinja_key = _setting(training, "chat_template_jinja")
    if jinja is not None:
        if "reasoning_content" in jinja:
            return None
        return (
            f"{jinja_key} never mentions reasoning_content: the parent's "
            "reasoning may be left out of what the child is trained on"
        )
    template, template_key = _setting(training, "chat_template")
    if template is not None:
        if template == "tokenizer_default" or template in REASONING_TEMPLATES:
            return None
        return (
            f'{template_key} = "{template}" may not render reasoning_content: the '
            "parent's reasoning may be left out of what the child is trained on (templates "
            f"that keep it: {_KEEPS})"
        )
    if "qwen3" in training.base_model.lower():
        return None
    return (
        f"training.chat_template is not set and the base model {training.base_model} is not a "
        "Qwen3 model: its chat template may leave the parent's reasoning out of what the "
        f"child is trained on; set training.chat_template ({_KEEPS})"
    )


def _setting(training: Training, key: str) -> tuple[str | None, str]:
    """The template ``key`` names, from ``[training]`` or else ``axolotl_extra``, and where."""
    typed = getattr(training, key)
    if typed is not None:
        return typed, f"training.{key}"
    extra = training.axolotl_extra.get(key)
    return (extra if isinstance(extra, str) else None), f"training.axolotl_extra.{key}"
