"""The CLI commands the TUI runs, each in a process of its own, their output fed back line
by line. Stopped by PID (SIGTERM, as Ctrl-C would stop it) when the TUI quits."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

BOOT = "import sys; from overbrainer.cli import main; sys.argv[0] = 'overbrainer'; main()"

LineSink = Callable[[str, str, str], None]
"""(command name, level, text)."""


def level_of(line: str, stream: str) -> str:
    """The level a CLI line was written at, from its prefix."""
    for level in ("error", "warning", "debug", "trace"):
        if line.startswith(f"{level}: "):
            return level
    return "info"


@dataclass
class Job:
    """One command started by the TUI."""

    name: str
    args: list[str]
    process: subprocess.Popen[str]
    threads: list[threading.Thread] = field(default_factory=list)

    @property
    def running(self) -> bool:
        return self.process.poll() is None


class CommandRunner:
    """Starts ``overbrainer -C PROJECT ARGS`` and reports its lines and its end."""

    def __init__(
        self,
        project_dir: Path,
        on_line: LineSink,
        on_exit: Callable[[Job, int], None],
        python: str = sys.executable,
    ) -> None:
        self.project_dir = project_dir
        self.on_line = on_line
        self.on_exit = on_exit
        self.python = python
        self.jobs: list[Job] = []

    def start(self, name: str, args: list[str]) -> Job:
        env = {**os.environ, "NO_COLOR": "1"}
        process = subprocess.Popen(
            [self.python, "-c", BOOT, "-C", str(self.project_dir), *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            env=env,
            start_new_session=True,
        )
        job = Job(name, args, process)
        self.jobs.append(job)
        out = threading.Thread(target=self._read, args=(job, "stdout"), daemon=True)
        err = threading.Thread(target=self._read, args=(job, "stderr"), daemon=True)
        job.threads = [out, err]
        out.start()
        err.start()
        threading.Thread(target=self._wait, args=(job,), daemon=True).start()
        return job

    def running(self, name: str | None = None) -> list[Job]:
        return [job for job in self.jobs if job.running and (name is None or job.name == name)]

    def stop_all(self, timeout: float = 10.0) -> None:
        """SIGTERM every running command (a stage stops cleanly and resumes later; a
        followed run keeps running on its target), then SIGKILL what is left."""
        for job in self.running():
            try:
                os.kill(job.process.pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
        for job in list(self.jobs):
            try:
                job.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                job.process.kill()
                job.process.wait()

    def _read(self, job: Job, stream: str) -> None:
        pipe = job.process.stdout if stream == "stdout" else job.process.stderr
        assert pipe is not None
        with pipe:
            for line in pipe:
                text = line.rstrip("\n")
                self.on_line(job.name, level_of(text, stream), text)

    def _wait(self, job: Job) -> None:
        code = job.process.wait()
        for thread in job.threads:
            thread.join(timeout=5)
        self.on_exit(job, code)
