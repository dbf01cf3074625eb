"""``.overbrainer/exchanges.jsonl``: the prompts and replies of the last stages, for
``overbrainer log``.

One line an exchange: ``{at, stage, item, model, messages, reply, reasoning, failure}``
(``failure``: why the reply could not be used, or why there was none). Texts are redacted
before they are written; the file is made ``0600``, appended without following a link,
and rotated past ``MAX_BYTES`` (the one before is kept as ``exchanges.1.jsonl``), so that a
100,000-answer stage keeps its last tens of megabytes, not gigabytes.
"""

from __future__ import annotations

import json
import os
import stat
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
from loguru import logger

from overbrainer.errors import UserError
from overbrainer.files import mkdir_nofollow
from overbrainer.redact import redact

EXCHANGES = Path(".overbrainer") / "exchanges.jsonl"
ROTATED = Path(".overbrainer") / "exchanges.1.jsonl"
MAX_BYTES = 16 << 20
READ_LIMIT = 64 << 20
PROMPTS_KEPT = 64


class ExchangeLog:
    """Appends exchanges to the project's log; a failure to write is a debug line, never
    a failed stage. The file stays open until ``close`` (a stage's requests come by the
    thousand)."""

    def __init__(self, project_dir: Path) -> None:
        self.path = project_dir / EXCHANGES
        self.rotated = project_dir / ROTATED
        self._broken = False
        self._fd = -1
        self._size = 0
        self._second = -1
        self._at = ""
        self._prompts: dict[str, str] = {}
        """Prompts redacted already: a stage's system prompts repeat for every request."""

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def _now(self) -> str:
        """The time in whole seconds, as ``datetime.now(UTC)`` formats it; made once a
        second (a stage writes hundreds of lines a second)."""
        second = int(time.time())
        if second != self._second:
            self._second = second
            self._at = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return self._at

    def _prompt(self, text: str) -> str:
        shown = self._prompts.get(text)
        if shown is None:
            shown = redact(text)
            if len(self._prompts) < PROMPTS_KEPT:
                self._prompts[text] = shown
        return shown

    def record(  # noqa: PLR0917 - an exchange has this many parts
        self,
        stage: str,
        item: str,
        model: str,
        messages: list[dict[str, str]],
        reply: str | None,
        reasoning: str | None = None,
        failure: str | None = None,
    ) -> None:
        if self._broken:
            return
        line = {
            "at": self._now(),
            "stage": stage,
            "item": item,
            "model": model,
            "messages": [
                {"role": m["role"], "content": self._prompt(m["content"])} for m in messages
            ],
            "reply": redact(reply) if reply is not None else None,
            "reasoning": redact(reasoning) if reasoning is not None else None,
            "failure": redact(failure) if failure is not None else None,
        }
        try:
            data = orjson.dumps(line, option=orjson.OPT_APPEND_NEWLINE)  # a thirtieth of json's
        except TypeError:  # a lone surrogate, which orjson refuses: as the standard library
            data = (json.dumps(line, ensure_ascii=False) + "\n").encode("utf-8", "replace")
        try:
            self._append(data)
        except OSError as error:
            self._broken = True
            logger.debug(f"{EXCHANGES} is not written ({error.strerror or error})")

    def _append(self, data: bytes) -> None:
        if self._fd < 0:
            self._open()
        if self._size and self._size + len(data) > MAX_BYTES:
            self.close()
            os.replace(self.path, self.rotated)
            self._open()
        os.write(self._fd, data)
        self._size += len(data)

    def _open(self) -> None:
        try:
            mkdir_nofollow(self.path.parent, str(EXCHANGES.parent))
        except UserError as error:  # a linked .overbrainer/: nothing is written through it
            raise OSError(error.message) from None
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(self.path, flags | os.O_NONBLOCK, 0o600)
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            raise OSError(f"{EXCHANGES} is not a regular file")
        self._fd, self._size = fd, info.st_size


def read_exchanges(project_dir: Path) -> Iterator[dict[str, Any]]:
    """The exchanges kept, oldest first (the rotated file's, then the current one's);
    a line that cannot be read is skipped."""
    for path in (project_dir / ROTATED, project_dir / EXCHANGES):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            continue
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # a directory, a FIFO: nothing to read
            os.close(fd)
            shown = path.relative_to(project_dir)
            raise UserError(f"{shown} is not a regular file: move it away, then try again")
        with os.fdopen(fd, "rb") as file:
            for raw in file.read(READ_LIMIT).splitlines():
                try:
                    found = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(found, dict) and isinstance(found.get("stage"), str):
                    yield found


def first_line(text: str, limit: int = 120) -> str:
    """The first non-empty line of a reply, cut to ``limit`` characters, for a warning."""
    for raw in text.splitlines():
        line = raw.strip()
        if line:
            return line if len(line) <= limit else line[: limit - 1] + "…"
    return "(empty)"
