"""One place creates a target's executor and releases it: the training commands and the
commands after training share it, and its error messages.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from loguru import logger
from pydantic import BaseModel

from overbrainer.config.model import TargetBase
from overbrainer.errors import UserError
from overbrainer.hookcalls import Hooks
from overbrainer.job.record import RunRecord, RunState
from overbrainer.project import Project
from overbrainer.train.workspace import Workspace


def new_executor(
    project: Project, hooks: Hooks, name: str, target: BaseModel, run: RunRecord | None
) -> object:
    """The executor of the target ``name``, or a ``UserError`` when no plugin runs its kind."""
    executor = hooks.create_executor(name=name, target=target, project=project, run=run)
    if executor is None:
        kind = target.kind if isinstance(target, TargetBase) else "?"
        raise UserError(f"no installed plugin can run target `{name}` (kind `{kind}`)")
    return executor


def run_target(project: Project, record: RunRecord) -> BaseModel:
    """The settings of the target ``record`` was started on."""
    target = project.settings.targets.get(record.target)
    if target is None:
        raise UserError(
            f"target `{record.target}` of run {record.id} is no longer in overbrainer.toml"
        )
    return target


def create_executor(ws: Workspace, name: str, target: BaseModel, run: RunRecord | None) -> Any:
    return new_executor(ws.project, ws.hook, name, target, run)


def release(hook: Hooks, executor: object, run: RunRecord | None, outcome: RunState | None) -> None:
    if executor is None:
        return
    try:
        hook.release_executor(executor=executor, run=run, outcome=outcome)
    except Exception as error:  # noqa: BLE001 - releasing must not hide the real outcome
        logger.warning(f"cannot release target resources: {error}")


def run_executor(ws: Workspace, record: RunRecord) -> Any:
    """The executor of the target ``record`` was started on."""
    return create_executor(ws, record.target, run_target(ws.project, record), record)


@dataclass
class Held:
    """An executor held by a block: released when the block ends with ``run`` and
    ``outcome`` as the block left them, unless it was handed on (``hand_on``)."""

    hooks: Hooks
    executor: object
    run: RunRecord | None
    outcome: RunState | None = None
    handed_on: bool = False

    def hand_on(self) -> object:
        """The executor, now released by whoever takes it."""
        self.handed_on = True
        return self.executor


@contextmanager
def held_executor(project: Project, hooks: Hooks, record: RunRecord) -> Iterator[Held]:
    """The executor of the target ``record`` ran on, released however the block ends."""
    target = run_target(project, record)
    held = Held(hooks, new_executor(project, hooks, record.target, target, record), record)
    try:
        yield held
    finally:
        if not held.handed_on:
            release(held.hooks, held.executor, held.run, held.outcome)
