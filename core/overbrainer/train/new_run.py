"""What a new run needs before anything is made: its plan, the budget, the resume checks,
and whether an earlier run already trained on the same inputs.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, SecretStr

from overbrainer import files
from overbrainer.config.load import ConfigError
from overbrainer.config.model import Settings, Training
from overbrainer.errors import UserError
from overbrainer.job.interface import Executor
from overbrainer.job.layout import CONFIG_FILE, INPUTS_FILE, OUTPUT_DIR
from overbrainer.job.record import RunRecord, RunState
from overbrainer.job.spec import TargetInfo
from overbrainer.pipeline.budget import RAISE, usd
from overbrainer.pipeline.spend import spent
from overbrainer.plan.training import estimate_training
from overbrainer.runs.store import RUNS_DIR, RunStore
from overbrainer.train.axolotl import SHARDING_KEYS, OnlineTeacher, axolotl_config, extra_problems
from overbrainer.train.distill import check_distill
from overbrainer.train.inputs import Inputs, inputs_of
from overbrainer.train.prepare import (
    DATA_FILES,
    Resume,
    check_train_data,
    data_source,
    kd_source,
    resolve_base_model,
)
from overbrainer.train.teacher import check_teacher, online_parent
from overbrainer.train.workspace import Workspace


def training_of(settings: Settings) -> Training:
    if settings.training is None:
        raise UserError("no [training] section in overbrainer.toml")
    return settings.training


def target_of(settings: Settings, name: str) -> BaseModel:
    target = settings.targets.get(name)
    if target is None:
        raise UserError(f"unknown target `{name}`")
    return target


@dataclass(frozen=True)
class Plan:
    """A new run, checked before anything is reached or created."""

    training: Training
    target: str
    target_model: BaseModel
    resume: Resume | None
    has_eval: bool
    keep_machine: bool = False
    teacher: OnlineTeacher | None = None
    """The served parent the job asks (``mode = "online"``), once it is up."""


@dataclass(frozen=True)
class Prepared:
    """The target reached and ready for a new run, and the job's secrets; or, when asked
    to train only if something changed, the run that is already ``up_to_date``."""

    executor: Executor
    info: TargetInfo
    secrets: dict[str, SecretStr]
    up_to_date: RunRecord | None = None
    same_as: str | None = None
    """A stopped run made from the very inputs of this one: resume from its snapshot."""


def plan_run(
    ws: Workspace, target: str | None, resume_from: str | None, keep_machine: bool = False
) -> Plan:
    """Check what a new run needs from the settings and the data, or refuse."""
    training = training_of(ws.settings)
    check_distill(training)
    name = target or training.target
    target_model = target_of(ws.settings, name)
    if training.kd_online:
        check_teacher(ws, name)
    problems = extra_problems(training)
    if problems:
        raise ConfigError(problems)
    resume = resume_source(ws, training, resume_from) if resume_from else None
    has_eval = check_train_data(data_source(ws.project_dir, resume), ws.project_dir)
    if kd_source(ws.project_dir, training, resume) is not None:
        from overbrainer.train.kd_data import check_kd_files  # noqa: PLC0415 - numpy

        check_kd_files(ws.project_dir / "data", DATA_FILES)
    return Plan(training, name, target_model, resume, has_eval, keep_machine=keep_machine)


def check_budget(ws: Workspace, target: str, max_usd: float | None) -> None:
    """Refuse a run on a priced target whose projected GPU spend exceeds what is left of
    the budget (``max_usd``, else ``[budget] max_usd``), before a machine is created."""
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


def job_config(ws: Workspace, plan: Plan, info: TargetInfo) -> tuple[str, dict[str, Any]]:
    """The base model as the job sees it, and the run's axolotl configuration."""
    resume = plan.resume
    base_model = resolve_base_model(plan.training, ws.project_dir, info.local_paths)
    config = axolotl_config(
        plan.training.model_copy(update={"base_model": base_model}),
        has_eval=plan.has_eval,
        resume_checkpoint=f"resume/{resume.name}" if resume else None,
        cpu=info.cpu,
        launch=info.launch,
        teacher=plan.teacher,
    )
    return base_model, config


def job_inputs(
    ws: Workspace, plan: Plan, info: TargetInfo, made: tuple[str, dict[str, Any]] | None = None
) -> Inputs:
    """What a new run of ``plan`` on this target would be made from; ``made``: its
    :func:`job_config`, when the caller has it already."""
    base_model, config = made or job_config(ws, plan, info)
    return inputs_of(
        config,
        data_source(ws.project_dir, plan.resume),
        base_model,
        device=info.device,
        merge=plan.training.merge,
        processes=info.launch.processes if info.launch else None,
        logits=kd_source(ws.project_dir, plan.training, plan.resume),
        teacher=online_parent(ws.settings) if plan.training.kd_online else None,
    )


def up_to_date_run(store: RunStore, fingerprint: str) -> RunRecord | None:
    """The newest succeeded run made from the inputs ``fingerprint`` stands for, whose
    output is home."""
    for record in reversed(store.list()):
        if record.state is not RunState.SUCCEEDED:
            continue
        run_dir = store.run_dir(record.id)
        inputs = Inputs.read(run_dir / INPUTS_FILE)
        same = inputs is not None and inputs.fingerprint == fingerprint
        if same and (run_dir / OUTPUT_DIR).is_dir():
            return record
    return None


