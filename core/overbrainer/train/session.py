"""The training commands' logic: start a run, follow it, stop, cancel, report.

The CLI wraps these with the project lock; ``run`` calls :func:`train` after ``split``
while holding it already.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import click
from loguru import logger
from pydantic import BaseModel, SecretStr

from overbrainer.cli.context import App
from overbrainer.config.model import Settings, Training
from overbrainer.errors import UserError
from overbrainer.job.spec import JobState, JobStatus
from overbrainer.runs import follow
from overbrainer.runs.follow import Detached, Follower
from overbrainer.runs.interrupt import deferred_sigint
from overbrainer.runs.outcome import output_lines, settle, stopped_lines
from overbrainer.runs.record import RunRecord, RunState, SnapshotReason
from overbrainer.runs.store import RUNS_DIR, RunStore
from overbrainer.train.prepare import Resume, check_train_data, data_source
from overbrainer.train.progress import Progress, Summary

HF_TOKEN = "HF_TOKEN"  # noqa: S105 - the variable's name, not a secret


def training_of(settings: Settings) -> Training:
    if settings.training is None:
        raise UserError("no [training] section in overbrainer.toml")
    return settings.training


def target_of(settings: Settings, name: str) -> BaseModel:
    target = settings.targets.get(name)
    if target is None:
        raise UserError(f"unknown target `{name}`")
    return target


def reattach(run_id: str) -> str:
    return f"follow it again with `overbrainer train attach {run_id}`"


# Starting.


@dataclass(frozen=True)
class Plan:
    """A new run, checked before anything is reached or created."""

    training: Training
    target: str
    target_model: BaseModel
    resume: Resume | None
    has_eval: bool


def plan_run(app: App, target: str | None, resume_from: str | None, keep_pod: bool = False) -> Plan:
    """Check what a new run needs from the settings and the data, or refuse."""
    from overbrainer.config.load import ConfigError
    from overbrainer.train.axolotl import extra_problems
    from overbrainer.train.reasoning import reasoning_template_warning

    training = training_of(app.settings)
    name = target or training.target
    target_model = target_of(app.settings, name)
    if keep_pod and getattr(target_model, "kind", None) != "runpod":
        raise UserError("--keep-pod only applies to a runpod target")
    problems = extra_problems(training.axolotl_extra)
    if problems:
        raise ConfigError(problems)
    resume = resume_source(app, training, resume_from) if resume_from else None
    warning = reasoning_template_warning(training)
    if warning:
        logger.warning(warning)
    has_eval = check_train_data(data_source(app.project_dir, resume), app.project_dir)
    return Plan(training, name, target_model, resume, has_eval)


def train(
    app: App, target: str | None = None, resume_from: str | None = None, keep_pod: bool = False
) -> None:
    """``overbrainer train``: start a run on ``target`` (default: training.target), follow
    it to its end, report."""
    plan = plan_run(app, target, resume_from, keep_pod)
    hook = app.plugins.hook
    executor, secrets = prepare(app, plan, keep_pod)
    store = app.runs
    record: RunRecord | None = None
    outcome: str | None = None
    try:
        record = store.create(
            app.settings.project.name,
            plan.target,
            claim=lambda run_id: hook.claim_run_dir(executor=executor, run_id=run_id),
        )
        if plan.resume is not None:
            record = record.evolve(resumed_from=plan.resume.run_id)
            store.save(record)
            logger.info(
                f"train: run {record.id} resumes from the snapshot of run "
                f"{plan.resume.run_id} ({plan.resume.checkpoint})"
            )
        logger.info(f"train: run {record.id} on target `{plan.target}`, in {record.remote_dir}")
        # Starting is never interrupted: a job spawned and not recorded would be lost.
        with deferred_sigint() as noted:
            record = start(app, hook, executor, record, plan=plan, secrets=secrets)
        if noted.caught:
            raise KeyboardInterrupt
        record = follow_to_end(app, hook, executor, record)
        outcome = record.state.value
    except KeyboardInterrupt:
        detached(store, record)
    finally:
        _release(hook, executor, record, outcome or _ended(store, record))
    report(store, record)


def prepare(app: App, plan: Plan, keep_pod: bool) -> tuple[Any, dict[str, SecretStr]]:
    """Reach the target and resolve the job's secrets. Ctrl-C here stops the preparation
    with no run left behind."""
    hook = app.plugins.hook
    executor = None
    try:
        secrets = resolve_secrets(app, plan.training)
        executor = create_executor(app, plan.target, plan.target_model, None)
        if hasattr(executor, "prepare_host"):
            executor.prepare_host()
        if keep_pod:
            executor.keep = True
    except KeyboardInterrupt:
        _release(hook, executor, None, None)
        raise UserError("interrupted before the run started") from None
    except BaseException:
        _release(hook, executor, None, None)
        raise
    return executor, secrets


def _ended(store: RunStore, record: RunRecord | None) -> str | None:
    """The final state of ``record`` as saved, or None while it may still run."""
    if record is None:
        return None
    try:
        state = store.load(record.id).state
    except UserError:
        return None
    return state.value if state.ended else None


def start(
    app: App,
    hook: Any,
    executor: Any,
    run: RunRecord,
    *,
    plan: Plan,
    secrets: dict[str, SecretStr],
) -> RunRecord:
    """Write the run directory, upload it, spawn the job, and record it ``running``.

    Any failure records the run ``failed`` with the error as its message.
    """
    from overbrainer.train.axolotl import axolotl_config, dump_yaml
    from overbrainer.train.prepare import job_spec, resolve_base_model, write_run_dir

    store = app.runs
    run_dir = store.run_dir(run.id)
    training, resume = plan.training, plan.resume
    try:
        cpu = bool(getattr(executor, "cpu_only", False))
        root = executor.job_root(run) if hasattr(executor, "job_root") else run.remote_dir
        local = getattr(plan.target_model, "kind", None) == "local"
        base_model = resolve_base_model(training, app.project_dir, local)
        config = axolotl_config(
            training.model_copy(update={"base_model": base_model}),
            root=root,
            has_eval=plan.has_eval,
            resume_checkpoint=f"resume/{resume.name}" if resume else None,
            cpu=cpu,
        )
        write_run_dir(run_dir, data_source(app.project_dir, resume), dump_yaml(config), resume)
        job = job_spec(run.id, run_dir, training, base_model, cpu=cpu, secrets=secrets)
        handle = hook.launch_job(executor=executor, run=run, job=job)
        if handle is None:
            raise UserError(f"no plugin can start a job on target `{run.target}`")
    except Exception as error:
        message = str(error) or type(error).__name__
        logger.debug(f"the start of run {run.id} failed: {error!r}")
        store.save(run.evolve(state=RunState.FAILED, message=message))
        raise UserError(message) from error
    record = run.evolve(job=handle, state=RunState.RUNNING, snapshots=True)
    try:
        store.save(record)
    except BaseException:
        try:
            hook.cancel_job(executor=executor, run=record)
        except Exception as error:  # noqa: BLE001 - the save error is the one to report
            logger.warning(f"cannot cancel the job of run {run.id} after a failed save: {error}")
        raise
    logger.info("train: job running")
    return record


def follow_to_end(
    app: App, hook: Any, executor: Any, record: RunRecord, asked_at: float | None = None
) -> RunRecord:
    """Follow the job of ``record`` until it ends, then settle and save its state."""
    progress = Progress()
    try:
        follower = Follower(
            hook,
            executor,
            record,
            on_event=progress.event,
            asked_at=asked_at,
            poll_s=follow.POLL_S,
            limits=follow.STOP_LIMITS,
        )
        seen = follower.follow()
        progress.status(seen.status.describe())
        return settle(hook, executor, app.runs, record, seen, on_phase=progress.phase)
    except Detached as error:
        raise UserError(str(error)) from None
    finally:
        progress.close()


def resolve_secrets(app: App, training: Training) -> dict[str, SecretStr]:
    """The job's secrets, resolved only now: the Hugging Face token, when set."""
    from overbrainer.config.secrets import resolve_secret

    token = app.settings.hf_token
    if token is None:
        if training.hub_model_id:
            logger.warning(
                "training.hub_model_id is set but OVERBRAINER_HF_TOKEN is not: the push will fail"
            )
        return {}
    return {HF_TOKEN: resolve_secret(token, "hf_token", app.env.merged)}


