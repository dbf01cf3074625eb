"""How a run trains on what the parent gave: its text, or also its logits (issue 41).

Training on the parent's logits (Axolotl's KD plugin, fed from data/logprobs.bin) is not
built yet: a run with ``distill = "logits"`` is refused before anything is paid, rather
than trained on the text alone while the user believes otherwise.
"""

from __future__ import annotations

from overbrainer.config.model import Training
from overbrainer.errors import UserError

LOGITS_NOT_BUILT = (
    'training.distill = "logits": training on the parent\'s logits (Axolotl\'s KD plugin) '
    "is not built yet; `answers` keeps them in data/logprobs.bin for when it is. Set "
    'training.distill = "text" to train on the parent\'s answers now'
)


def check_distill(training: Training) -> None:
    """Refuse a run this version cannot train as its settings ask."""
    if training.distill == "logits":
        raise UserError(LOGITS_NOT_BUILT)
