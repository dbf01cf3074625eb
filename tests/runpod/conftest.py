"""The fake Runpod API on loopback, its pods real sshds on 127.0.0.1, and the settings
that point the runpod target at it with a pod's life measured in seconds."""

from __future__ import annotations

import getpass
from collections.abc import Iterator

import pytest
from tests.runpod.fake_runpod import FakeRunpod
from tests.tools import need

API_KEY = "rpa_FAKEACCOUNTKEY0123456789abcdef"
FAST_JOBS = {"FAKE_AXOLOTL_STEP_SECONDS": "0.02"}
TIMING = "minute=0.5,tick=0.2,poll=0.05,confirm=0.02,lease_minutes=6"


@pytest.fixture
def fake_runpod(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[FakeRunpod]:
    need("sshd")  # the pods' sshd
    need("curl")  # their watchdog's
    fake = FakeRunpod(tmp_path_factory.mktemp("runpod"), API_KEY, pod_env=dict(FAST_JOBS))
    fake.start()
    monkeypatch.setenv("OVERBRAINER_RUNPOD__API_KEY", API_KEY)
    monkeypatch.setenv("OVERBRAINER_RUNPOD__BASE_URL", fake.url)
    monkeypatch.setenv("OVERBRAINER_RUNPOD__REST_URL", f"{fake.url}/v1")
    monkeypatch.setenv("RUNPOD_OVERBRAINER_TIMING", TIMING)
    monkeypatch.setenv("RUNPOD_OVERBRAINER_SSH_USER", getpass.getuser())
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    yield fake
    fake.stop()