def create_executor(app: App, name: str, target: BaseModel, run: RunRecord | None) -> Any:
    executor = app.plugins.hook.create_executor(
        name=name, target=target, project=app.project, run=run
    )
    if executor is None:
        kind = getattr(target, "kind", "?")
        raise UserError(f"no installed plugin can run target `{name}` (kind `{kind}`)")
    return executor


def _release(hook: Any, executor: Any, run: RunRecord | None, outcome: str | None) -> None:
    if executor is None:
        return
    try:
        hook.release_executor(executor=executor, run=run, outcome=outcome)
    except Exception as error:  # noqa: BLE001 - releasing must not hide the real outcome
        logger.warning(f"cannot release target resources: {error}")


def detached(store: RunStore, record: RunRecord | None) -> None:
    """After Ctrl-C while following: say how to follow again, and exit non-zero."""
    if record is None:
        raise UserError("interrupted before the run started")
    record = store.load(record.id)
    if record.job is None:
        raise UserError(f"interrupted: run {record.id} has no job")
    raise UserError(
        f"interrupted: run {record.id} keeps running on target `{record.target}`; "
        f"{reattach(record.id)}"
    )


def report(store: RunStore, record: RunRecord | None, summary: Summary | None = None) -> None:
    """The final report: stdout first, then an error for a run that did not succeed."""
    if record is None:
        return
    if summary is None:
        summary = local_summary(store, record.id)
    output = (
        f"; output in {RUNS_DIR}/{record.id}/output" if record.state is RunState.SUCCEEDED else ""
    )
    click.echo(f"train: run {record.id} {record.state.value}; {summary.describe()}{output}")
    match record.state:
        case RunState.SUCCEEDED:
            for line in output_lines(store, record):
                click.echo(line)
        case RunState.STOPPED:
            for line in stopped_lines(record):
                click.echo(line)
        case RunState.CANCELLED:
            raise UserError(f"run {record.id} was cancelled")
        case RunState.FAILED:
            raise UserError(record.message or f"run {record.id} failed")
        case _:
            raise UserError(f"run {record.id} is {record.state.value}; {reattach(record.id)}")


