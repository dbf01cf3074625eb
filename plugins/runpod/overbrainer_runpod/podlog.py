"""``pod logs RUN`` (and the core's ``runs logs RUN --pod``): what the run directory keeps
of its pod's logs, then, while the pod exists, the lines Runpod has after them. It never
writes: keeping the log belongs to the command that deletes the pod (see
:func:`overbrainer_runpod.logkept.drain`)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, TypeVar

import click

from overbrainer.plugin import Project, RunRecord, UserError
from overbrainer.plugin.files import LineRedactor, escape_controls, register_secret
from overbrainer.plugin.operations import MachineLogQuery
from overbrainer_runpod import record
from overbrainer_runpod.api import api_of
from overbrainer_runpod.logkept import kept_cursor, kept_lines, read_kept
from overbrainer_runpod.logstream import (
    TAIL_MAX,
    LogClient,
    LogError,
    LogQuery,
    PodLogLine,
    follow,
    snapshot,
)
from overbrainer_runpod.record import PodState
from overbrainer_runpod.settings import RunpodTarget, account, rest_url

OWN_LOGS = ("boot.log", "watchdog.log")
"""The pod's own logs the executor brings home, printed before the stream's lines."""

T = TypeVar("T")


def _note(line: str) -> None:
    click.echo(line, err=True)


def _last(items: list[T], tail: int | None) -> list[T]:
    return items[-tail:] if tail is not None else items


def log_client(project: Project) -> LogClient:
    """The client of Runpod's log stream, with the project's account."""
    client: LogClient = api_of(*account(project), rest_url(project)).log_client()
    return client


def ran_on_a_pod(project: Project, run: RunRecord) -> bool:
    """Whether ``run`` ran on a pod of this plugin: its directory keeps a pod's record or
    logs, or its target is a runpod one."""
    run_dir = project.runs_dir / run.id
    if (run_dir / "pod.json").exists() or (run_dir / "pod").is_dir():
        return True
    return isinstance(project.settings.targets.get(run.target), RunpodTarget)


def show_pod_log(
    project: Project,
    run_id: str,
    query: MachineLogQuery,
    command: Literal["pod", "runs"],
) -> None:
    """Print the kept logs of ``run_id``, then the live ones (the API's client made only
    when the pod still exists); lines on standard output, notes on standard error, each
    message opened by the ``command`` that prints it."""
    run_dir = project.runs_dir / run_id
    cursor = kept_cursor(run_dir)  # first: a line kept meanwhile prints twice, none is lost
    shown = _kept(run_dir, run_id, query, command)
    pod = record.load(run_dir) if run_dir.is_dir() else None
    if pod is None or pod.pod_id is None or pod.state is PodState.DELETED:
        if not shown:
            click.echo(f"{command}: no pod log kept for run {run_id}")
        return
    try:
        reader = log_client(project)
    except UserError as error:
        _note(f"{command}: cannot read the logs of pod {pod.pod_id} from Runpod: {error}")
        return
    register_secret(reader.key)
    tail = min(query.tail or TAIL_MAX, TAIL_MAX)
    asked = LogQuery(source=query.source, tail=tail, cursor=cursor)

    def sink(lines: list[PodLogLine], _cursor: str | None) -> None:
        for line in lines:
            click.echo(line.display())

    try:
        if query.follow:
            raise follow(reader, pod.pod_id, asked, sink)
        snapshot(reader, pod.pod_id, asked, sink)
    except LogError as error:
        if error.status == 404:
            _note(
                f"{command}: pod {pod.pod_id} no longer exists, so Runpod has no more of its logs"
            )
        elif error.status in (401, 403):
            raise UserError(
                f"{command}: Runpod refused the logs of pod {pod.pod_id} ({error}): check "
                "OVERBRAINER_RUNPOD__API_KEY"
            ) from None
        else:
            _note(f"{command}: cannot read the logs of pod {pod.pod_id} from Runpod: {error}")


def _kept(run_dir: Path, run_id: str, query: MachineLogQuery, command: str) -> bool:
    """Print what ``run_dir`` keeps: the pod's own logs (unless only system lines are
    asked for), then its stream's lines. Whether anything was printed."""
    source, tail = query.source, query.tail
    shown = False
    try:
        if source != "system":
            for name in OWN_LOGS:
                data = read_kept(run_dir, name)
                if data is None:
                    continue
                click.echo(f"== {name} ==")
                redactor = LineRedactor()
                texts = [redactor.line(t) for t in data.decode("utf-8", "replace").splitlines()]
                for text in _last(texts, tail):
                    click.echo(escape_controls(text, keep="\t"))
                shown = True
        lines = [line for line in kept_lines(run_dir) if source is None or line.source == source]
    except OSError as error:
        raise UserError(f"{command}: cannot read the pod logs of run {run_id}: {error}") from None
    if lines:
        if shown:
            click.echo("== pod ==")
        for line in _last(lines, tail):
            click.echo(line.display())
        shown = True
    return shown