def resume_source(ws: Workspace, training: Training, run_id: str) -> Resume:
    """The run ``run_id`` to resume from, checked: stopped with its snapshot here, or
    cancelled or failed with a checkpoint here (its last); trained with the same settings."""
    store = ws.runs
    source = store.load(run_id)
    run_dir = store.run_dir(run_id)
    if source.state in (RunState.CANCELLED, RunState.FAILED):
        checkpoint = last_checkpoint(run_dir)
        if checkpoint is None:
            raise UserError(
                f"cannot resume from run {run_id}: it is {source.state.value} and has no "
                f"checkpoint to resume from (none in {RUNS_DIR}/{run_id}/{OUTPUT_DIR})"
            )
    elif source.state is not RunState.STOPPED or source.snapshot is None:
        raise UserError(
            f"cannot resume from run {run_id}: it is {source.state.value}, not stopped with a "
            "snapshot (see `overbrainer train stop`)"
        )
    else:
        checkpoint = source.snapshot.checkpoint
    if not (run_dir / checkpoint).is_dir():
        raise UserError(
            f"cannot resume from run {run_id}: its snapshot is not in {RUNS_DIR}/{run_id}/"
            f"{checkpoint}; retrieve it with `overbrainer train attach {run_id}`"
        )
    old_yaml = (
        files.read_regular(run_dir / CONFIG_FILE, f"{RUNS_DIR}/{run_id}/{CONFIG_FILE}") or b""
    ).decode("utf-8")
    from overbrainer.train.axolotl_yaml import resume_mismatch  # noqa: PLC0415 - yaml: to resume

    differ = resume_mismatch(old_yaml, _config_like(ws, training, old_yaml))
    if differ:
        raise UserError(
            f"cannot resume from run {run_id}: the training settings differ from the ones it "
            f"ran with ({', '.join(differ)}); set them back to resume, or start a new run"
        )
    return Resume(
        run_id=run_id,
        run_dir=run_dir,
        checkpoint=checkpoint,
        snapshot=source.state is RunState.STOPPED,
    )


_CHECKPOINT = re.compile(r"checkpoint-(\d+)")


def last_checkpoint(run_dir: Path) -> str | None:
    """The newest whole checkpoint in a run's ``output/`` (``output/checkpoint-N``), or None:
    a cancelled or failed run resumes from it as a stopped one does from its snapshot. A
    checkpoint counts when its ``trainer_state.json`` says step N; one cut off while being
    saved (no such file, another step) is passed over."""
    found: list[int] = []
    output = run_dir / OUTPUT_DIR
    for entry in output.glob("checkpoint-*") if output.is_dir() else ():
        match = _CHECKPOINT.fullmatch(entry.name)
        state = entry / "trainer_state.json"
        if match is None or entry.is_symlink() or not state.is_file():
            continue
        step = int(match[1])
        if _global_step(state, f"{RUNS_DIR}/{run_dir.name}/{OUTPUT_DIR}/{entry.name}") == step:
            found.append(step)
    return f"{OUTPUT_DIR}/checkpoint-{max(found)}" if found else None


_STATE_HEAD = 64 << 10
"""What of a ``trainer_state.json`` is read first: Transformers writes its keys sorted, so
``global_step`` comes before ``log_history``, which grows with every logged step."""
_STATE_LIMIT = 64 << 20
_GLOBAL_STEP = re.compile(rb'"global_step"\s*:\s*(\d+)')


def _global_step(state: Path, shown: str) -> int | None:
    """The step a checkpoint's ``trainer_state.json`` says, read within a bound (a FIFO or
    a link out is refused), or None."""
    try:
        shown = f"{shown}/trainer_state.json"
        source = files.open_read(state, shown, follow=False)
        if source is None:
            return None
        with source:
            found = _GLOBAL_STEP.search(source.read(_STATE_HEAD))
        if found is not None:
            return int(found[1])
        data = files.read_regular(state, shown, _STATE_LIMIT, follow=False) or b""
        step = json.loads(data).get("global_step")
    except (OSError, UserError, ValueError, AttributeError):
        return None
    return step if isinstance(step, int) and not isinstance(step, bool) else None


def _config_like(ws: Workspace, training: Training, old_yaml: str) -> dict[str, Any]:
    """Today's axolotl.yaml as the stopped run would have had it: the same device, the same
    paths (relative, or absolute under its old root) and the same form of ``base_model``."""
    import yaml


    old = yaml.safe_load(old_yaml) or {}
    output_dir = str(old.get("output_dir", ""))
    root = output_dir.removesuffix("/output") if output_dir.startswith("/") else ""
    cpu = old.get("lora_mlp_kernel") is False and old.get("bf16") is False
    # A path relative to the project was made absolute for a target that sees this machine.
    forms = {training.base_model, resolve_base_model(training, ws.project_dir, True)}
    base_model = old.get("base_model") if old.get("base_model") in forms else training.base_model
    config = axolotl_config(
        training.model_copy(update={"base_model": base_model}),
        has_eval="test_datasets" in old,
        cpu=cpu,
        root=root,
    )
    # A DeepSpeed or FSDP preset is the target's, not a training setting: kept as it was.
    kept = {key: old[key] for key in SHARDING_KEYS if key in old}
    return config | {key: value for key, value in kept.items() if key not in training.axolotl_extra}
