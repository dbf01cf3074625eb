"""The registration of a plugin written as executor classes.

A plugin whose executors subclass :class:`~overbrainer.job.interface.Executor` registers
one :class:`ExecutorHooks` object (its entry point names it) instead of writing hooks: the
object registers the plugin's target kinds, creates an executor for a target of one of
them, and prices one. The operations themselves need no hook of the plugin: the core's
built-in dispatcher (:mod:`overbrainer.job.hooks`) calls the methods of any ``Executor``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Generic, TypeVar

from pydantic import BaseModel

from overbrainer import hookimpl
from overbrainer.job.interface import Executor

if TYPE_CHECKING:
    from overbrainer.job.record import RunRecord
    from overbrainer.job.spec import TargetPrice
    from overbrainer.project import Project

T = TypeVar("T", bound=BaseModel)


class ExecutorHooks(Generic[T]):
    """The registration hooks of a plugin written as classes.

    Args:
        executors: the classes of the executors ``create`` makes, for ``overbrainer
            plugins`` to show what each offers (its ``capabilities``). A class may be
            named ``"module:Class"``, so that loading the plugin does not import a slow
            executor module; only ``overbrainer plugins`` imports it.
        targets: the target kinds to register, each with its settings model.
        create: builds the executor for a target of one of those kinds (``name``, its
            validated table, the project, and the run record of a later command).
        price: ``estimate_price`` for a target of those kinds.

    Only the hooks given something to do are implemented, so ``overbrainer plugins``
    lists what the plugin really provides.
    """

    def __init__(
        self,
        *executors: type[Executor] | str,
        targets: Mapping[str, type[T]] | None = None,
        create: Callable[[str, T, Project, RunRecord | None], Executor] | None = None,
        price: Callable[[str, T, Project], TargetPrice | None] | None = None,
    ) -> None:
        self._executors = executors
        self._targets = dict(targets or {})
        if self._targets and create is None:
            raise TypeError("ExecutorHooks: targets need a create function")
        models = tuple(self._targets.values())

        def register_targets(register: Callable[[str, type[BaseModel]], None]) -> None:
            for kind, model in self._targets.items():
                register(kind, model)

        def create_executor(
            name: str, target: BaseModel, project: Project, run: RunRecord | None
        ) -> Executor | None:
            if create is None or not isinstance(target, models):
                return None
            return create(name, target, project, run)

        def estimate_price(name: str, target: BaseModel, project: Project) -> TargetPrice | None:
            if price is None or not isinstance(target, models):
                return None
            return price(name, target, project)

        if self._targets:
            self.register_targets = hookimpl(register_targets)
            self.create_executor = hookimpl(create_executor)
        if price is not None:
            self.estimate_price = hookimpl(estimate_price)

    def executor_classes(self) -> list[type[Executor]]:
        """The executor classes named, a ``"module:Class"`` imported now (an ``ImportError``
        or ``TypeError`` when it cannot be)."""
        return [_load(served) if isinstance(served, str) else served for served in self._executors]

    def __repr__(self) -> str:
        names = ", ".join(
            served if isinstance(served, str) else served.__name__ for served in self._executors
        )
        names = names or "no executor"
        kinds = ", ".join(self._targets) or "no kind"
        return f"ExecutorHooks({names}; {kinds})"


def _load(path: str) -> type[Executor]:
    """The class ``module:Class``, imported."""
    module, _, name = path.partition(":")
    found = getattr(importlib.import_module(module), name, None)
    if not (isinstance(found, type) and issubclass(found, Executor)):
        raise TypeError(f"{path} is not an Executor class")
    return found
