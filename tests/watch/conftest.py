"""A project wired to the loopback provider and the fake trainer, and a real `watch` process
to drive by editing its files (stopped by its PID)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path

import pytest
from tests.helpers.fake_provider import FakeProvider
from tests.helpers.pipeline_data import PIPELINE_CONFIG, write_project
from tests.helpers.trainer import BOOT, group_alive
from tests.helpers.watching import TRAINING, Watching

from overbrainer.providers import retry
from overbrainer.testing.fake_axolotl import make_fake_venv


@pytest.fixture(autouse=True)
def fast_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(retry, "BACKOFF_UNIT", 0.001)


@pytest.fixture
def project_dir(tmp_path: Path, provider: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Two topics, the loopback provider, and training on the fake trainer."""
    venv = make_fake_venv(tmp_path / "fake-venv")
    monkeypatch.setenv("FAKE_AXOLOTL_STEP_SECONDS", "0.01")
    monkeypatch.setenv("FAKE_AXOLOTL_STEPS", "3")
    return write_project(
        tmp_path / "project", provider.url, PIPELINE_CONFIG + TRAINING.format(venv=venv)
    )


@pytest.fixture
def watch(project_dir: Path) -> Iterator[callable]:
    """``watch(where=..., **env)``: start ``overbrainer watch`` on the project, by default as
    the README writes it (``cd project && overbrainer watch``); ``where="relative"`` runs
    ``overbrainer -C project watch`` from its parent, ``"absolute"`` passes its full path."""
    started: list[Watching] = []

    def start(where: str = "inside", **env: str) -> Watching:
        chosen = {
            "inside": (project_dir, []),
            "relative": (project_dir.parent, ["-C", project_dir.name]),
            "absolute": (Path("/"), ["-C", str(project_dir)]),
        }
        cwd, flags = chosen[where]
        process = subprocess.Popen(
            [sys.executable, "-c", BOOT, *flags, "watch"],
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **env},
        )
        watching = Watching(project_dir, process)

        def pump(stream, put) -> None:
            for text in stream:
                put(text.rstrip("\n"))

        threading.Thread(target=pump, args=(process.stdout, watching.out.put), daemon=True).start()
        threading.Thread(
            target=pump, args=(process.stderr, watching.err.append), daemon=True
        ).start()
        started.append(watching)
        return watching

    yield start
    for watching in started:
        with suppress(ProcessLookupError):
            watching.process.kill()
        watching.process.wait()
    for pid_file in (project_dir / "runs").glob("*/job.pid"):
        with suppress(ProcessLookupError, ValueError):
            if group_alive(int(pid_file.read_text())):
                os.killpg(int(pid_file.read_text()), signal.SIGKILL)
