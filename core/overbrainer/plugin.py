"""The public face of overbrainer for plugin authors: everything a target may import.

A target plugin (``plugins/*``, ``contrib/*``, a third party's package) imports from this
module only; the rest of the core is private and may change (import-linter enforces it in
CI). ``docs/plugins.md`` explains the contract: the hooks (:mod:`overbrainer.hookspecs`),
the job directory (:mod:`overbrainer.job.layout`), the runner, and the order of the calls.

- Executors as objects: subclass ``Executor`` (one method per operation, the optional ones
  declared in ``capabilities``) and register its kind with an ``ExecutorHooks`` object; the
  core's dispatcher calls the methods. A hook written with ``hookimpl`` answers first.
- Errors: ``UserError`` (a message for the user), ``TransientError`` (worth retrying),
  ``MissingArtifact``, ``ArtifactMismatch``.
- What hooks take and return: ``JobSpec``, ``JobPoll``, ``JobStatus`` (``RUNNING``,
  ``CANCELLED``, ``LOST``), ``ArtifactSpec``, ``TargetInfo`` (with ``Launch``), ``SecretsChannel``,
  ``LogChunk``, ``JobHandle`` (with ``Container``), ``RunRecord``, ``Project``; for
  ``open_shell``, ``TargetShell``; for ``estimate_price``, ``TargetPrice``; for
  ``show_machine_log``, ``MachineLogQuery``; for the serve hooks, ``ServeSpec``,
  ``ServeHandle`` and ``ServeState``; for ``register_engines``, ``Engine``,
  ``EngineLaunch`` and ``EngineMetrics``; for the ``watch`` hooks, ``Settings`` and
  ``CycleSummary``.
- Settings models for ``register_targets``: ``TargetBase``, ``HostTarget`` and the field
  types ``NonEmpty``, ``Finite``, ``RemotePath``, ``EnvPattern``, ``HttpUrl``,
  ``comma_list``; for ``register_settings`` (a top-level table of the plugin's own, read
  with ``Settings.section``), ``Section`` and ``RegisterSection``; ``resolve_secret``
  reads a secret setting's ``vault:`` reference when the plugin needs the value.
- Helpers: ``layout`` (the job directory's file names), the manifest (``parse_manifest``,
  ``select``, ``covered``, ``manifest_of``, ``verify``, ``sha256_file``, and
  ``collect_directory`` for a job directory this machine can read), metric lines
  (``complete_lines``, ``parse_event``), and the POSIX host pair ``Host``/``HostExecutor``
  with ``LocalHost`` (this machine), ``HostError`` and ``HostRuntime`` (the runtime keys
  ``HostExecutor`` takes: ``HostTarget.host_runtime()``, or made by a target of another
  shape); ``StreamWatches`` for a remote host's ``wait_for_change`` (one long-lived
  script a job directory).
- For a plugin's own commands (``register_commands``): ``current_project`` (the project of
  the running command), ``ProjectLock`` (the project's writer lock, a context manager) and
  ``check_run_id`` (refuses an id that is not a run id), ``resolve_run_id`` (``latest``
  or a unique prefix to the run id, as the core's commands take them), ``read_run`` (a
  run's record, ``runs/<id>/run.json``), ``quiet_end`` (Ctrl-C and a closed standard
  output end a printing command quietly).
- What a run's machines cost, for the Prometheus endpoint: ``write_spend`` and
  ``MachineSpend`` (``layout.TARGET_SPEND``, beside ``target.note``).
- Project files, read and written as the core does (:mod:`overbrainer.files`):
  ``read_regular`` (a regular file only, within a bound), ``write_atomic`` (rename, never
  through a link), ``open_append`` (``O_NOFOLLOW``), ``mkdir_nofollow`` and ``own_path``
  (a path from a record, checked to be inside a directory).
- Redaction, for what a plugin prints or keeps of a machine's own logs: ``redact``,
  ``LineRedactor`` (a private key block across lines), ``register_secret`` and
  ``escape_controls`` (a line stays one line, with no terminal control).
"""

from __future__ import annotations

from contextlib import AbstractContextManager

