"""The served parent a run asks during training (``[training.kd] mode = "online"``).

The command that starts the run starts the serve before the job (or reuses one up) and,
like every serve it started, ends it when it ends: after the run. Before the job starts the
serve is lent to the run (``for_run`` in its record, ``runs/ID/teacher.json``), so a later
command does not end it as an orphan of this one (``kill -9``) while the run asks it.
Detached from (Ctrl-C while following), the run still asks it, so the serve is kept for the
run: the command that sees the run end (``train attach``, ``stop``, ``cancel``) ends it,
else its watchdog ``idle_minutes`` after the run's last request.
"""

from __future__ import annotations

import json
from dataclasses import replace

from loguru import logger

from overbrainer import files
from overbrainer.config.model import Settings
from overbrainer.errors import TransientError, UserError
from overbrainer.job.record import RunRecord
from overbrainer.pipeline.kd_teacher import ONLINE_SERVERS, online_problems
from overbrainer.providers.served import served_session
from overbrainer.serve.lent import LENT_FILE, lent_to, runs_asking
from overbrainer.serve.records import ServeRecords
from overbrainer.train.axolotl import OnlineTeacher
from overbrainer.train.workspace import Workspace


def check_teacher(ws: Workspace, target: str) -> None:
    """Refuse a run on ``target`` whose online teacher cannot be the served parent (its
    settings, its engine not installed, a target that cannot serve)."""
    problems = online_problems(ws.settings, target)
    if problems:
        raise UserError("; ".join(problems))
    # Before a machine is made for the run: a target that cannot serve refuses here.
    provider = ws.settings.roles.parent.provider
    session = served_session(provider)
    session.check_servable(provider)
    if session.on_own_machine(provider):
        # A target that makes a machine for each run makes one for each serve too (a
        # Runpod pod of its own): the run's machine is not the parent's.
        raise UserError(
            f'training.kd.mode = "online": target `{target}` makes a machine of its own for '
            "each run and for each serve, so the trainer cannot reach the parent on its "
            "machine's loopback. Train on a target that serves beside its jobs (local, ssh), "
            'or set mode = "offline"'
        )


def online_parent(settings: Settings) -> str:
    """The parent an online run asks, as its inputs count it: its engine and model."""
    provider = settings.providers.get(settings.roles.parent.provider)
    serve = provider.serve if provider is not None else None
    return f"{serve.engine} {serve.model}" if serve is not None else settings.roles.parent.model


def start_teacher(ws: Workspace) -> OnlineTeacher:
    """The parent's serve, started (or reused), as the job on its target reaches it."""
    provider = ws.settings.roles.parent.provider
    serve = ws.settings.providers[provider].serve
    assert serve is not None  # check_teacher refused a parent not served
    port = served_session(provider).port_on_target(provider)
    logger.info(
        f"train: the trainer asks providers.{provider} ({serve.engine} {serve.model}) "
        f"at 127.0.0.1:{port} on `{serve.target}`"
    )
    return OnlineTeacher(f"http://127.0.0.1:{port}", ONLINE_SERVERS[serve.engine])


def lend_teacher(ws: Workspace, record: RunRecord) -> None:
    """Before ``record``'s job starts: the serve is lent to the run (``runs/ID/teacher.json``,
    and ``for_run`` in its record unless another run's already), so that after ``kill -9``
    of this command the next one does not end it as an orphan while the run asks it, nor
    does another run's end; the last asking run's end (``attach``, ``stop``, ``cancel``) or
    its watchdog ends it then. A serve kept by the user stays the user's."""
    provider = ws.settings.roles.parent.provider
    serve = ServeRecords(ws.project.state_dir).load(provider)
    if serve is None or (serve.kept and serve.for_run == ""):
        return
    if not serve.for_run:
        served_session(provider).lend(provider, record.id)
    lent = {"provider": provider, "serve_id": serve.handle.serve_id}
    data = (json.dumps(lent) + "\n").encode()
    files.write_atomic(
        ws.runs.run_dir(record.id) / LENT_FILE, data, f"runs/{record.id}/{LENT_FILE}"
    )


def hand_over(ws: Workspace, record: RunRecord | None) -> None:
    """Before detaching from ``record``: keep the serve its job asks up after this command,
    handed to the run (a serve kept already, ``serve up``, stays the user's)."""
    if record is None or record.job is None or record.state.ended:
        return
    provider = ws.settings.roles.parent.provider
    serve = ServeRecords(ws.project.state_dir).load(provider)
    if serve is None or (serve.kept and serve.for_run == ""):
        return  # the user's (`serve up`)
    lent = lent_to(ws.project, record.id)
    if lent is None or lent[1] != serve.handle.serve_id:
        return
    if not serve.kept:
        served_session(provider).keep(provider, for_run=record.id)
    logger.warning(
        f"train: providers.{provider} stays up while run {record.id} asks it: "
        f"`overbrainer train attach {record.id}` ends it when the run ends, else its "
        f"watchdog {_idle(ws, provider)} after the run's last request"
    )


def _idle(ws: Workspace, provider: str) -> str:
    """How long the serve's watchdog waits without a request, as a message says it."""
    serve = ws.settings.providers[provider].serve
    return f"{serve.idle_minutes} min" if serve is not None else "its idle limit"


def end_handed(ws: Workspace, record: RunRecord) -> None:
    """Once ``record`` has ended: end the serve lent to it, if it is still the one up, is
    not the user's, and no other run still asks it."""
    if not record.state.ended:
        return
    lent = lent_to(ws.project, record.id)
    if lent is None:
        return  # none lent (or unreadable: its watchdog ends it)
    provider, serve_id = lent
    serve = ServeRecords(ws.project.state_dir).load(provider)
    others = [r for r in runs_asking(ws.project, serve_id) if r != record.id]
    ended = f"train: run {record.id} ended: "
    try:
        if serve is None or serve.handle.serve_id != serve_id:
            pass  # ended already, or another serve is up now
        elif serve.for_run == "":  # `serve up` made it the user's meanwhile
            logger.info(f"{ended}providers.{provider}, its teacher, stays up (kept by `serve up`)")
        elif others:  # lent to the next run from now on, as `serve status` says
            ServeRecords(ws.project.state_dir).save(replace(serve, for_run=others[0]))
            logger.info(
                f"{ended}providers.{provider}, its teacher, stays up while run {others[0]} "
                "asks it"
            )
        else:  # for_run None: lent before runs were named in the record
            logger.info(f"{ended}ending providers.{provider}, its teacher")
            served_session(provider).end(provider)
    except (UserError, TransientError) as error:
        logger.warning(f"providers.{provider}: cannot end the run's teacher ({error})")
        return
    (ws.runs.run_dir(record.id) / LENT_FILE).unlink(missing_ok=True)
