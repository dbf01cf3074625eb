"""For a target whose jobs run on a POSIX host reached by commands (this machine, SSH, a
pod's SSH): subclass ``HostExecutor`` with a ``Host`` (``LocalHost`` is this machine) and
the runtime keys it takes (``HostRuntime``: ``HostTarget.host_runtime()``, or made by a
target of another shape); ``Completed`` and ``HostError`` are what a host's commands give;
``StreamWatches`` serves a remote host's ``wait_for_change`` (one long-lived script a job
directory); ``job_environment`` is the environment a job starts with."""

from __future__ import annotations

from overbrainer.config.model import HostTarget
from overbrainer.config.runtime import HostRuntime
from overbrainer.job.changes import StreamWatches
from overbrainer.job.executor import HostExecutor
from overbrainer.job.host import Completed, Host, HostError
from overbrainer.job.localhost import LocalHost, job_environment

__all__ = [
    "Completed",
    "Host",
    "HostError",
    "HostExecutor",
    "HostRuntime",
    "HostTarget",
    "LocalHost",
    "StreamWatches",
    "job_environment",
]
