"""The warning when the chat template may drop the parent's reasoning."""

from __future__ import annotations

import pytest

from overbrainer.config.model import Training
from overbrainer.train.reasoning import reasoning_template_warning


def training(base_model: str = "Qwen/Qwen3-0.6B", **changes: str) -> Training:
    return Training(target="box", base_model=base_model, adapter="lora", **changes)


@pytest.mark.parametrize(
    "base_model", ["Qwen/Qwen3-0.6B", "qwen/QWEN3-8B-Base", "/models/my-qwen3-tune"]
)
def test_a_qwen3_base_model_with_its_own_template_keeps_the_reasoning(base_model):
    assert reasoning_template_warning(training(base_model)) is None


@pytest.mark.parametrize(
    "base_model", ["meta-llama/Llama-3.2-1B", "Qwen/Qwen2.5-7B", "/models/tiny"]
)
def test_another_base_model_with_no_template_set_is_warned_about(base_model):
    warning = reasoning_template_warning(training(base_model))
    assert warning == (
        f"training.chat_template is not set and the base model {base_model} is not a Qwen3 "
        "model: its chat template may leave the parent's reasoning out of what the child is "
        "trained on; set training.chat_template (tokenizer_default (the model's own "
        "template), qwen3, qwen3_5, exaone4, gemma4, gemma4_unified)"
    )


@pytest.mark.parametrize(
    "template", ["tokenizer_default", "qwen3", "qwen3_5", "exaone4", "gemma4", "gemma4_unified"]
)
def test_templates_that_render_reasoning_are_trusted_whatever_the_model(template):
    llama = training("meta-llama/Llama-3.2-1B", chat_template=template)
    assert reasoning_template_warning(llama) is None


@pytest.mark.parametrize("template", ["chatml", "llama3", "qwen_25", "jinja"])
def test_other_named_templates_are_warned_about(template):
    warning = reasoning_template_warning(training(chat_template=template))
    assert warning is not None
    assert warning.startswith(
        f'training.chat_template = "{template}" may not render reasoning_content'
    )


def test_a_custom_template_must_mention_reasoning_content():
    keeps = (
        "{% if message.reasoning_content %}<think>{{ message.reasoning_content }}</think>"
        "{% endif %}"
    )
    assert reasoning_template_warning(training(chat_template_jinja=keeps)) is None
    warning = reasoning_template_warning(training(chat_template_jinja="{{ message.content }}"))
    assert warning == (
        "training.chat_template_jinja never mentions reasoning_content: the parent's reasoning "
        "may be left out of what the child is trained on"
    )


def test_a_custom_template_is_judged_before_the_template_name():
    keeps = "{{ message.reasoning_content }}"
    assert reasoning_template_warning(
        training(chat_template="jinja", chat_template_jinja=keeps)
    ) is None


def test_a_template_set_in_axolotl_extra_is_judged_too():
    warning = reasoning_template_warning(training(axolotl_extra={"chat_template": "chatml"}))
    assert warning is not None
    assert warning.startswith('training.axolotl_extra.chat_template = "chatml" may not render')
    assert reasoning_template_warning(training(axolotl_extra={"chat_template": "qwen3"})) is None
