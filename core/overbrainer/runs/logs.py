"""``runs logs``: a run's ``job.log``, redacted and made printable, line by line."""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterator

from overbrainer import files
from overbrainer.errors import UserError
from overbrainer.job.layout import JOB_LOG
from overbrainer.lines import read_lines
from overbrainer.redact import LineRedactor, printable
from overbrainer.runs.store import RUNS_DIR, RunStore

LOG_LINE = 1 << 20
"""The longest line of a job log shown whole (1 MiB; a longer one is shown cut)."""


def read_job_log(store: RunStore, run_id: str, tail: int | None = None) -> Iterator[str]:
    """The lines of the job log of ``run_id`` (the last ``tail`` ones when given)."""
    directory = store.run_dir(run_id)
    if not directory.is_dir():
        raise UserError(f"no run {run_id} in {RUNS_DIR}/")
    path = directory / JOB_LOG
    shown = f"{RUNS_DIR}/{run_id}/{JOB_LOG}"
    fd = files.open_regular(path, shown, follow=False)
    if fd is None:
        raise UserError(f"runs: no job.log for run {run_id} yet")
    redactor = LineRedactor()
    with os.fdopen(fd, "rb") as file:
        # Every line goes through the redactor, even before the tail: a tail that starts
        # inside a private key block must still hide it.
        lines: Iterator[str] = (
            redactor.line(raw.decode("utf-8", errors="replace").rstrip("\n"))
            for raw in read_lines(file, shown, LOG_LINE, cut=True)
        )
        if tail is not None:
            lines = iter(deque(lines, maxlen=tail))
        for line in lines:
            yield printable(line)
