"""How a run trains on what the parent gave: its text, or also its logits (issue 41).

With ``distill = "logits"`` a run trains with Axolotl's KD plugin on the rows of
data/logprobs.bin, lined up on the target with the child's tokenizer and its own chat
template (the ``kd-align`` stage). Another chat template would render the answer otherwise
than that check sees it, so it is refused before anything is paid.
"""

from __future__ import annotations

from overbrainer.config.model import Training
from overbrainer.errors import UserError

OWN_TEMPLATE = (None, "tokenizer_default")


def check_distill(training: Training) -> None:
    """Refuse a run this version cannot train as its settings ask."""
    if not training.kd_offline:  # online, the parent scores the child's own rendering
        return
    extra = training.axolotl_extra
    named = training.chat_template or extra.get("chat_template")
    jinja = training.chat_template_jinja or extra.get("chat_template_jinja")
    if named not in OWN_TEMPLATE or jinja is not None:
        setting = "chat_template_jinja" if jinja is not None else "chat_template"
        raise UserError(
            f'training.distill = "logits" trains with the child\'s own chat template (its '
            f"answer's tokens are checked against the parent's with it); training.{setting} "
            'asks for another: remove it, or set training.distill = "text"'
        )
