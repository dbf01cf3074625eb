"""The training commands' logic: start a run, follow it, stop, cancel, report.

Everything the core learns of a target comes through the hooks (``describe_target`` for its
device and what it sees); the CLI wraps these functions with the project lock, and ``run``
calls :func:`train` after ``split`` while holding it already.
"""

from __future__ import annotations

import io
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from loguru import logger
from pydantic import BaseModel, SecretStr

from overbrainer import files
from overbrainer.config.model import Settings, TargetBase, Training
from overbrainer.errors import DetachedRun, TransientError, UserError
from overbrainer.hookcalls import Hooks
from overbrainer.job.layout import INPUTS_FILE
from overbrainer.job.record import RunRecord, RunState, SnapshotReason
from overbrainer.job.spec import JobSpec, JobState, JobStatus, TargetInfo
from overbrainer.runs import follow
from overbrainer.runs.follow import Detached, Follower
from overbrainer.runs.interrupt import deferred_sigint
from overbrainer.runs.outcome import output_lines, settle, stopped_lines
from overbrainer.runs.store import RUNS_DIR, RunStore
from overbrainer.train.inputs import Inputs, inputs_of
from overbrainer.train.prepare import Resume, check_train_data, data_source
from overbrainer.train.progress import Progress, Summary
from overbrainer.train.workspace import Workspace

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
    keep_machine: bool = False


@dataclass(frozen=True)
class Prepared:
    """The target reached and ready for a new run, and the job's secrets; or, when asked
    to train only if something changed, the run that is already ``up_to_date``."""

    executor: object
    info: TargetInfo
    secrets: dict[str, SecretStr]
    up_to_date: RunRecord | None = None
    same_as: str | None = None
    """A stopped run made from the very inputs of this one: resume from its snapshot."""


@dataclass(frozen=True)
class Trained:
    """How ``train`` ended: the run, and whether it was already up to date (no training)."""

    record: RunRecord
    up_to_date: bool = False


def plan_run(
    ws: Workspace, target: str | None, resume_from: str | None, keep_pod: bool = False
) -> Plan:
    """Check what a new run needs from the settings and the data, or refuse."""
    from overbrainer.config.load import ConfigError
    from overbrainer.train.axolotl import extra_problems

    training = training_of(ws.settings)
    name = target or training.target
    target_model = target_of(ws.settings, name)
    problems = extra_problems(training)
    if problems:
        raise ConfigError(problems)
    resume = resume_source(ws, training, resume_from) if resume_from else None
    has_eval = check_train_data(data_source(ws.project_dir, resume), ws.project_dir)
    return Plan(training, name, target_model, resume, has_eval, keep_machine=keep_pod)


