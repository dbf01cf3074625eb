"""The executor contract: the hooks a target plugin implements.

Every hook is called with keyword arguments only (pluggy's rule). Implementations must
not give their arguments default values: pluggy treats such arguments as opt-in and does
not pass them. Each ``firstresult`` hook stops at the first non-None result, so an
implementation returns None for an executor (or a target kind) that is not its own.

The core owns Ctrl-C: ``launch_job`` and ``cancel_job`` are called with SIGINT deferred,
and plugins never catch ``KeyboardInterrupt``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from pydantic import BaseModel

    from overbrainer.job.spec import ArtifactSpec, JobPoll, JobSpec, JobStatus
    from overbrainer.project import Project
    from overbrainer.runs.record import JobHandle, RunRecord

hookspec = pluggy.HookspecMarker("overbrainer")


@hookspec
def register_targets(register: Callable[[str, type[BaseModel]], None]) -> None:
    """Declare the target kinds this plugin provides.

    Called once when the plugins are loaded. Call ``register(kind, model)`` for each
    kind: ``model`` is the pydantic model that validates a ``[targets.NAME]`` table whose
    ``kind`` is that value (the model must accept the ``kind`` key). Every plugin's
    implementation is called.
    """


@hookspec(firstresult=True)
def create_executor(name: str, target: BaseModel, project: Project, run: RunRecord | None) -> Any:
    """Connect to, or prepare, the target ``name`` configured as ``target``.

    ``run`` is None for a new run, and the run's record when a later command (attach,
    stop, cancel) needs its job again, so that a machine made for one run can be found.
    Return an executor object, any type the plugin's other hooks recognise, or None when
    ``target`` is not of a kind this plugin registered. Raise ``UserError`` when the
    target cannot be reached. Stops at the first non-None result.
    """


@hookspec(firstresult=True)
def claim_run_dir(executor: Any, run_id: str) -> str | None:
    """Reserve the directory of run ``run_id`` on the target and return its absolute path.

    The claim is exclusive: return ``""`` when another owner already holds that id there,
    so the core tries the next id. Stops at the first non-None result.
    """


@hookspec(firstresult=True)
def launch_job(executor: Any, run: RunRecord, job: JobSpec) -> JobHandle | None:
    """Upload ``job.local_dir`` to the run's directory on the target and start the job.

    The job must be detached (it outlives this process) and its secrets must reach it only
    through its environment. Return the handle recorded in ``run.json``. Called with SIGINT
    deferred: a job started but not recorded would be lost. Stops at the first non-None
    result.
    """


@hookspec(firstresult=True)
def poll_job(executor: Any, run: RunRecord) -> JobPoll | None:
    """Look at the job of ``run`` once: its status and the metric lines written since the
    previous poll of this executor.

    Called every two seconds while a run is followed; a plugin with periodic duties (a
    pod's lease, a cost cap) does them here. Raise on a transient failure: the core retries
    five times before it detaches. Stops at the first non-None result.
    """


@hookspec(firstresult=True)
def request_snapshot(executor: Any, run: RunRecord, reason: str) -> bool | None:
    """Ask the job of ``run`` to save a checkpoint at the end of its current step and stop.

    Writes ``snapshot.request`` holding ``reason`` (atomically; writing again changes only
    the reason). Return True once written. Stops at the first non-None result.
    """


@hookspec(firstresult=True)
def cancel_job(executor: Any, run: RunRecord) -> JobStatus | None:
    """Stop the job of ``run``: its container, then its process group with TERM, then KILL.

    Idempotent, and never signals a job that already finished: return the status it ended
    with then (``exited N``), else ``cancelled``. Called with SIGINT deferred. Stops at the
    first non-None result.
    """


@hookspec(firstresult=True)
def collect_artifacts(
    executor: Any, run: RunRecord, artifacts: ArtifactSpec, dest: Path
) -> list[str] | None:
    """Bring ``artifacts`` of ``run`` home into ``dest`` and verify them.

    The target computes a SHA-256 manifest, the files are downloaded, and every file is
    compared; raise ``UserError`` on a missing, extra or differing file. Return the
    relative paths retrieved. Stops at the first non-None result.
    """


@hookspec
def release_executor(executor: Any, run: RunRecord | None, outcome: str | None) -> None:
    """Close what ``executor`` holds; for a machine made for one run, delete it once its
    results are home.

    ``outcome`` is the run's state when the command ends, or None when it only detached.
    Every plugin's implementation is called; ignore executors that are not your own.
    """