def local_summary(store: RunStore, run_id: str) -> Summary:
    """The latest figures in a run's local ``metrics.jsonl``."""
    from overbrainer.job.metrics import parse_event

    summary = Summary()
    try:
        with (store.run_dir(run_id) / "metrics.jsonl").open(
            encoding="utf-8", errors="replace"
        ) as file:
            for line in file:
                event = parse_event(line)
                if event is not None and event["event"] in ("begin", "log", "end"):
                    summary.update(event)
    except OSError:
        pass
    return summary


# Resuming.


def resume_source(app: App, training: Training, run_id: str) -> Resume:
    """The stopped run ``run_id`` to resume from, checked: stopped with its snapshot here,
    trained with the same settings."""
    from overbrainer.train.axolotl import resume_mismatch

    store = app.runs
    source = store.load(run_id)
    if source.state is not RunState.STOPPED or source.snapshot is None:
        raise UserError(
            f"cannot resume from run {run_id}: it is {source.state.value}, not stopped with a "
            "snapshot (see `overbrainer train stop`)"
        )
    run_dir = store.run_dir(run_id)
    checkpoint = source.snapshot.checkpoint
    if not (run_dir / checkpoint).is_dir():
        raise UserError(
            f"cannot resume from run {run_id}: its snapshot is not in {RUNS_DIR}/{run_id}/"
            f"{checkpoint}; retrieve it with `overbrainer train attach {run_id}`"
        )
    old_yaml = (run_dir / "axolotl.yaml").read_text(encoding="utf-8")
    differ = resume_mismatch(old_yaml, _config_like(app, training, source, old_yaml))
    if differ:
        raise UserError(
            f"cannot resume from run {run_id}: the training settings differ from the ones it "
            f"ran with ({', '.join(differ)}); set them back to resume, or start a new run"
        )
    return Resume(run_id=run_id, run_dir=run_dir, checkpoint=checkpoint)


def _config_like(app: App, training: Training, source: RunRecord, old_yaml: str) -> dict[str, Any]:
    """Today's axolotl.yaml as the stopped run would have had it (same root, device, data)."""
    import yaml

    from overbrainer.train.axolotl import axolotl_config
    from overbrainer.train.prepare import resolve_base_model

    old = yaml.safe_load(old_yaml) or {}
    output_dir = str(old.get("output_dir", ""))
    root = (
        output_dir.removesuffix("/output") if output_dir.endswith("/output") else source.remote_dir
    )
    cpu = old.get("lora_mlp_kernel") is False and old.get("bf16") is False
    local = getattr(app.settings.targets.get(source.target), "kind", None) == "local"
    base_model = resolve_base_model(training, app.project_dir, local)
    return axolotl_config(
        training.model_copy(update={"base_model": base_model}),
        root=root,
        has_eval="test_datasets" in old,
        cpu=cpu,
    )


# Following again, stopping, cancelling.


def run_executor(app: App, record: RunRecord) -> Any:
    """The executor of the target ``record`` was started on."""
    target = app.settings.targets.get(record.target)
    if target is None:
        raise UserError(
            f"target `{record.target}` of run {record.id} is no longer in overbrainer.toml"
        )
    return create_executor(app, record.target, target, record)


