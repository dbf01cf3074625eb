"""One place creates a target's executor and releases it: the training commands and the
commands after training share it, and its error messages.

Every command holds its executor in a ``with`` block (:func:`holding`,
:func:`held_executor`): however the block ends (an error, Ctrl-C), the executor is
released once, with the run and outcome the block noted in its :class:`Held`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass

from loguru import logger
from pydantic import BaseModel

from overbrainer.config.model import TargetBase
from overbrainer.errors import UserError
from overbrainer.hookcalls import Hooks
from overbrainer.job.interface import Executor
from overbrainer.job.record import RunRecord, RunState
from overbrainer.job.spec import TargetInfo
from overbrainer.project import Project


def run_target(project: Project, record: RunRecord) -> BaseModel:
    """The settings of the target ``record`` was started on."""
    target = project.settings.targets.get(record.target)
    if target is None:
        raise UserError(
            f"target `{record.target}` of run {record.id} is no longer in overbrainer.toml"
        )
    return target


def check_keep_machine(name: str, info: TargetInfo | None) -> None:
    """Refuse ``--keep-machine`` for a target that makes no machine for a run (by its
    own description, ``per_run``): there would be nothing to keep."""
    if info is None or not info.per_run:
        raise UserError(
            "--keep-machine applies only to a target that makes a machine for the run "
            f"(target `{name}` does not)"
        )


@dataclass
class Held:
    """An executor held by a block, released once with ``run`` and ``outcome`` as the
    block left them: the record the command last saved, and how the run ended, when it
    did."""

    hooks: Hooks
    executor: Executor
    run: RunRecord | None = None
    outcome: RunState | None = None

    def note(self, record: RunRecord) -> RunRecord:
        """Note ``record`` as the run's latest, its outcome too when it ended; the record."""
        self.run = record
        self.outcome = record.state if record.state.ended else None
        return record

    def release(self) -> None:
        """Give the target's resources back; a failure is only a warning, so that it
        never hides how the command ended."""
        try:
            self.hooks.release_executor(executor=self.executor, run=self.run, outcome=self.outcome)
        except Exception as error:  # noqa: BLE001 - releasing must not hide the real outcome
            logger.warning(f"cannot release target resources: {error}")


@contextmanager
def holding(
    project: Project, hooks: Hooks, name: str, target: BaseModel, run: RunRecord | None = None
) -> Iterator[Held]:
    """The executor of the target ``name`` (settings ``target``), released however the
    block ends; a ``UserError`` when no installed plugin runs its kind."""
    executor = hooks.create_executor(name=name, target=target, project=project, run=run)
    if executor is None:
        kind = target.kind if isinstance(target, TargetBase) else "?"
        raise UserError(f"no installed plugin can run target `{name}` (kind `{kind}`)")
    held = Held(hooks, executor, run)
    try:
        yield held
    finally:
        held.release()


def held_executor(
    project: Project, hooks: Hooks, record: RunRecord
) -> AbstractContextManager[Held]:
    """The executor of the target ``record`` ran on, released however the block ends."""
    return holding(project, hooks, record.target, run_target(project, record), record)
