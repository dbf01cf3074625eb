"""A shell on a target for the commands after training (export, compare)."""

from __future__ import annotations

from dataclasses import dataclass

from overbrainer.job.host import Host


@dataclass(frozen=True)
class TargetShell:
    """What ``open_shell`` returns: the target's POSIX host, the Python of its runtime (the
    one that has Axolotl, torch and transformers) and its work directory."""

    host: Host
    python: str
    workdir: str
    run_dir: str | None = None
    """Where the run's directory is on this host, when not at the run's ``remote_dir``
    (a machine made for this command)."""
    price_per_hour: float | None = None
    """What the machine costs (USD per hour), when the target knows (a Runpod pod)."""
