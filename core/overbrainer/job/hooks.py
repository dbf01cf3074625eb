"""The built-in plugin: the hooks of every ``HostExecutor``, through the adapter.

Registered by the core like any plugin and answering last, so a POSIX-host target plugin
gives only its kinds and a ``create_executor`` that returns a ``HostExecutor``.
"""

from __future__ import annotations

from pydantic import BaseModel

from overbrainer.job.adapter import ExecutorHooks

plugin: ExecutorHooks[BaseModel] = ExecutorHooks(
    "overbrainer.job.executor:HostExecutor", trylast=True
)
"""Named, not imported: a command that runs no job (``answers``) does not load the job code;
every ``HostExecutor`` was made by importing it."""
