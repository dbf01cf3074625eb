"""What the tests of following by events share: a job that waits for a file, and the
thread that writes it later."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from overbrainer.job.spec import JobState

WAIT_FOR_GO = (
    "while [ ! -f go ]; do sleep 0.05; done; "
    'printf \'{"event":"end","step":1}\\n\' >> metrics.jsonl; exit 5'
)


def running(poll) -> bool:
    return poll.status.state is JobState.RUNNING


def touch_later(path: Path, delay: float = 0.5) -> threading.Thread:
    def run() -> None:
        time.sleep(delay)
        path.touch()

    thread = threading.Thread(target=run)
    thread.start()
    return thread
