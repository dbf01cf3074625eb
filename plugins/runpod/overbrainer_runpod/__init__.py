"""The ``runpod`` target: a GPU pod on Runpod's Secure Cloud, created for each run.

The runpod SDK takes about two seconds to import: only a command that uses a target of
this kind imports it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel

from overbrainer.plugin import Executor, ExecutorHooks, Project, RunRecord, hookimpl
from overbrainer.plugin.operations import MachineLogQuery, ServedModel, TargetPrice
from overbrainer.plugin.settings import RegisterSection
from overbrainer_runpod.api import api_of
from overbrainer_runpod.executor import RunpodExecutor
from overbrainer_runpod.settings import RunpodAccount, RunpodTarget, account, rest_url

__all__ = ["RunpodAccount", "RunpodExecutor", "RunpodTarget", "account", "plugin", "rest_url"]


def create_executor(
    name: str, target: RunpodTarget, project: Project, run: RunRecord | None
) -> Executor:
    return RunpodExecutor(name, target, project, api_of(*account(project)), run=run)


class RunpodHooks(ExecutorHooks[RunpodTarget]):
    """The registration of ``RunpodExecutor``, with the plugin's own hooks: the ``[runpod]``
    account, ``overbrainer pod``, a pod's log for ``runs logs --pod``, and a pod's price
    (its own, not the adapter's ``price``: a serve's pod is sized by its served model)."""

    @hookimpl
    def register_settings(self, register: RegisterSection) -> None:
        register(
            "runpod", RunpodAccount, secrets=("api_key",), env_only=("base_url", "rest_url")
        )

    @hookimpl
    def register_commands(self, register: Callable[[Any], None]) -> None:
        from overbrainer_runpod.cli import pod

        register(pod)

    @hookimpl(specname="estimate_price")
    def pod_price(
        self, target: BaseModel, project: Project, serve: ServedModel | None
    ) -> TargetPrice | None:
        """``estimate_price``: a new pod's price; a serve's (``serve``) sized by its served
        model."""
        if not isinstance(target, RunpodTarget):
            return None
        from overbrainer_runpod.price import estimate

        return estimate(target, project, serve)

    @hookimpl
    def show_machine_log(
        self, project: Project, run: RunRecord, query: MachineLogQuery
    ) -> Literal[True] | None:
        """``runs logs RUN --pod`` of a run on a pod: ``overbrainer pod logs``'s output."""
        from overbrainer_runpod.podlog import ran_on_a_pod, show_pod_log

        if not ran_on_a_pod(project, run):
            return None
        show_pod_log(project, run.id, query, "runs")
        return True


plugin = RunpodHooks(
    RunpodExecutor,
    targets={"runpod": RunpodTarget},
    create=create_executor,
)
"""What the entry point names."""