from overbrainer import hookimpl
from overbrainer.config.model import (
    EnvPattern,
    Finite,
    HostTarget,
    HttpUrl,
    NonEmpty,
    RemotePath,
    Section,
    Settings,
    TargetBase,
    comma_list,
)
from overbrainer.config.runtime import HostRuntime
from overbrainer.config.secrets import resolve_secret
from overbrainer.config.sections import RegisterSection
from overbrainer.cycles import CycleSummary
from overbrainer.engines import Engine, EngineLaunch, EngineMetrics
from overbrainer.errors import ArtifactMismatch, MissingArtifact, TransientError, UserError
from overbrainer.files import mkdir_nofollow, open_append, own_path, read_regular, write_atomic
from overbrainer.job import layout
from overbrainer.job.adapter import ExecutorHooks
from overbrainer.job.changes import StreamWatches
from overbrainer.job.executor import HostExecutor
from overbrainer.job.host import Completed, Host, HostError
from overbrainer.job.interface import Executor
from overbrainer.job.localhost import LocalHost, job_environment
from overbrainer.job.manifest import (
    Entry,
    Manifest,
    collect_directory,
    covered,
    manifest_of,
    parse_manifest,
    select,
    sha256_file,
    verify,
)
from overbrainer.job.metrics import complete_lines, parse_event
from overbrainer.job.record import Container, JobHandle, RunRecord, RunState
from overbrainer.job.serving import ServeHandle, ServeSpec, ServeState
from overbrainer.job.shell import TargetShell
from overbrainer.job.spec import (
    CANCELLED,
    LOST,
    RUNNING,
    ArtifactSpec,
    JobPoll,
    JobSpec,
    JobState,
    JobStatus,
    Launch,
    LogChunk,
    MachineLogQuery,
    SecretsChannel,
    TargetInfo,
    TargetPrice,
)
from overbrainer.job.spend import MachineSpend, write_spend
from overbrainer.project import Project
from overbrainer.redact import LineRedactor, escape_controls, redact, register_secret
from overbrainer.runs.ids import check_run_id
from overbrainer.runs.lock import ProjectLock
from overbrainer.runs.resolve import resolve_run_id


def current_project() -> Project:
    """The project of the command being run, for a command a plugin registered."""
    from overbrainer.cli.context import current_app

    return current_app().project


def read_run(project: Project, run_id: str) -> RunRecord:
    """The record of run ``run_id`` of ``project``, read and checked as the core reads it
    (for a plugin's command about one run: which target it ran on); ``UserError`` when
    there is no such run or its record is not valid."""
    from overbrainer.runs.store import RunStore

    return RunStore(project.dir).load(run_id)


def quiet_end() -> AbstractContextManager[None]:
    """For a command that prints until stopped: Ctrl-C and a closed standard output
    (``| head``) end it quietly, exit status 0, as they end ``runs logs``."""
    from overbrainer.cli.machinelog import quiet_end as ending

    return ending()


__all__ = [
    "CANCELLED",
    "LOST",
    "RUNNING",
    "ArtifactMismatch",
    "ArtifactSpec",
    "Completed",
    "Container",
    "CycleSummary",
    "Engine",
    "EngineLaunch",
    "EngineMetrics",
    "Entry",
    "EnvPattern",
    "Executor",
    "ExecutorHooks",
    "Finite",
    "Host",
    "HostError",
    "HostExecutor",
    "HostRuntime",
    "HostTarget",
    "HttpUrl",
    "JobHandle",
    "JobPoll",
    "JobSpec",
    "JobState",
    "JobStatus",
    "Launch",
    "LineRedactor",
    "LocalHost",
    "LogChunk",
    "MachineLogQuery",
    "MachineSpend",
    "Manifest",
    "MissingArtifact",
    "NonEmpty",
    "Project",
    "ProjectLock",
    "RegisterSection",
    "RemotePath",
    "RunRecord",
    "RunState",
    "SecretsChannel",
    "Section",
    "ServeHandle",
    "ServeSpec",
    "ServeState",
    "Settings",
    "StreamWatches",
    "TargetBase",
    "TargetInfo",
    "TargetPrice",
    "TargetShell",
    "TransientError",
    "UserError",
    "check_run_id",
    "collect_directory",
    "comma_list",
    "complete_lines",
    "covered",
    "current_project",
    "escape_controls",
    "hookimpl",
    "job_environment",
    "layout",
    "manifest_of",
    "mkdir_nofollow",
    "open_append",
    "own_path",
    "parse_event",
    "parse_manifest",
    "quiet_end",
    "read_regular",
    "read_run",
    "redact",
    "register_secret",
    "resolve_run_id",
    "resolve_secret",
    "select",
    "sha256_file",
    "verify",
    "write_atomic",
    "write_spend",
]
