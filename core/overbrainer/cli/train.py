"""``overbrainer train``: start, follow, stop, resume and cancel training runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from overbrainer.cli.complete import complete_run_id, complete_target
from overbrainer.cli.context import current_app

if TYPE_CHECKING:
    from overbrainer.train.workspace import Workspace


@click.group(invoke_without_command=True)
@click.option(
    "--target",
    shell_complete=complete_target,
    help="Train on this target instead of training.target.",
)
@click.option(
    "--keep-machine",
    "--keep-pod",
    "keep_machine",
    is_flag=True,
    help="Keep the machine made for this run after it, on a target that makes one (a "
    "runpod pod); --keep-pod is the same.",
)
@click.option(
    "--resume-from",
    metavar="RUN_ID",
    shell_complete=complete_run_id,
    help="Continue from the snapshot of this stopped run (an id, a prefix, or `latest`).",
)
@click.pass_context
def train(
    ctx: click.Context, target: str | None, keep_machine: bool, resume_from: str | None
) -> None:
    """Fine-tune the child model on a target and follow the run.

    Ctrl-C while following only detaches: the job keeps running, and
    `overbrainer train attach RUN_ID` follows it again.

    Example: overbrainer train --target gpu --resume-from latest
    """
    if target is not None and not target.strip():  # else read as no --target at all
        raise click.BadParameter("names no target: give a target's name", param_hint="--target")
    if ctx.invoked_subcommand is not None:
        if target or keep_machine or resume_from:
            raise click.UsageError(
                "--target, --keep-machine and --resume-from apply to a new run only"
            )
        return
    from overbrainer.after.chain import after_training, warn_before_training
    from overbrainer.train import session

    app = current_app()
    if resume_from is not None:
        resume_from = app.runs.resolve(resume_from)
    with app.lock():
        warn_before_training(app.settings)
        trained = session.train(
            app.workspace(), target=target, resume_from=resume_from, keep_machine=keep_machine
        )
        if not trained.up_to_date:
            after_training(app.project, app.plugins.hook, app.runs, trained.record)


@train.command()
@click.argument("run_id", shell_complete=complete_run_id)
def attach(run_id: str) -> None:
    """Follow RUN_ID again until it ends (or report it, if it already has).

    RUN_ID may be `latest` or any unique prefix of an id.

    Example: overbrainer train attach latest
    """
    from overbrainer.train import session

    app = current_app()
    run_id = app.runs.resolve(run_id)
    with app.lock():
        session.attach(app.workspace(), run_id)


@train.command()
@click.argument("run_id", shell_complete=complete_run_id)
def stop(run_id: str) -> None:
    """Ask RUN_ID's job to save a snapshot and stop; resume later with --resume-from.

    While another overbrainer process holds the project (following the run, most
    likely), only the request is written: that process collects the snapshot. RUN_ID
    may be `latest` or any unique prefix of an id.

    Example: overbrainer train stop latest
    """
    from overbrainer.train import session

    _owning_or_not(run_id, session.stop, session.stop_for_holder)


@train.command()
@click.argument("run_id", shell_complete=complete_run_id)
def cancel(run_id: str) -> None:
    """Cancel RUN_ID: stop its job (TERM, then KILL) and keep what it wrote.

    While another overbrainer process holds the project (following the run, most
    likely), the job is stopped now and that process records the run cancelled. RUN_ID
    may be `latest` or any unique prefix of an id.

    Example: overbrainer train cancel latest
    """
    from overbrainer.train import session

    _owning_or_not(run_id, session.cancel, session.cancel_for_holder)


def _owning_or_not(
    run_id: str,
    alone: Callable[[Workspace, str], None],
    beside: Callable[[Workspace, str, int], None],
) -> None:
    """``alone`` under the project lock; ``beside`` (given the holder's pid, 0 unknown) when
    another process holds it, most likely following the run, and so owns its record."""
    from overbrainer.runs.lock import LockHeld

    app = current_app()
    run_id = app.runs.resolve(run_id)
    lock = app.lock()
    try:
        lock.acquire()
    except LockHeld as held:
        beside(app.workspace(), run_id, held.pid or 0)
        return
    try:
        alone(app.workspace(), run_id)
    finally:
        lock.release()
