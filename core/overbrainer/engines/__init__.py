"""Engines: the programs that serve an open-weights parent (vLLM, SGLang, llama.cpp).

An engine is an object (:class:`Engine`) that a plugin registers through the
``register_engines`` hook; the core asks it for its command line and what it supports, and
starts that command on a target through the executor's ``serve`` capability. The built-in
engines (:mod:`overbrainer.engines.builtin`) are registered the same way.
"""

from __future__ import annotations

import shlex
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar


@dataclass(frozen=True)
class EngineMetrics:
    """The Prometheus gauges an engine serves at ``path`` while it runs: how many requests
    it is running and how many wait in its queue. A stage follows them to keep the engine's
    batch full (``pipeline.served_live``)."""

    running: str
    waiting: str
    path: str = "/metrics"


@dataclass(frozen=True)
class EngineLaunch:
    """What an engine's command line is made from."""

    model: str
    """What the engine loads (a Hub id, a directory, a GGUF file on the target); also the
    name the roles ask for."""
    port: int
    """The port on the target's loopback (127.0.0.1) it must listen on."""
    bin_dir: str
    """The directory of the target runtime's programs (``VENV/bin/``, ending in ``/``), or
    ``""`` to find them on PATH."""
    gpus: int | None = None
    """The tensor-parallel size; None: the engine's default (one GPU, or the CPU)."""
    args: tuple[str, ...] = ()
    """The user's own flags (``serve.args``), appended last."""


class Engine(ABC):
    """One engine: how it starts, how it is known to be ready, what it supports.

    A plugin subclasses it and registers an instance with ``register(engine)`` in its
    ``register_engines`` hook; ``name`` is what ``serve.engine`` names.
    """

    name: ClassVar[str]
    health_path: ClassVar[str | None] = "/health"
    """Answered 200 once the engine is up (None: it has none; ``/v1/models`` alone tells)."""
    top_logprobs_cap: ClassVar[int | None] = None
    """The most top-k logprobs a request may ask (None: not supported)."""
    reasoning_parsers: ClassVar[tuple[str, ...]] = ()
    """The reasoning parsers its ``--reasoning-parser`` takes, for a parent with reasoning."""
    install: ClassVar[str] = ""
    """What to install on a target that lacks it (a pip requirement), for the message that
    says so."""
    module: ClassVar[str | None] = None
    """The Python package its program runs (``python -m sglang.launch_server``: ``sglang``),
    checked too: its program alone (``python``) is there without it."""

    capacity_flag: ClassVar[str | None] = None
    """The flag of ``serve.args`` that sets how many requests it runs at once."""
    default_capacity: ClassVar[int] = 1
    """How many requests it runs at once without that flag."""

    metrics: ClassVar[EngineMetrics | None] = None
    """The gauges it serves of the requests it runs and queues (None: it reports none, and
    the stages keep :meth:`capacity`)."""

    def reported_metrics(self, args: tuple[str, ...]) -> EngineMetrics | None:
        """The gauges it serves when started with ``args`` (an engine whose metrics are
        off by default says which flag turns them on here)."""
        return self.metrics

    def capacity(self, args: tuple[str, ...]) -> int:
        """How many requests it runs at once with ``args``: what the stages keep in flight
        to keep its batch full (``serve.concurrency`` overrides it)."""
        flag = self.capacity_flag
        for index, arg in enumerate(args):
            value = None
            if flag is not None and arg == flag and index + 1 < len(args):
                value = args[index + 1]
            elif flag is not None and arg.startswith(f"{flag}="):
                value = arg.split("=", 1)[1]
            if value is not None and value.isdigit() and int(value) > 0:
                return int(value)
        return self.default_capacity

    @abstractmethod
    def command(self, launch: EngineLaunch) -> list[str]:
        """The argv that serves ``launch.model`` on ``127.0.0.1:launch.port``."""

    def program(self, launch: EngineLaunch) -> str:
        """The program the command starts, checked on the target before it starts."""
        return self.command(launch)[0]

    def probe(self, launch: EngineLaunch) -> str:
        """A shell line that fails where it is not installed: its program not found, or its
        package not importable (looked up, not imported: an engine's import is slow)."""
        program = shlex.quote(self.program(launch))
        line = f"command -v {program} >/dev/null 2>&1"
        if self.module:
            find = "import importlib.util as u, sys; sys.exit(u.find_spec(sys.argv[1]) is None)"
            line += f" && {program} -c {shlex.quote(find)} {shlex.quote(self.module)}"
        return line
