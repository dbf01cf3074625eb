"""A stage's progress on stderr: a rich bar on a terminal, plain lines otherwise.

Plain lines are ``<stage>: N to process`` and ``<stage>: k/N`` at each tenth, through the log
sink, so they are redacted and a test runner captures them.
"""

from __future__ import annotations

import sys
from typing import Any

from loguru import logger

from overbrainer.providers.ratelimit import Pace


class StageProgress:
    """Done/total, tokens and cost so far of the stage ``stage``."""

    def __init__(self, stage: str, live: bool | None = None) -> None:
        self.stage = stage
        self.live = sys.stderr.isatty() if live is None else live
        self.total = 0
        self._bar: Any = None
        self._task: Any = None

    def start(self, total: int) -> None:
        self.total = total
        if not self.live or total == 0:
            logger.info(f"{self.stage}: {total} to process")
            return
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as Bar

        self._bar = Bar(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[usage]}"),
            TimeElapsedColumn(),
            console=Console(file=sys.stderr),
            transient=False,
        )
        self._bar.start()
        self._task = self._bar.add_task(self.stage, total=total, usage="")

    def update(
        self,
        completed: int,
        input_tokens: int,
        output_tokens: int,
        cost: float | None,
        pace: Pace | None = None,
    ) -> None:
        paced = f"paced by the provider: {pace}" if pace is not None else ""
        if self._bar is not None:
            spent = "cost unknown" if cost is None else f"${cost:.4f}"
            usage = f"tokens {input_tokens} in, {output_tokens} out; {spent}"
            usage += f"; {paced}" if paced else ""
            self._bar.update(self._task, completed=completed, usage=usage)
        elif self.due(completed):
            shown = f" ({paced})" if paced else ""
            logger.info(f"{self.stage}: {completed}/{self.total}{shown}")

    def due(self, completed: int) -> bool:
        """Whether a plain line is due at ``completed``: the first item of each tenth."""
        total = self.total
        return bool(total) and (completed * 10) // total > ((completed - 1) * 10) // total

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
