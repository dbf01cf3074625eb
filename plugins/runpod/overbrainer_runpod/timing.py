"""The time constants of the runpod target, in seconds, and their override for tests.

``RUNPOD_OVERBRAINER_TIMING="minute=0.5,tick=0.2,poll=0.05"`` scales every duration the
settings give in minutes or hours (a minute lasts ``minute`` seconds) and sets the
watchdog's tick, the readiness poll and the deletion check: the end-to-end tests run a
pod's whole life in seconds. ``RUNPOD_OVERBRAINER_SSH_USER`` names the user SSH logs in
as (a pod's is root; a test pod runs as the test's user).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

ENV = "RUNPOD_OVERBRAINER_TIMING"
USER_ENV = "RUNPOD_OVERBRAINER_SSH_USER"


@dataclass(frozen=True)
class Timing:
    minute: float = 60.0
    """How long a minute of the settings lasts."""
    tick: float = 60.0
    """How often the watchdog looks."""
    poll: float = 5.0
    """Readiness: how often the pod is asked for (the reference's 5 s)."""
    ready_minutes: float = 15.0
    """Readiness: how long, in minutes."""
    confirm: float = 2.0
    """Deletion: the pause between two lookups that must both find nothing."""
    lease_renew_minutes: float = 5.0
    lease_minutes: float = 15.0
    snapshot_lead_minutes: float = 15.0
    client_guard_minutes: float = 5.0

    def seconds(self, minutes: float) -> float:
        return minutes * self.minute


def timing() -> Timing:
    """The constants, with the test override applied."""
    values: dict[str, float] = {}
    for part in os.environ.get(ENV, "").split(","):
        name, _, value = part.partition("=")
        if name.strip() in Timing.__dataclass_fields__ and value.strip():
            values[name.strip()] = float(value)
    return Timing(**values)


def ssh_user() -> str:
    return os.environ.get(USER_ENV) or "root"
