"""Before ``run`` pays for a dataset: can its training target train at all?

A first ``run`` of a new project (``init`` writes ``[targets.local]`` with no venv) used to
pay for every stage, then fail at training for want of Axolotl. The target is made ready
here instead (reached, Axolotl found or installed, its setup run), as training would make
it, before the first request; and a base model too large for a CPU target is a warning.
"""

from __future__ import annotations

import re

from loguru import logger
from pydantic import BaseModel

from overbrainer.errors import UserError
from overbrainer.train.executors import holding
from overbrainer.train.plan import target_of
from overbrainer.train.workspace import Workspace

CPU_BILLIONS = 0.5
"""From this size (in billions of parameters, read from the model's name) a CPU trains for
hours an epoch: the quickstart's tiny model trains 20 steps in about 30 s."""
_SIZE = re.compile(r"(?<![A-Za-z0-9.])(\d+(?:\.\d+)?)[bB](?![A-Za-z0-9])")


def check_training_target(ws: Workspace) -> BaseModel | None:
    """Make the training target ready, or raise a ``UserError`` saying what to set, with
    nothing paid for yet; warn when it trains on a CPU a base model sized for a GPU. The
    target's settings made ready (``train``'s ``prepared``: its setup runs once a ``run``),
    None without ``[training]``."""
    training = ws.settings.training
    if training is None:
        return None
    name = training.target
    target = target_of(ws.settings, name)
    try:
        with holding(ws.project, ws.hook, name, target) as held:
            info = ws.hook.describe_target(executor=held.executor)
            ws.hook.prepare_target(executor=held.executor)
    except UserError as error:
        raise UserError(
            f"training.target `{name}` cannot train: {error}; nothing was paid for yet"
        ) from None
    size = model_billions(training.base_model)
    if info is not None and info.cpu and size is not None and size >= CPU_BILLIONS:
        logger.warning(
            f"target `{name}` trains on a CPU: {training.base_model} ({size:g}B parameters) "
            "would take hours an epoch there; set training.base_model to a tiny model (as "
            "examples/quickstart does) or training.target to a GPU target"
        )
    return target


def model_billions(base_model: str) -> float | None:
    """The size a model's name states (``Qwen3-0.6B``: 0.6), or None."""
    found = _SIZE.findall(base_model.rsplit("/", 1)[-1])
    return float(found[-1]) if found else None
