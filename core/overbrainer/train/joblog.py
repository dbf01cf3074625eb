"""``runs logs`` of a run whose job may still be running: its log read through its target.

An ended run's ``job.log`` is home (:mod:`overbrainer.runs.logs`); a running one's is where
the job runs, and the ``read_job_log`` hook brings it, from the start or as it grows.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator

from overbrainer.errors import UserError
from overbrainer.job.interface import Executor
from overbrainer.job.layout import RECORD
from overbrainer.job.record import RunRecord
from overbrainer.job.spec import JobState
from overbrainer.lines import LineSplitter
from overbrainer.redact import LineRedactor, printable
from overbrainer.runs import follow
from overbrainer.runs.logs import LOG_LINE, read_job_log
from overbrainer.runs.store import RunStore
from overbrainer.train.executors import held_executor
from overbrainer.train.workspace import Workspace


def log_lines(
    store: RunStore,
    run_id: str,
    tail: int | None,
    keep_following: bool,
    workspace: Callable[[], Workspace],
) -> Iterator[str]:
    """The lines of the job log of ``run_id``, redacted and printable: the last ``tail``
    ones when given; with ``keep_following``, then every new line until the job ends.

    Only a running job needs its target, and so the settings: ``workspace`` gives them.
    """
    record = store.load(run_id) if (store.run_dir(run_id) / RECORD).is_file() else None
    if record is None or record.job is None or record.state.ended:
        yield from read_job_log(store, run_id, tail)
        return

    ws = workspace()
    with held_executor(ws.project, ws.hook, record) as held:
        yield from _live(ws, held.executor, record, tail, keep_following)


def _live(
    ws: Workspace, executor: Executor, record: RunRecord, tail: int | None, keep_following: bool
) -> Iterator[str]:
    hook = ws.hook
    redactor = LineRedactor()
    offset = 0
    # Linear however the job writes (a progress bar's carriage returns and no newline for
    # hours): a line longer than the bound is shown cut.
    splitter = LineSplitter(f"the job log of run {record.id}", LOG_LINE, cut=True)

    def read(keep: int | None = None) -> deque[str]:
        """The lines written since the last read (the last ``keep`` of them)."""
        nonlocal offset
        lines: deque[str] = deque(maxlen=keep)
        while True:
            chunk = hook.read_job_log(executor=executor, run=record, offset=offset)
            if chunk is None:
                raise UserError(
                    f"the plugin of target `{record.target}` cannot read the log of a running "
                    f"job; it is in runs/{record.id}/job.log once the run ends"
                )
            if not chunk.data:
                return lines
            offset = chunk.offset
            for raw in splitter.feed(chunk.data):
                lines.append(printable(redactor.line(raw.decode("utf-8", "replace"))))

    yield from read(tail)
    if not keep_following:
        return
    while True:
        poll = hook.poll_job(executor=executor, run=record)
        running = poll is not None and poll.status.state is JobState.RUNNING
        yield from read()
        if not running:
            pending = splitter.end()
            if pending:
                yield printable(redactor.line(pending.decode("utf-8", "replace")))
            return
        time.sleep(follow.POLL_S)
