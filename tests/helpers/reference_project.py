"""A project as the reference tool (overbrainer 0.8, Rust) leaves it, and a strict reader of
the shapes it writes: what this tool writes must pass it, field by field."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from tests.helpers.pipeline_data import answer, seed_questions
from tests.helpers.run_dirs import write_examples

from overbrainer.config.model import Training
from overbrainer.train.axolotl import axolotl_config
from overbrainer.train.axolotl_yaml import dump_yaml

STOPPED = "rust_errors_20261001-120000"


STEP = 4


# Every table and key the reference tool's configuration has, in its shapes.
REFERENCE_CONFIG = """\
[project]
name = "rust_errors"

[[topics]]
name = "borrow_checker"
description = "errors of the borrow checker"
subtopics = 1
questions_per_subtopic = 2

[[topics]]
name = "lifetimes"
subtopics = 1
questions_per_subtopic = 2

[providers.nanogpt]
protocol = "openai"

[providers.local_ollama]
protocol = "openai"

[roles]
generator = { provider = "nanogpt", model = "gen-model" }
parent = { provider = "nanogpt", model = "parent-model", reasoning = true }
judge = { provider = "local_ollama", model = "judge-model", max_tokens = 1024, \
reasoning_effort = "none" }

[pipeline]
concurrency = 2
max_retries = 5
dedup_threshold = 0.8
eval_ratio = 0.1
seed = 42
include_system_prompt = false
embedding_threshold = 0.9
question_batch_size = 10
request_timeout_secs = 600

[training]
target = "local"
base_model = "Qwen/Qwen3-0.6B"
adapter = "lora"
epochs = 1
sequence_len = 4096

[training.axolotl_extra]
chat_template = "qwen3"

[targets.local]
kind = "local"
runtime = "native"
venv = "{venv}"
pass_env = ["FAKE_AXOLOTL_*"]

[targets.homelab]
kind = "ssh"
runtime = "native"
workdir = "overbrainer"
ssh_client = "openssh"

[targets.gpu_cloud]
kind = "runpod"
gpu_types = "auto"
min_vram_gb = 24
max_price_per_hour = 0.8
max_hours = 4
max_cost_usd = 3.0
ssh_client = "builtin"

[export]
after_training = false
quantize = "Q4_K_M"
ollama_name = "rust-mentor"

[compare]
parent_price_in = 1.1
parent_price_out = 2.2
child_price_per_hour = 0.4
max_tokens = 3072
temperature = 0.0
server_start_secs = 300

[hub]
repo = "someone/rust-mentor"
private = true
after_training = false

