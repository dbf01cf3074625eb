"""Jobs for the conformance suite: prepared by the core's own code, trained by the fake."""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from overbrainer.config.model import ProjectSection, Settings, Training
from overbrainer.job import layout
from overbrainer.plugins import Plugins, new_manager
from overbrainer.train.axolotl import axolotl_config
from overbrainer.train.axolotl_yaml import dump_yaml
from overbrainer.train.prepare import job_description, write_run_dir

BASE_MODEL = "Qwen/Qwen3-0.6B"
QUESTIONS = ("What is a gradient?", "Why checkpoint?", "What does a LoRA adapter hold?")


def manager_with(plugin: object) -> Plugins:
    """A plugin manager with the core's built-in dispatcher and ``plugin``, nothing installed."""
    plugins = new_manager()
    plugins.register(plugin, name="under-test")
    return plugins


def contract_settings(name: str, target: BaseModel) -> Settings:
    """Settings that hold the target under test (the rest is not read by executors)."""
    return Settings.model_construct(
        project=ProjectSection(name="contract"), targets={name: target}
    )


def examples(count: int) -> str:
    lines = []
    for index in range(count):
        question = QUESTIONS[index % len(QUESTIONS)]
        messages = [
            {"role": "user", "content": f"{question} ({index})"},
            {"role": "assistant", "content": "An answer.", "reasoning_content": "Thinking."},
        ]
        lines.append(json.dumps({"id": f"{index:016x}", "topic": "t", "messages": messages}))
    return "\n".join(lines) + "\n"


def prepare_job(
    directory: Path,
    *,
    cpu: bool,
    env: Mapping[str, str],
    resume: tuple[Path, int] | None = None,
) -> None:
    """Fill ``directory`` as ``train`` does: data, the metrics plugin, axolotl.yaml, the
    runner and its job.json (``env`` added to the job's environment), and a checkpoint
    ``(path, step)`` to resume from."""
    training = Training(target="contract", base_model=BASE_MODEL, adapter="lora")
    data = directory / "source-data"
    data.mkdir(parents=True, exist_ok=True)
    (data / "train.jsonl").write_text(examples(8), encoding="utf-8")
    (data / "eval.jsonl").write_text(examples(2), encoding="utf-8")
    checkpoint = None
    if resume is not None:
        path, step = resume
        checkpoint = f"{layout.RESUME_DIR}/checkpoint-{step}"
        shutil.copytree(path, directory / checkpoint)
    config = axolotl_config(training, has_eval=True, cpu=cpu, resume_checkpoint=checkpoint)
    job: dict[str, Any] = json.loads(job_description(training, BASE_MODEL, cpu=cpu))
    job["env"].update(env)
    write_run_dir(directory, data, dump_yaml(config), None, json.dumps(job))
    shutil.rmtree(data)
