"""A project wired to the loopback provider and the fake trainer, and a real `watch` process
to drive by editing its files (stopped by its PID)."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from tests.train.conftest import BOOT, group_alive

from fake_provider import FakeProvider
from overbrainer.providers import retry
from overbrainer.testing.fake_axolotl import make_fake_venv
from pipeline_data import PIPELINE_CONFIG, write_project

TRAINING = """
[training]
target = "local"
base_model = "Qwen/Qwen3-0.6B"
adapter = "lora"
learning_rate = 0.0002

[targets.local]
kind = "local"
venv = "{venv}"
pass_env = ["FAKE_AXOLOTL_*"]
"""


def save(path: Path, text: str) -> None:
    """As editors do: a new file renamed over the old one."""
    temp = path.with_name(path.name + ".tmp")
    temp.write_text(text, encoding="utf-8")
    os.replace(temp, path)


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


@dataclass
class Watching:
    """A running ``overbrainer watch`` and what it printed so far."""

    project_dir: Path
    process: subprocess.Popen[str]
    out: queue.Queue[str] = field(default_factory=queue.Queue)
    err: list[str] = field(default_factory=list)
    seen: list[str] = field(default_factory=list)

    def line(self, pattern: str, timeout: float = 30) -> re.Match[str]:
        """The next stdout line matching ``pattern`` (lines before it are kept in ``seen``)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            assert left > 0, f"no line matching {pattern!r}; stdout {self.seen}; stderr {self.err}"
            try:
                text = self.out.get(timeout=left)
            except queue.Empty:
                continue
            self.seen.append(text)
            found = re.search(pattern, text)
            if found:
                return found

    def quiet(self, seconds: float) -> list[str]:
        """The stdout lines printed within ``seconds`` (none expected, usually)."""
        lines = []
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            with suppress(queue.Empty):
                lines.append(self.out.get(timeout=left))
        self.seen += lines
        return lines

    def stderr_has(self, text: str, timeout: float = 10) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.err):
            assert time.monotonic() < deadline, f"no {text!r} in stderr: {self.err}"
            time.sleep(0.05)

    def edit(self, old: str, new: str) -> None:
        config = self.project_dir / "overbrainer.toml"
        text = config.read_text(encoding="utf-8")
        assert old in text
        save(config, text.replace(old, new, 1))

    def interrupt(self, signum: int = signal.SIGINT) -> int:
        self.process.send_signal(signum)
        return self.process.wait(timeout=30)


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