def train(
    ws: Workspace,
    target: str | None = None,
    resume_from: str | None = None,
    keep_pod: bool = False,
    *,
    only_if_changed: bool = False,
    resume_if_same: str | None = None,
    stop_when: Callable[[], str | None] | None = None,
    max_usd: float | None = None,
) -> Trained | None:
    """``overbrainer train``: start a run on ``target`` (default: training.target), follow
    it to its end, report; the run. ``max_usd``: the budget, when not ``[budget] max_usd``:
    a run whose projected GPU spend exceeds what is left of it is refused before anything
    is created.

    ``only_if_changed``: when a succeeded run was made from the same inputs, say so and
    train nothing. ``resume_if_same``: a stopped run to resume from if it was made from the
    same inputs. ``stop_when``: asked at each poll; a reason it returns asks the job for a
    snapshot (``watch``, when the configuration changes).
    """
    plan = plan_run(ws, target, resume_from, keep_pod)
    check_budget(ws, plan.target, max_usd)
    hook = ws.hook
    ready = prepare(ws, plan, only_if_changed=only_if_changed, same_as=resume_if_same)
    if ready.up_to_date is not None:
        ws.echo(f"train: up to date with run {ready.up_to_date.id}")
        return Trained(ready.up_to_date, up_to_date=True)
    # Only for a run that trains: an up-to-date `run` trains nothing it could warn about.
    from overbrainer.train.reasoning import reasoning_template_warning

    warning = reasoning_template_warning(plan.training)
    if warning:
        logger.warning(warning)
    if ready.same_as is not None:
        try:
            plan = plan_run(ws, target, ready.same_as, keep_pod)
        except UserError as refused:
            logger.info(f"train: a new run instead of resuming: {refused}")
    executor = ready.executor
    store = ws.runs
    record: RunRecord | None = None
    outcome: RunState | None = None
    try:
        record = store.create(
            ws.settings.project.name,
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
            record = start(ws, record, plan=plan, ready=ready)
        if noted.caught:
            raise noted.interrupt()
        record = follow_to_end(ws, executor, record, stop_when=stop_when)
        outcome = record.state
    except KeyboardInterrupt:
        detached(store, record)
    finally:
        release(hook, executor, record, outcome or _ended(store, record))
    report(ws, record)
    return Trained(record) if record is not None else None


def check_budget(ws: Workspace, target: str, max_usd: float | None) -> None:
    """Refuse a run on a priced target whose projected GPU spend exceeds what is left of
    the budget (``max_usd``, else ``[budget] max_usd``), before a machine is created."""
    from overbrainer.pipeline.budget import RAISE, usd
    from overbrainer.pipeline.projection import spent
    from overbrainer.train.estimate import estimate_training

    limit = max_usd if max_usd is not None else ws.settings.budget.max_usd
    if limit is None:
        return
    estimate = estimate_training(ws.project, ws.hook, 0, target)
    if estimate is not None and estimate.basis.startswith("unknown: "):
        # A target with a price whose price could not be read is still paid for.
        raise UserError(
            f"budget: the price of training on `{target}` cannot be known "
            f"({estimate.basis.removeprefix('unknown: ')}), so max_usd cannot be kept: no "
            "machine was created; try again once it can (or unset [budget] max_usd)"
        )
    if estimate is None or estimate.price is None or estimate.usd is None:
        return  # no price: nothing is paid for by the hour
    so_far = spent(ws.project_dir)
    left = max(limit - so_far, 0.0)
    if estimate.usd <= left:
        return
    price = estimate.price
    raise UserError(
        f"budget: training on `{target}` would cost about {usd(estimate.usd)} "
        f"({estimate.gpu_hours:.2f} GPU hours of {price.gpu_type} at "
        f"${price.usd_per_hour:.2f}/h), more than the {usd(left)} left of max_usd "
        f"{usd(limit)} ({usd(so_far)} spent); no machine was created: train on a cheaper "
        f"target or fewer epochs, or {RAISE}"
    )


def prepare(
    ws: Workspace, plan: Plan, *, only_if_changed: bool = False, same_as: str | None = None
) -> Prepared:
    """Reach the target, learn what it is, make it ready, and resolve the job's secrets.
    Ctrl-C here stops the preparation with no run left behind."""
    hook = ws.hook
    executor = None
    try:
        secrets = resolve_secrets(ws, plan.training)
        executor = create_executor(ws, plan.target, plan.target_model, None)
        info = hook.describe_target(executor=executor)
        if info is None:
            raise UserError(f"no installed plugin can describe target `{plan.target}`")
        if plan.keep_machine and not info.per_run:
            raise UserError("--keep-pod only applies to a runpod target")
        resumable = None
        if (only_if_changed or same_as) and plan.resume is None:
            fingerprint = job_inputs(ws, plan, info).fingerprint
            done = up_to_date_run(ws.runs, fingerprint) if only_if_changed else None
            if done is not None:
                release(hook, executor, None, None)
                return Prepared(executor, info, secrets, up_to_date=done)
            if same_as is not None:
                before = Inputs.read(ws.runs.run_dir(same_as) / INPUTS_FILE)
                resumable = same_as if before and before.fingerprint == fingerprint else None
        hook.prepare_target(executor=executor)
    except KeyboardInterrupt:
        release(hook, executor, None, None)
        raise UserError("interrupted before the run started") from None
    except BaseException:
        release(hook, executor, None, None)
        raise
    return Prepared(executor, info, secrets, same_as=resumable)


def _ended(store: RunStore, record: RunRecord | None) -> RunState | None:
    """The final state of ``record`` as saved, or None while it may still run."""
    if record is None:
        return None
    try:
        state = store.load(record.id).state
    except UserError:
        return None
    return state if state.ended else None


def job_config(ws: Workspace, plan: Plan, info: TargetInfo) -> tuple[str, dict[str, Any]]:
    """The base model as the job sees it, and the run's axolotl configuration."""
    from overbrainer.train.axolotl import axolotl_config
    from overbrainer.train.prepare import resolve_base_model

    resume = plan.resume
    base_model = resolve_base_model(plan.training, ws.project_dir, info.local_paths)
    config = axolotl_config(
        plan.training.model_copy(update={"base_model": base_model}),
        has_eval=plan.has_eval,
        resume_checkpoint=f"resume/{resume.name}" if resume else None,
        cpu=info.cpu,
    )
    return base_model, config


def job_inputs(ws: Workspace, plan: Plan, info: TargetInfo) -> Inputs:
    """What a new run of ``plan`` on this target would be made from."""
    base_model, config = job_config(ws, plan, info)
    return inputs_of(
        config,
        data_source(ws.project_dir, plan.resume),
        base_model,
        device=info.device,
        merge=plan.training.merge,
    )


def up_to_date_run(store: RunStore, fingerprint: str) -> RunRecord | None:
    """The newest succeeded run made from the inputs ``fingerprint`` stands for, whose
    output is home."""
    from overbrainer.job.layout import OUTPUT_DIR

    for record in reversed(store.list()):
        if record.state is not RunState.SUCCEEDED:
            continue
        run_dir = store.run_dir(record.id)
        inputs = Inputs.read(run_dir / INPUTS_FILE)
        same = inputs is not None and inputs.fingerprint == fingerprint
        if same and (run_dir / OUTPUT_DIR).is_dir():
            return record
    return None


def start(ws: Workspace, run: RunRecord, *, plan: Plan, ready: Prepared) -> RunRecord:
    """Write the job directory, launch the job, and record the run ``running``.

    Any failure records the run ``failed`` with the error as its message. A ``UserError``
    or a transient failure is re-raised as a ``UserError``; anything else is a bug and keeps
    its traceback.
    """
    from overbrainer.train.axolotl import dump_yaml
    from overbrainer.train.prepare import job_description, write_run_dir

    store = ws.runs
    hook = ws.hook
    run_dir = store.run_dir(run.id)
    training, resume, info = plan.training, plan.resume, ready.info
    try:
        base_model, config = job_config(ws, plan, info)
        inputs = job_inputs(ws, plan, info)
        (run_dir / INPUTS_FILE).write_text(inputs.to_json(), encoding="utf-8")
        write_run_dir(
            run_dir,
            data_source(ws.project_dir, resume),
            dump_yaml(config),
            resume,
            job_description(training, base_model, cpu=info.cpu),
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
        store.save(run.evolve(state=RunState.FAILED, message=message))
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
    return record


def follow_to_end(
    ws: Workspace,
    executor: object,
    record: RunRecord,
    asked_at: float | None = None,
    stop_when: Callable[[], str | None] | None = None,
) -> RunRecord:
    """Follow the job of ``record`` until it ends, then settle and save its state."""
    from overbrainer.events import publish

    progress = Progress()
    mirror = _followed_metrics(ws, record)

    def on_event(event: dict[str, Any]) -> None:
        progress.event(event)
        if mirror is not None:
            mirror.write(json.dumps(event) + "\n")
            mirror.flush()
        publish("train_event", run_id=record.id, event=event, phase=progress.current_phase)

    def on_phase(name: str) -> None:
        progress.phase(name)
        publish("train_phase", run_id=record.id, phase=progress.current_phase)

    publish("train_phase", run_id=record.id, phase=progress.current_phase)
    try:
        follower = Follower(
            ws.hook,
            executor,
            record,
            on_event=on_event,
            asked_at=asked_at,
            poll_s=follow.POLL_S,
            limits=follow.STOP_LIMITS,
            stop_when=stop_when,
        )
        seen = follower.follow()
        progress.status(seen.status.describe())
        return settle(ws.hook, executor, ws.runs, record, seen, on_phase=on_phase)
    except Detached as error:
        raise UserError(str(error)) from None
    finally:
        progress.close()
        if mirror is not None:
            mirror.close()
        publish("train_end", run_id=record.id)


def _followed_metrics(ws: Workspace, record: RunRecord) -> IO[str] | None:
    """For a job running away from its run directory, the file at home its metrics lines
    are copied to as they come (``runs show`` and the TUI chart them live); started afresh
    by each follower, which reads the job's lines from the first."""
    from overbrainer.job.layout import FOLLOWED_METRICS

    run_dir = ws.runs.run_dir(record.id)
    if Path(record.remote_dir) == run_dir or Path(record.remote_dir) == run_dir.resolve():
        return None  # the job writes metrics.jsonl right here
    path = run_dir / FOLLOWED_METRICS
    try:
        path.unlink(missing_ok=True)  # afresh, and a link there is removed, never followed
        return os.fdopen(files.open_append(path, FOLLOWED_METRICS), "w", encoding="utf-8")
    except (OSError, UserError) as error:
        logger.debug(f"no live copy of the metrics of run {record.id}: {error}")
        return None


def resolve_secrets(ws: Workspace, training: Training) -> dict[str, SecretStr]:
    """The job's secrets, resolved only now: the Hugging Face token, when set."""
    from overbrainer.config.secrets import resolve_secret

    token = ws.settings.hf_token
    if token is None:
        if training.hub_model_id:
            logger.warning(
                "training.hub_model_id is set but OVERBRAINER_HF_TOKEN is not: the push will fail"
            )
        return {}
    return {HF_TOKEN: resolve_secret(token, "hf_token", ws.project.env)}


def create_executor(ws: Workspace, name: str, target: BaseModel, run: RunRecord | None) -> Any:
    executor = ws.hook.create_executor(name=name, target=target, project=ws.project, run=run)
    if executor is None:
        kind = target.kind if isinstance(target, TargetBase) else "?"
        raise UserError(f"no installed plugin can run target `{name}` (kind `{kind}`)")
    return executor


def release(hook: Hooks, executor: object, run: RunRecord | None, outcome: RunState | None) -> None:
    if executor is None:
        return
    try:
        hook.release_executor(executor=executor, run=run, outcome=outcome)
    except Exception as error:  # noqa: BLE001 - releasing must not hide the real outcome
        logger.warning(f"cannot release target resources: {error}")


def detached(store: RunStore, record: RunRecord | None) -> None:
    """After Ctrl-C while following: a detach, which says how to follow again (on stdout,
    exit 0: the reference exited 1, but nothing failed); before the job, an error."""
    if record is None:
        raise UserError("interrupted before the run started")
    record = store.load(record.id)
    if record.job is None:
        raise UserError(f"interrupted: run {record.id} has no job")
    raise DetachedRun(
        f"interrupted: run {record.id} keeps running on target `{record.target}`; "
        f"{reattach(record.id)}"
    )


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
        from overbrainer.charts.describe import write_run_chart

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
    from overbrainer.job.layout import METRICS_FILE
    from overbrainer.job.metrics import parse_event

    summary = Summary()
    path = store.run_dir(run_id) / METRICS_FILE
    try:
        source = files.open_read(path, METRICS_FILE)
        if source is None:
            return summary
        with io.TextIOWrapper(source, encoding="utf-8", errors="replace") as file:
            for line in file:
                event = parse_event(line)
                if event is not None and event["event"] in ("begin", "log", "end"):
                    summary.update(event)
    except (OSError, UserError):
        pass
    return summary


# Resuming.


def resume_source(ws: Workspace, training: Training, run_id: str) -> Resume:
    """The stopped run ``run_id`` to resume from, checked: stopped with its snapshot here,
    trained with the same settings."""
    from overbrainer.job.layout import CONFIG_FILE
    from overbrainer.train.axolotl import resume_mismatch

    store = ws.runs
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
    old_yaml = (
        files.read_regular(run_dir / CONFIG_FILE, f"{RUNS_DIR}/{run_id}/{CONFIG_FILE}") or b""
    ).decode("utf-8")
    differ = resume_mismatch(old_yaml, _config_like(ws, training, old_yaml))
    if differ:
        raise UserError(
            f"cannot resume from run {run_id}: the training settings differ from the ones it "
            f"ran with ({', '.join(differ)}); set them back to resume, or start a new run"
        )
    return Resume(run_id=run_id, run_dir=run_dir, checkpoint=checkpoint)


def _config_like(ws: Workspace, training: Training, old_yaml: str) -> dict[str, Any]:
    """Today's axolotl.yaml as the stopped run would have had it: the same device, the same
    paths (relative, or absolute under its old root) and the same form of ``base_model``."""
    import yaml

    from overbrainer.train.axolotl import axolotl_config
    from overbrainer.train.prepare import resolve_base_model

    old = yaml.safe_load(old_yaml) or {}
    output_dir = str(old.get("output_dir", ""))
    root = output_dir.removesuffix("/output") if output_dir.startswith("/") else ""
    cpu = old.get("lora_mlp_kernel") is False and old.get("bf16") is False
    # A path relative to the project was made absolute for a target that sees this machine.
    forms = {training.base_model, resolve_base_model(training, ws.project_dir, True)}
    base_model = old.get("base_model") if old.get("base_model") in forms else training.base_model
    return axolotl_config(
        training.model_copy(update={"base_model": base_model}),
        has_eval="test_datasets" in old,
        cpu=cpu,
        root=root,
    )


# Following again, stopping, cancelling.


def run_executor(ws: Workspace, record: RunRecord) -> Any:
    """The executor of the target ``record`` was started on."""
    target = ws.settings.targets.get(record.target)
    if target is None:
        raise UserError(
            f"target `{record.target}` of run {record.id} is no longer in overbrainer.toml"
        )
    return create_executor(ws, record.target, target, record)


def attach(ws: Workspace, run_id: str) -> None:
    """``train attach``: follow a run again (or report an ended one from its files)."""
    record = ws.runs.load(run_id)
    if record.state.ended:
        report(ws, record)
        return
    follow_existing(ws, record)


def follow_existing(
    ws: Workspace, record: RunRecord, asked_at: float | None = None, executor: object = None
) -> None:
    """Follow a started run to its end and report it."""
    hook = ws.hook
    if executor is None:
        executor = run_executor(ws, record)
    outcome = None
    try:
        record = follow_to_end(ws, executor, record, asked_at=asked_at)
        outcome = record.state
    except KeyboardInterrupt:
        release(hook, executor, record, None)
        detached(ws.runs, record)
    finally:
        if outcome is not None:
            release(hook, executor, record, outcome)
    report(ws, record)


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


def request_stop(ws: Workspace, record: RunRecord) -> Any:
    """Ask the job for a snapshot through its target; the executor used."""
    stoppable(record)
    executor = run_executor(ws, record)
    hook = ws.hook
    try:
        done = hook.request_snapshot(
            executor=executor, run=record, reason=SnapshotReason.REQUESTED.value
        )
        if not done:
            raise UserError(f"no plugin can ask the job of run {record.id} for a snapshot")
    except BaseException:
        release(hook, executor, record, None)
        raise
    ws.echo(stop_requested(record.id))
    return executor


def stop(ws: Workspace, run_id: str) -> None:
    """``train stop``: ask for a snapshot, then follow the run to its end with the limits."""
    record = ws.runs.load(run_id)
    executor = request_stop(ws, record)
    follow_existing(ws, record, asked_at=time.monotonic(), executor=executor)


def stop_for_holder(ws: Workspace, run_id: str, holder: int) -> None:
    """``train stop`` while another process holds the project: only ask for the snapshot."""
    record = ws.runs.load(run_id)
    executor = request_stop(ws, record)
    release(ws.hook, executor, record, None)
    who = f"overbrainer (pid {holder})" if holder else "another overbrainer"
    ws.echo(
        f"train: {who} is using this project: if it follows run {run_id}, it collects the "
        f"snapshot; if not, collect it with `overbrainer train attach {run_id}`"
    )


def cancel(ws: Workspace, run_id: str) -> None:
    """``train cancel``: stop the job of a run, record it cancelled, bring its files home."""
    store = ws.runs
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
    hook = ws.hook
    executor = run_executor(ws, record)
    try:
        with deferred_sigint():
            status: JobStatus | None = hook.cancel_job(executor=executor, run=record)
            if status is None:
                raise UserError(f"no plugin can cancel the job of run {run_id}")
            if status.state is JobState.CANCELLED:
                from overbrainer.runs.follow import Followed

                record = settle(hook, executor, store, record, Followed(status=status))
    finally:
        release(hook, executor, record, record.state if record.state.ended else None)
    if record.state is not RunState.CANCELLED:
        ws.echo(
            f"train: the job of run {run_id} had already ended ({status.describe()}): collect it "
            f"with `overbrainer train attach {run_id}`"
        )
        return
    suffix = f" ({record.message})" if record.message else ""
    ws.echo(f"train: run {run_id} cancelled{suffix}")
