"""A running ``overbrainer watch`` read line by line, and the edits a test makes to its
project as an editor would."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import time
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

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


CYCLE = (
    r"^watch: cycle {n} \((?P<changed>[^)]*)\): (?P<ran>.*); "
    r"(?P<seconds>[\d.]+) s, \$(?P<cost>[\d.]+)"
)


def edit_answer_prompt(project_dir: Path) -> None:
    """An edit that makes every answer stale: the system prompt answers were made with."""
    prompt = project_dir / "prompts" / "answer_system.txt"
    save(prompt, "new|" + prompt.read_text())
