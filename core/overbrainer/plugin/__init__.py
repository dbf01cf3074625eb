"""The public face of overbrainer for plugin authors, in tiers: what a target may import.

A target plugin (``plugins/*``, ``contrib/*``, a third party's package) imports from this
package only; the rest of the core is private and may change (import-linter enforces it in
CI, and that this package imports nothing of the commands but :mod:`.commands`).
``docs/plugins.md`` explains the contract: the hooks (:mod:`overbrainer.hookspecs`), the
job directory (``layout``), the runner, and the order of the calls.

This module holds what every target needs:

- Executors as objects: subclass ``Executor`` (one method per operation, the optional ones
  declared in ``capabilities``) and register its kind, with its settings model (a
  ``TargetBase``, fields typed ``RemotePath`` or ``NonEmpty``), with an ``ExecutorHooks``
  object; the core's dispatcher calls the methods. A hook written with ``hookimpl``
  answers first.
- What the operations take and return: ``Project``, ``RunRecord`` (with ``RunState``),
  ``TargetInfo`` (with ``SecretsChannel``), ``JobSpec``, ``JobHandle``, ``JobPoll``,
  ``JobStatus`` (``JobState``; ``RUNNING``, ``CANCELLED``, ``LOST``), ``ArtifactSpec``,
  ``LogChunk``; ``JobDirectory`` and ``layout`` for the job directory.
- Errors: ``UserError`` (a message for the user), ``TransientError`` (worth retrying).

The other tiers: :mod:`.host` (a POSIX host: ``HostExecutor`` and its parts),
:mod:`.operations` (the types of the optional operations and of the other hooks: serve,
shell, price, machine log, engines, watch), :mod:`.settings` (settings field types and
sections), :mod:`.files` (project files, manifests, metric lines, redaction, spend) and
:mod:`.commands` (for a plugin's own commands).
"""

from __future__ import annotations

from overbrainer import hookimpl
from overbrainer.config.model import NonEmpty, RemotePath, TargetBase
from overbrainer.errors import TransientError, UserError
from overbrainer.job import layout
from overbrainer.job.adapter import ExecutorHooks
from overbrainer.job.directory import JobDirectory
from overbrainer.job.interface import Executor
from overbrainer.job.record import JobHandle, RunRecord, RunState
from overbrainer.job.spec import (
    CANCELLED,
    LOST,
    RUNNING,
    ArtifactSpec,
    JobPoll,
    JobSpec,
    JobState,
    JobStatus,
    LogChunk,
    SecretsChannel,
    TargetInfo,
)
from overbrainer.project import Project

__all__ = [
    "CANCELLED",
    "LOST",
    "RUNNING",
    "ArtifactSpec",
    "Executor",
    "ExecutorHooks",
    "JobDirectory",
    "JobHandle",
    "JobPoll",
    "JobSpec",
    "JobState",
    "JobStatus",
    "LogChunk",
    "NonEmpty",
    "Project",
    "RemotePath",
    "RunRecord",
    "RunState",
    "SecretsChannel",
    "TargetBase",
    "TargetInfo",
    "TransientError",
    "UserError",
    "hookimpl",
    "layout",
]