[metrics]
listen = "127.0.0.1:0"
"""


# The shapes the reference tool writes, and the fields of each (what it reads back).
REJECTED_SHAPES = {
    "subtopic": {"kind", "id", "topic", "name"},
    "question": {"kind", "id", "topic", "subtopic_id", "text"},
}


HISTORY_FIELDS = {
    "stage", "started_at", "ended_at", "status", "provider", "model", "done", "skipped",
    "failed", "excluded", "input_tokens", "output_tokens", "cost",
}  # fmt: skip


RUN_FIELDS = {
    "id", "target", "created", "remote_dir", "job", "state", "message", "snapshot",
    "resumed_from", "snapshots",
}  # fmt: skip


JOB_FIELDS = {"dir", "pid", "container"}


JOB_EXTENSIONS = {"token", "data"}
"""Fields of ``job`` this tool adds: the reference's record types do not refuse unknown
fields (no ``deny_unknown_fields`` on ``RunRecord``/``JobId``), so it reads past them."""


RUN_ID = re.compile(r"^[a-z0-9][a-z0-9_]*_\d{8}-\d{6}(_\d+)?$")


def write_reference_project(directory: Path, provider_url: str, venv: Path) -> Path:
    """The project, its data with every stage done, and a run stopped with a snapshot."""
    directory.mkdir(parents=True)
    (directory / "overbrainer.toml").write_text(REFERENCE_CONFIG.replace("{venv}", str(venv)))
    (directory / ".env").write_text(
        f"OVERBRAINER_PROVIDERS__NANOGPT__BASE_URL={provider_url}\n"
        "OVERBRAINER_PROVIDERS__NANOGPT__API_KEY=sk-reference-0123456789abcdef\n"
    )
    questions = seed_questions(
        directory,
        {("borrow_checker", "E0499"): ["q1", "q2"], ("lifetimes", "E0597"): ["q3", "q4"]},
    )
    data = directory / "data"
    with (data / "answers.jsonl").open("w") as file:
        file.writelines(json.dumps(answer(q)) + "\n" for q in questions)
    rejected = [
        {"kind": "subtopic", "id": "00000000000000a1", "topic": "lifetimes", "name": "Elision"},
        {"kind": "question", "id": "00000000000000b2", "topic": "lifetimes",
         "subtopic_id": questions[2]["subtopic_id"], "text": "What is a lifetime?"},
    ]  # fmt: skip
    (data / "rejected.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rejected))
    state = directory / ".overbrainer"
    state.mkdir()
    (state / "version").write_text("1\n")
    (state / "history.jsonl").write_text(
        json.dumps({"stage": "split", "started_at": "2026-10-01T11:00:00Z",
                    "ended_at": "2026-10-01T11:00:01Z", "status": "ok", "provider": None,
                    "model": None, "done": 0, "skipped": 0, "failed": 0, "excluded": 0,
                    "input_tokens": 0, "output_tokens": 0, "cost": None,
                    "split": {"train": 3, "eval": 1, "orphaned": 0}}) + "\n"
    )  # fmt: skip
    _stopped_run(directory / "runs" / STOPPED)
    return directory


def _stopped_run(run_dir: Path) -> None:
    """A run the reference tool stopped at step 4 on this machine, its snapshot home."""
    remote = str(run_dir)
    write_examples(run_dir / "data" / "train.jsonl", range(6))
    write_examples(run_dir / "data" / "eval.jsonl", range(6, 8))
    training = Training(
        target="local", base_model="Qwen/Qwen3-0.6B", adapter="lora", epochs=1,
        axolotl_extra={"chat_template": "qwen3"},
    )  # fmt: skip
    config = axolotl_config(training, has_eval=True, cpu=True, root=remote)
    (run_dir / "axolotl.yaml").write_text(dump_yaml(config))
    checkpoint = run_dir / "output" / f"checkpoint-{STEP}"
    checkpoint.mkdir(parents=True)
    (checkpoint / "adapter_model.safetensors").write_bytes(b"fake adapter weights")
    (checkpoint / "trainer_state.json").write_text(
        json.dumps({"global_step": STEP, "max_steps": 6, "epoch": 0.66, "log_history": []})
    )
    (run_dir / "output" / "adapter_model.safetensors").write_bytes(b"partial adapter")
    lines = [
        {"event": "stage", "name": "train", "time": 1790000000.5},
        {"event": "begin", "time": 1790000001.25, "max_steps": 6},
        {"event": "log", "time": 1790000010.0, "step": STEP, "epoch": 0.66, "max_steps": 6,
         "loss": 1.25, "learning_rate": 0.0002, "grad_norm": 0.5},
        {"event": "end", "time": 1790000012.0, "step": STEP},
    ]  # fmt: skip
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lines))
    (run_dir / "snapshot.json").write_text(json.dumps(
        {"checkpoint": f"output/checkpoint-{STEP}", "step": STEP, "time": "2026-10-01T12:05:00Z",
         "reason": "requested"}
    ))  # fmt: skip
    (run_dir / "job.log").write_text("training\n")
    (run_dir / "run.json").write_text(json.dumps({
        "id": STOPPED, "target": "local", "created": "2026-10-01T12:00:00Z",
        "remote_dir": remote, "job": {"dir": remote, "pid": 4242, "container": None},
        "state": "stopped", "message": None,
        "snapshot": {"checkpoint": f"output/checkpoint-{STEP}", "step": STEP,
                     "reason": "requested"},
        "snapshots": True,
    }, indent=2) + "\n")  # fmt: skip


def strictly(record: dict[str, Any], fields: set[str], where: str) -> None:
    """The reference's reading of ``record``: a field it does not know is a failure."""
    unknown = set(record) - fields
    assert not unknown, f"{where}: fields the reference tool does not know: {sorted(unknown)}"


def copy_project(source: Path, dest: Path) -> Path:
    shutil.copytree(source, dest)
    return dest
