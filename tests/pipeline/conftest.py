"""A project wired to the loopback provider, with prompts the fake model follows."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tests.helpers.fake_provider import FakeProvider
from tests.helpers.pipeline_data import write_project

from overbrainer.providers import retry


@pytest.fixture(autouse=True)
def fast_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Backoff steps of a millisecond: retries cost no real seconds (Retry-After still does)."""
    monkeypatch.setattr(retry, "BACKOFF_UNIT", 0.001)


@pytest.fixture
def project_dir(tmp_path: Path, provider: FakeProvider) -> Path:
    """The pipeline project: two topics, one openai-protocol provider (the loopback one)."""
    return write_project(tmp_path / "project", provider.url)


@pytest.fixture
def tmpfs_of(tmp_path: Path) -> Iterator[Callable[[str], Path]]:
    """Mounts a tmpfs of the size asked (``"8m"``), each unmounted at the end; root only:
    skipped elsewhere, but failed in CI, where a skip would hide what is not tested."""
    mounted: list[Path] = []

    def mount(size: str) -> Path:
        point = tmp_path / f"disk{len(mounted)}"
        point.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(point)],
                              capture_output=True, check=False)  # fmt: skip
        if done.returncode != 0:
            if os.environ.get("CI"):
                pytest.fail(f"cannot mount a tmpfs: {done.stderr.decode()}")
            pytest.skip("mounting a tmpfs needs root")
        mounted.append(point)
        return point

    yield mount
    for point in mounted:
        subprocess.run(["umount", "-l", str(point)], check=True)
