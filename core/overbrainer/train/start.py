"""``overbrainer train``: prepare the target, claim the run, start the job, follow it and
report; the run record is created here and passed on.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import replace

from loguru import logger
from pydantic import BaseModel, SecretStr

from overbrainer.config.model import Training
from overbrainer.config.secrets import resolve_secret
from overbrainer.errors import InterruptedBeforeJob, TransientError, UserError
from overbrainer.job.interface import Executor
from overbrainer.job.layout import INPUTS_FILE
from overbrainer.job.record import RunRecord, RunState
from overbrainer.job.spec import JobSpec
from overbrainer.runs.interrupt import deferred_sigint
from overbrainer.train.executors import Held, check_keep_machine, holding
from overbrainer.train.follow import follow_to_end, interrupted
from overbrainer.train.inputs import Inputs
from overbrainer.train.new_run import (
    Plan,
    Prepared,
    check_budget,
    job_config,
    job_inputs,
    plan_run,
    up_to_date_run,
)
from overbrainer.train.prepare import data_source, job_description, kd_source, write_run_dir
from overbrainer.train.reasoning import reasoning_template_warning
from overbrainer.train.report import Trained, report
from overbrainer.train.teacher import hand_over, lend_teacher, start_teacher
from overbrainer.train.workspace import Workspace

HF_TOKEN = "HF_TOKEN"  # noqa: S105 - the variable's name, not a secret


def train(
    ws: Workspace,
    target: str | None = None,
    resume_from: str | None = None,
    keep_machine: bool = False,
    *,
    only_if_changed: bool = False,
    resume_if_same: str | None = None,
    stop_when: Callable[[], str | None] | None = None,
    max_usd: float | None = None,
    prepared: BaseModel | None = None,
) -> Trained:
    """``overbrainer train``: start a run on ``target`` (default: training.target), follow
    it to its end, report; the run. ``max_usd``: the budget, when not ``[budget] max_usd``:
    a run whose projected GPU spend exceeds what is left of it is refused before anything
    is created.

    ``only_if_changed``: when a succeeded run was made from the same inputs, say so and
    train nothing. ``resume_if_same``: a stopped run to resume from if it was made from the
    same inputs. ``stop_when``: asked at each poll; a reason it returns asks the job for a
    snapshot (``watch``, when the configuration changes). ``prepared``: the target settings
    ``run`` made ready before its stages (``preflight``); a target with the same settings is
    not made ready again (its ``setup`` runs once a ``run``).
    """
    plan = plan_run(ws, target, resume_from, keep_machine)
    check_budget(ws, plan.target, max_usd)
    with ExitStack() as stack:
        # Ctrl-C while the target is reached and made ready stops it with no run left behind.
        try:
            secrets = resolve_secrets(ws, plan.training)
            held = stack.enter_context(holding(ws.project, ws.hook, plan.target, plan.target_model))
            ready = prepare(
                ws,
                plan,
                held.executor,
                secrets,
                only_if_changed=only_if_changed,
                same_as=resume_if_same,
                ready_already=prepared is not None and plan.target_model == prepared,
            )
        except KeyboardInterrupt:
            raise InterruptedBeforeJob("interrupted before the run started") from None
        if ready.up_to_date is not None:
            ws.echo(f"train: up to date with run {ready.up_to_date.id}")
            return Trained(ready.up_to_date, up_to_date=True)
        # Only for a run that trains: an up-to-date `run` trains nothing it could warn about.
        warning = reasoning_template_warning(plan.training)
        if warning:
            logger.warning(warning)
        if ready.same_as is not None:
            try:
                plan = plan_run(ws, target, ready.same_as, keep_machine)
            except UserError as refused:
                logger.info(f"train: a new run instead of resuming: {refused}")
        if plan.training.kd_online:  # up before the job, ended with this command
            try:
                plan = replace(plan, teacher=start_teacher(ws))
            except KeyboardInterrupt:
                raise InterruptedBeforeJob("interrupted before the run started") from None
        record = _new_run(ws, plan, ready, held, stop_when)
    report(ws, record)
    return Trained(record)


def _new_run(
    ws: Workspace,
    plan: Plan,
    ready: Prepared,
    held: Held,
    stop_when: Callable[[], str | None] | None,
) -> RunRecord:
    """Create the run, start its job and follow it to its end; the run as last saved.
    Ctrl-C while following detaches (``DetachedRun``)."""
    store = ws.runs
    executor = held.executor
    try:
        record = held.note(
            store.create(
                ws.settings.project.name,
                plan.target,
                claim=lambda run_id: ws.hook.claim_run_dir(executor=executor, run_id=run_id),
            )
        )
        if plan.resume is not None:
            record = held.note(record.evolve(resumed_from=plan.resume.run_id))
            store.save(record)
            resume = plan.resume
            what = "the snapshot" if resume.snapshot else "the last checkpoint"
            logger.info(
                f"train: run {record.id} resumes from {what} of run {resume.run_id} "
                f"({resume.checkpoint}" + ("" if resume.snapshot else f", step {resume.step}") + ")"
            )
        logger.info(f"train: run {record.id} on target `{plan.target}`, in {record.remote_dir}")
        if plan.teacher is not None:
            lend_teacher(ws, record)
        # Starting is never interrupted: a job spawned and not recorded would be lost.
        with deferred_sigint() as noted:
            record = start(ws, record, plan=plan, ready=ready, held=held)
        if noted.caught:
            raise noted.interrupt()
        return held.note(follow_to_end(ws, executor, record, stop_when=stop_when))
    except KeyboardInterrupt:
        if plan.teacher is not None:
            hand_over(ws, held.run)
        interrupted(ws, held, held.run)


def prepare(
    ws: Workspace,
    plan: Plan,
    executor: Executor,
    secrets: dict[str, SecretStr],
    *,
    only_if_changed: bool = False,
    same_as: str | None = None,
    ready_already: bool = False,
) -> Prepared:
    """Learn what the target is and make it ready (unless ``ready_already``: this command
    did); or, with ``only_if_changed``, find the run already made from the same inputs."""
    hook = ws.hook
    info = hook.describe_target(executor=executor)
    if info is None:
        raise UserError(f"no installed plugin can describe target `{plan.target}`")
    if plan.keep_machine:
        check_keep_machine(plan.target, info)
    resumable = None
    if (only_if_changed or same_as) and plan.resume is None:
        fingerprint = job_inputs(ws, plan, info).fingerprint
        done = up_to_date_run(ws.runs, fingerprint) if only_if_changed else None
        if done is not None:
            return Prepared(executor, info, secrets, up_to_date=done)
        if same_as is not None:
            before = Inputs.read(ws.runs.run_dir(same_as) / INPUTS_FILE)
            resumable = same_as if before and before.fingerprint == fingerprint else None
    if not ready_already:
        hook.prepare_target(executor=executor)
    return Prepared(executor, info, secrets, same_as=resumable)


def start(ws: Workspace, run: RunRecord, *, plan: Plan, ready: Prepared, held: Held) -> RunRecord:
    """Write the job directory, launch the job, and record the run ``running`` (noted in
    ``held``, as a failure is).

    Any failure records the run ``failed`` with the error as its message. A ``UserError``
    or a transient failure is re-raised as a ``UserError``; anything else is a bug and keeps
    its traceback.
    """
    store = ws.runs
    hook = ws.hook
    run_dir = store.run_dir(run.id)
    training, resume, info = plan.training, plan.resume, ready.info
    from overbrainer.train.axolotl_yaml import dump_yaml  # noqa: PLC0415 - yaml: to start a job

    try:
        base_model, config = made = job_config(ws, plan, info)
        inputs = job_inputs(ws, plan, info, made)
        (run_dir / INPUTS_FILE).write_text(inputs.to_json(), encoding="utf-8")
        write_run_dir(
            run_dir,
            data_source(ws.project_dir, resume),
            dump_yaml(config),
            resume,
            job_description(training, base_model, cpu=info.cpu, launch=info.launch),
            launch=info.launch,
            logits=kd_source(ws.project_dir, training, resume),
        )
        job = JobSpec(
            run_id=run.id, local_dir=run_dir, secrets=ready.secrets, keep_machine=plan.keep_machine
        )
        handle = hook.launch_job(executor=ready.executor, run=run, job=job)
        if handle is None:
            raise UserError(f"no plugin can start a job on target `{run.target}`")
    except Exception as error:
        message = str(error) or type(error).__name__
        logger.debug(f"the start of run {run.id} failed: {error!r}")
        store.save(held.note(run.evolve(state=RunState.FAILED, message=message)))
        if isinstance(error, UserError | TransientError):
            raise UserError(message) from error
        raise
    record = run.evolve(job=handle, state=RunState.RUNNING, snapshots=True)
    try:
        store.save(record)
    except BaseException:
        try:
            hook.cancel_job(executor=ready.executor, run=record)
        except Exception as error:  # noqa: BLE001 - the save error is the one to report
            logger.warning(f"cannot cancel the job of run {run.id} after a failed save: {error}")
        raise
    logger.info("train: job running")
    return held.note(record)


def resolve_secrets(ws: Workspace, training: Training) -> dict[str, SecretStr]:
    """The job's secrets, resolved only now: the Hugging Face token, when set."""
    token = ws.settings.hf_token
    if token is None:
        if training.hub_model_id:
            logger.warning(
                "training.hub_model_id is set but OVERBRAINER_HF_TOKEN is not: the push will fail"
            )
        return {}
    return {HF_TOKEN: resolve_secret(token, "hf_token", ws.project.env)}
