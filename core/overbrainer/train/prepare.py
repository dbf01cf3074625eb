"""The job directory a run starts from: the runner, its machine sampler and its job.json,
data copies, the metrics plugin, axolotl.yaml, the checkpoint to resume from."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from overbrainer import files, splitpair
from overbrainer.config.model import Training
from overbrainer.errors import UserError
from overbrainer.job import layout
from overbrainer.job.scripts import runner_source, sampler_source
from overbrainer.job.spec import JobStage, Launch
from overbrainer.lines import read_lines
from overbrainer.runs.follow import POLL_S
from overbrainer.train.job_setup import (
    deepspeed_preset,
    job_env,
    job_stages,
    kd_module_file,
    plugin_file,
)

DATA_FILES = ("train.jsonl", "eval.jsonl")


@dataclass(frozen=True)
class Resume:
    """The run a new run continues from: a stopped one's snapshot, or the last checkpoint
    of a cancelled or failed one (``snapshot`` False)."""

    run_id: str
    run_dir: Path
    checkpoint: str  # "output/checkpoint-N"
    snapshot: bool = True

    @property
    def step(self) -> int:
        return int(self.name.removeprefix("checkpoint-"))

    @property
    def name(self) -> str:
        return Path(self.checkpoint).name


def data_source(project_dir: Path, resume: Resume | None) -> Path:
    """Where a new run's data comes from: ``data/``, or the stopped run's own copies."""
    return resume.run_dir / "data" if resume else project_dir / "data"


def kd_source(project_dir: Path, training: Training, resume: Resume | None) -> Path | None:
    """The logprobs.bin a new run's examples take their rows from (none to take: text,
    the online mode, or a resumed run's copies)."""
    if not training.kd_offline or resume is not None:
        return None
    # numpy comes with the logits: only for distillation from them.
    from overbrainer.pipeline.logits_file import LOGPROBS  # noqa: PLC0415

    return project_dir / "data" / LOGPROBS


def check_train_data(source: Path, project_dir: Path) -> bool:
    """Raise unless the train file has an example; whether the eval file has one."""
    train = source / "train.jsonl"
    if source == project_dir / "data":  # a stopped run's copies were checked as it started
        splitpair.check(source)
    if not _has_example(train, _shown(train, project_dir)):
        raise UserError(
            f"{_shown(train, project_dir)} has no example: run `overbrainer split` first"
        )
    evaluation = source / "eval.jsonl"
    return _has_example(evaluation, _shown(evaluation, project_dir))


def _has_example(path: Path, shown: str) -> bool:
    file = files.open_read(path, shown)  # a FIFO would block the train command
    if file is None:
        return False
    with file:
        return any(line.strip() for line in read_lines(file, shown))


def _shown(path: Path, project_dir: Path) -> str:
    try:
        return str(path.relative_to(project_dir))
    except ValueError:
        return str(path)


def resolve_base_model(training: Training, project_dir: Path, local: bool) -> str:
    """``base_model`` as the job must see it: a path relative to the project made absolute
    for a target on this machine; a hub id or remote path as it is."""
    candidate = Path(training.base_model).expanduser()
    if local and not candidate.is_absolute() and (project_dir / candidate).is_dir():
        return str((project_dir / candidate).resolve())
    return training.base_model


def write_run_dir(
    run_dir: Path,
    source: Path,
    yaml_text: str,
    resume: Resume | None,
    job: str,
    *,
    launch: Launch | None = None,
    logits: Path | None = None,
) -> None:
    """Fill ``run_dir`` with what the job needs: the runner and ``job`` (its job.json),
    ``data/``, ``plugin/``, ``axolotl.yaml``, the checkpoint to resume from (hard-linked
    when possible), and the DeepSpeed preset of ``launch``. ``logits``: the project's
    logprobs.bin, whose rows each example gets (``distill = "logits"``, a new run; a
    resumed run's copies have them already)."""
    # numpy comes with the logits: only for distillation from them.
    from overbrainer.pipeline.logits_file import LogitsFile  # noqa: PLC0415
    from overbrainer.train.kd_data import write_kd_file  # noqa: PLC0415

    data = run_dir / layout.DATA_DIR
    data.mkdir(exist_ok=True)
    for name in DATA_FILES:
        if not (source / name).is_file():
            continue
        if logits is None:
            shutil.copyfile(source / name, data / name)
        else:
            store = LogitsFile(logits, f"data/{logits.name}")
            write_kd_file(source / name, data / name, store, f"data/{name}")
    plugin = run_dir / layout.PLUGIN_DIR
    plugin.mkdir(exist_ok=True)
    shutil.copyfile(plugin_file(), plugin / plugin_file().name)
    shutil.copyfile(kd_module_file(), plugin / kd_module_file().name)
    if resume is not None:
        _link_tree(resume.run_dir / resume.checkpoint, run_dir / layout.RESUME_DIR / resume.name)
    if launch is not None and launch.deepspeed is not None:
        (run_dir / layout.DEEPSPEED_DIR).mkdir(exist_ok=True)
        name = f"{launch.deepspeed}.json"
        shutil.copyfile(deepspeed_preset(launch.deepspeed), run_dir / layout.DEEPSPEED_DIR / name)
    (run_dir / layout.CONFIG_FILE).write_text(yaml_text, encoding="utf-8")
    (run_dir / layout.RUNNER).write_text(runner_source(), encoding="utf-8")
    (run_dir / layout.MACHINE_SAMPLER).write_text(sampler_source(), encoding="utf-8")
    (run_dir / layout.JOB_FILE).write_text(job, encoding="utf-8")


def _link_tree(source: Path, dest: Path) -> None:
    """Hard-link every file of ``source`` into ``dest`` (copying across file systems)."""
    for directory, _, names in os.walk(source):
        target = dest / Path(directory).relative_to(source)
        target.mkdir(parents=True, exist_ok=True)
        for name in names:
            try:
                os.link(Path(directory) / name, target / name)
            except OSError:
                shutil.copy2(Path(directory) / name, target / name)


def job_description(
    training: Training, base_model: str, *, cpu: bool, launch: Launch | None = None
) -> str:
    """``job.json``: what the runner runs (Axolotl's stages) and the environment they need."""
    env, paths, pythonpath = job_env(base_model)
    stages: tuple[JobStage, ...] = job_stages(
        training, cpu=cpu, launch=launch, base_model=base_model
    )
    description = {
        "format": 1,
        "stages": [{"name": stage.name, "argv": list(stage.argv)} for stage in stages],
        "env": env,
        "paths": paths,
        "pythonpath": list(pythonpath),
        # the machine's gauges at the pace the follow loop reads them
        "machine_sample_s": POLL_S,
    }
    return json.dumps(description, indent=2) + "\n"
