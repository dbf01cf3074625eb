"""What a command says when a run ends: its outcome lines and what to do next."""

from __future__ import annotations

from dataclasses import dataclass

from overbrainer import files
from overbrainer.charts.describe import write_run_chart
from overbrainer.errors import UserError
from overbrainer.job.layout import METRICS_FILE
from overbrainer.job.metrics import read_events
from overbrainer.job.record import RunRecord, RunState
from overbrainer.runs.outcome import output_lines, stopped_lines
from overbrainer.runs.store import RUNS_DIR, RunStore
from overbrainer.train.progress import Summary
from overbrainer.train.workspace import Workspace


@dataclass(frozen=True)
class Trained:
    """How ``train`` ended: the run, and whether it was already up to date (no training)."""

    record: RunRecord
    up_to_date: bool = False


def reattach(run_id: str) -> str:
    return f"follow it again with `overbrainer train attach {run_id}`"


def report(ws: Workspace, record: RunRecord | None, summary: Summary | None = None) -> None:
    """The final report: stdout first, then an error for a run that did not succeed."""
    if record is None:
        return
    store = ws.runs
    if summary is None:
        summary = local_summary(store, record.id)
    output = (
        f"; output in {RUNS_DIR}/{record.id}/output" if record.state is RunState.SUCCEEDED else ""
    )
    ws.echo(f"train: run {record.id} {record.state.value}; {summary.describe()}{output}")
    chart = None
    if record.state.ended:
        chart = write_run_chart(store, record)
    chart_line = f"train: loss chart in {RUNS_DIR}/{record.id}/{chart.name}" if chart else None
    match record.state:
        case RunState.SUCCEEDED:
            for line in output_lines(store, record):
                ws.echo(line)
            if chart_line:
                ws.echo(chart_line)
        case RunState.STOPPED:
            for line in stopped_lines(record):
                ws.echo(line)
            if chart_line:
                ws.echo(chart_line)
        case RunState.CANCELLED:
            raise UserError(f"run {record.id} was cancelled")
        case RunState.FAILED:
            raise UserError(record.message or f"run {record.id} failed")
        case _:
            raise UserError(f"run {record.id} is {record.state.value}; {reattach(record.id)}")


def local_summary(store: RunStore, run_id: str) -> Summary:
    """The latest figures in a run's local ``metrics.jsonl``."""
    summary = Summary()
    path = store.run_dir(run_id) / METRICS_FILE
    try:
        source = files.open_read(path, METRICS_FILE)
        if source is None:
            return summary
        with source:
            for event in read_events(source, METRICS_FILE):
                if event["event"] in ("begin", "log", "end"):
                    summary.update(event)
    except (OSError, UserError):
        pass
    return summary