def attach(app: App, run_id: str) -> None:
    """``train attach``: follow a run again (or report an ended one from its files)."""
    store = app.runs
    record = store.load(run_id)
    if record.state.ended:
        report(store, record)
        return
    follow_existing(app, record)


def follow_existing(
    app: App, record: RunRecord, asked_at: float | None = None, executor: Any = None
) -> None:
    """Follow a started run to its end and report it."""
    hook = app.plugins.hook
    if executor is None:
        executor = run_executor(app, record)
    outcome = None
    try:
        record = follow_to_end(app, hook, executor, record, asked_at=asked_at)
        outcome = record.state.value
    except KeyboardInterrupt:
        _release(hook, executor, record, None)
        detached(app.runs, record)
    finally:
        if outcome is not None:
            _release(hook, executor, record, outcome)
    report(app.runs, record)


def stoppable(record: RunRecord) -> None:
    """Refuse a snapshot request for a run whose job cannot give one."""
    run_id = record.id
    if record.job is None or record.state is RunState.PREPARING:
        raise UserError(f"run {run_id} has not started: there is no job to snapshot yet")
    if record.state.ended:
        raise UserError(f"run {run_id} already ended: {record.state.value}")
    if not record.snapshots:
        raise UserError(
            f"run {run_id} was started by an overbrainer older than 0.5.0: its job cannot save "
            f"a snapshot; cancel it with `overbrainer train cancel {run_id}`, or let it finish"
        )


def stop_requested(run_id: str) -> str:
    return (
        f"train: snapshot of run {run_id} requested: its job saves a checkpoint at the end of "
        "its current step, then stops"
    )


def request_stop(app: App, record: RunRecord) -> Any:
    """Write the snapshot request on the target; the executor used."""
    stoppable(record)
    executor = run_executor(app, record)
    hook = app.plugins.hook
    try:
        done = hook.request_snapshot(
            executor=executor, run=record, reason=SnapshotReason.REQUESTED.value
        )
        if not done:
            raise UserError(f"no plugin can ask the job of run {record.id} for a snapshot")
    except BaseException:
        _release(hook, executor, record, None)
        raise
    click.echo(stop_requested(record.id))
    return executor


def stop(app: App, run_id: str) -> None:
    """``train stop``: ask for a snapshot, then follow the run to its end with the limits."""
    record = app.runs.load(run_id)
    executor = request_stop(app, record)
    follow_existing(app, record, asked_at=time.monotonic(), executor=executor)


def stop_for_holder(app: App, run_id: str, holder: int) -> None:
    """``train stop`` while another process holds the project: only write the request."""
    record = app.runs.load(run_id)
    executor = request_stop(app, record)
    _release(app.plugins.hook, executor, record, None)
    who = f"overbrainer (pid {holder})" if holder else "another overbrainer"
    click.echo(
        f"train: {who} is using this project: if it follows run {run_id}, it collects the "
        f"snapshot; if not, collect it with `overbrainer train attach {run_id}`"
    )


def cancel(app: App, run_id: str) -> None:
    """``train cancel``: stop the job of a run, record it cancelled, bring its files home."""
    store = app.runs
    record = store.load(run_id)
    if record.state is RunState.CANCELLED:
        raise UserError(f"run {run_id} already ended: cancelled")
    if record.job is None:
        raise UserError(f"run {run_id} has not started")
    if record.state.ended:
        # A container that outlived its wrapper would keep the GPU: stop what is left.
        logger.info(
            f"train: run {run_id} already ended: {record.state.value}; stopping any job left "
            "on the target"
        )
    hook = app.plugins.hook
    executor = run_executor(app, record)
    try:
        with deferred_sigint():
            status: JobStatus = hook.cancel_job(executor=executor, run=record)
            if status is None:
                raise UserError(f"no plugin can cancel the job of run {run_id}")
            if status.state is JobState.CANCELLED:
                from overbrainer.runs.follow import Followed

                record = settle(hook, executor, store, record, Followed(status=status))
    finally:
        _release(hook, executor, record, record.state.value if record.state.ended else None)
    if record.state is not RunState.CANCELLED:
        click.echo(
            f"train: the job of run {run_id} had already ended ({status.describe()}): collect it "
            f"with `overbrainer train attach {run_id}`"
        )
        return
    suffix = f" ({record.message})" if record.message else ""
    click.echo(f"train: run {run_id} cancelled{suffix}")
