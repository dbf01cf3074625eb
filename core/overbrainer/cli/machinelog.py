"""``runs logs RUN --pod``: routed to the plugin of the run's target, which alone knows its
machines (the core never imports a target). Plugins are loaded only here, not for a plain
``runs logs``."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from overbrainer.errors import UserError
from overbrainer.job.spec import MachineLogQuery

if TYPE_CHECKING:
    from overbrainer.cli.context import App


def print_machine_log(app: App, run_id: str, query: MachineLogQuery) -> None:
    """Print what the run's target plugin has of its machine's own log."""
    record = app.runs.load(run_id)
    shown = True  # what was cut short was the plugin's
    with quiet_end():
        shown = app.plugins.hook.show_machine_log(project=app.project, run=record, query=query)
    if not shown:
        raise UserError(
            f"runs: run {run_id} has no machine log (its target `{record.target}` keeps "
            "none): --pod has nothing to read"
        )


@contextmanager
def quiet_end() -> Iterator[None]:
    """Ctrl-C and a closed standard output (``| head``) end a printing command quietly,
    with exit status 0, as the end of what it prints."""
    try:
        yield
    except KeyboardInterrupt:
        return
    except BrokenPipeError:
        _quiet_stdout()


def _quiet_stdout() -> None:
    """Point standard output at /dev/null so that exiting does not fail to flush it."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no real descriptor (a test's captured output)
        pass
    finally:
        os.close(devnull)
