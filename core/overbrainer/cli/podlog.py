"""``runs logs RUN --pod``: routed to the plugin of the run's target, which alone knows its
machines (the core never imports a target). Plugins are loaded only here, not for a plain
``runs logs``."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

import click

from overbrainer.errors import UserError

if TYPE_CHECKING:
    from overbrainer.cli.context import App


def print_pod_log(
    app: App, run_id: str, source: str | None, tail: int | None, keep_following: bool
) -> None:
    """Print what the run's target plugin has of its pod's logs; a closed standard output
    (``| head``) and Ctrl-C end it quietly."""
    record = app.runs.load(run_id)
    try:
        shown = app.plugins.hook.read_pod_log(
            project=app.project, run=record, source=source, tail=tail, follow=keep_following,
            echo=click.echo, note=lambda line: click.echo(line, err=True),
        )  # fmt: skip
    except KeyboardInterrupt:
        return  # Ctrl-C only stops following
    except BrokenPipeError:
        _quiet_stdout()
        return
    if shown is None:
        raise UserError(
            f"runs: run {run_id} did not run on a Runpod pod (its target is "
            f"`{record.target}`): --pod has no pod log to read"
        )


def _quiet_stdout() -> None:
    """Point standard output at /dev/null so that exiting does not fail to flush it."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no real descriptor (a test's captured output)
        pass
    finally:
        os.close(devnull)
