"""What a cycle of ``watch`` did: its summary line, and what the ``on_cycle_end`` hook gets.

Below the watch loop, so that the hook specs name it without depending on ``watch``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from overbrainer.job.record import RunRecord


@dataclass
class CycleSummary:
    """What a cycle did: for its summary line and the ``on_cycle_end`` hook.

    ``changed``: what set it off (``start`` for the first); ``ran``: a few words per step
    that did something; ``run``: the training run it ended with (trained, or up to date).
    """

    number: int
    changed: tuple[str, ...]
    ran: list[str] = field(default_factory=list)
    seconds: float = 0.0
    cost: float = 0.0
    error: str | None = None
    run: RunRecord | None = None
    detached: bool = False
    """Ctrl-C while following the cycle's run: watching ended, the run goes on."""
    interrupted: bool = False
    """Ctrl-C (or SIGTERM) cut the cycle short: ``error`` says what, not as a failure."""

    def line(self) -> str:
        cut_short = self.error is not None or self.interrupted or self.detached
        did = ", ".join(self.ran) or ("nothing done" if cut_short else "nothing to do")
        ended = f"; error: {self.error}" if self.error else ""
        if self.interrupted:
            ended = f"; {self.error}" if self.error else "; interrupted"
        if self.detached:
            ended = "; detached, the run goes on"
        return (
            f"watch: cycle {self.number} ({', '.join(self.changed)}): {did}; "
            f"{self.seconds:.1f} s, ${self.cost:.4f}{ended}"
        )
