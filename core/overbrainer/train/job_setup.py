"""What a training job runs and with what: its stages, its environment besides secrets,
and the Axolotl plugin copied beside it."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import NamedTuple

from overbrainer.config.model import Training
from overbrainer.job.layout import (
    CONFIG_FILE,
    EVAL_FILE,
    METRICS_FILE,
    PLUGIN_DIR,
    SNAPSHOT_REQUEST,
    TRAIN_FILE,
    TRAVELS,
)
from overbrainer.job.spec import JobStage, Launch
from overbrainer.train.axolotl import PLUGIN_MODULE, is_local_path

KD_MODULE = "overbrainer_kd"
"""The ``kd-align`` stage's module, copied into ``plugin/`` beside the metrics plugin."""


def job_stages(
    training: Training,
    *,
    cpu: bool,
    launch: Launch | None = None,
    base_model: str | None = None,
) -> tuple[JobStage, ...]:
    """The job's commands, run in its directory: with offline ``distill = "logits"`` the alignment
    of the KD rows on the child's tokens (``base_model`` as the job sees it), train, then
    merge the adapter with ``merge``.

    On a CPU ``axolotl train`` needs ``--launcher python``, or it execs ``accelerate``;
    ``merge-lora`` runs in its own process and takes no launcher. ``launch``: Axolotl's own
    CLI execs ``accelerate launch`` with the arguments after ``--``, one process a GPU.
    """
    train: tuple[str, ...] = ("axolotl", "train", CONFIG_FILE)
    if launch is not None:
        train += ("--launcher", "accelerate", "--", *launch_args(launch))
    elif cpu:
        train += ("--launcher", "python")
    stages = []
    if training.kd_offline:
        model = base_model or training.base_model
        align = ("python3", "-m", KD_MODULE, model, TRAIN_FILE, EVAL_FILE)
        stages.append(JobStage("kd-align", align))
    stages.append(JobStage("train", train))
    if training.merge:
        stages.append(JobStage("merge", ("axolotl", "merge-lora", CONFIG_FILE)))
    return tuple(stages)


def launch_args(launch: Launch) -> tuple[str, ...]:
    """``accelerate launch``'s arguments for ``launch``: the process count, one machine and,
    for several processes, data parallel, so that no accelerate config file on the host
    decides them (DeepSpeed and FSDP come from axolotl.yaml: Axolotl sets accelerate's
    environment for them in each process)."""
    several = ("--multi_gpu",) if launch.processes > 1 else ()
    return (*several, "--num_processes", str(launch.processes), "--num_machines", "1")


class JobEnv(NamedTuple):
    """What the job's environment holds besides secrets, as ``job.json`` gives it.

    ``env``: literal values; ``paths``: values relative to the job directory (the runner
    makes them absolute); ``pythonpath``: job-relative entries prepended to ``PYTHONPATH``.
    """

    env: dict[str, str]
    paths: dict[str, str]
    pythonpath: tuple[str, ...]


def job_env(base_model: str) -> JobEnv:
    """The environment of a job training ``base_model`` (as the job will see it).

    Axolotl's telemetry, with no internet, holds a finished job for minutes at exit; a local
    base model needs no hub, and offline nothing waits on one.
    """
    env = {"AXOLOTL_DO_NOT_TRACK": "1", "DO_NOT_TRACK": "1"}
    if is_local_path(base_model):
        env["HF_HUB_OFFLINE"] = "1"
    paths = {"OVERBRAINER_METRICS": METRICS_FILE, "OVERBRAINER_SNAPSHOT": SNAPSHOT_REQUEST}
    return JobEnv(env, paths, (PLUGIN_DIR,))


def plugin_file() -> Path:
    """The Axolotl plugin module to copy into each run's ``plugin/`` directory."""
    return Path(str(resources.files(TRAVELS).joinpath(f"{PLUGIN_MODULE}.py")))


def kd_module_file() -> Path:
    """The ``kd-align`` stage's module, copied into ``plugin/`` with ``distill = "logits"``."""
    return Path(str(resources.files(TRAVELS).joinpath(f"{KD_MODULE}.py")))


def deepspeed_preset(name: str) -> Path:
    """The JSON of the DeepSpeed preset ``name`` (``zero1``..``zero3``), shipped with
    overbrainer, to copy into the run's ``deepspeed/`` directory."""
    return Path(str(resources.files(TRAVELS).joinpath(f"deepspeed/{name}.json")))
