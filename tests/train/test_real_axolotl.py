"""The real Axolotl on the CPU, on a tiny model: metrics, a snapshot, a resume, a merge.

Run with ``OVERBRAINER_AXOLOTL_VENV=<venv holding bin/axolotl> uv run pytest -m real``. Each
Axolotl process takes about 45 s here (2 CPU cores), most of it start-up and dataset
preparation; the whole module about 3 minutes.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from tests.helpers.real import TINY_MODEL
from tests.helpers.run_dirs import job_environ, prepare_run_dir

from overbrainer.config.model import Training
from overbrainer.job.spec import JobStage
from overbrainer.train.axolotl import axolotl_config
from overbrainer.train.axolotl_yaml import resume_mismatch
from overbrainer.train.job_setup import job_stages

pytestmark = pytest.mark.real

TRAIN_EXAMPLES = 20
STEPS = TRAIN_EXAMPLES  # micro batch 1, no accumulation, one epoch
TIMEOUT = 240


@pytest.fixture(scope="module")
def training(tiny_model: Path) -> Training:
    """The CPU recipe: no sample packing, short sequences, one example a step."""
    return Training(
        target="local",
        base_model=str(tiny_model),
        adapter="lora",
        epochs=1,
        sequence_len=256,
        micro_batch_size=1,
        gradient_accumulation_steps=1,
        sample_packing=False,
        evals_per_epoch=2,
        saves_per_epoch=1,
        merge=True,
        chat_template="tokenizer_default",
    )


@dataclass
class Run:
    root: Path
    returncode: int
    seconds: float

    def events(self) -> list[dict]:
        lines = (self.root / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines]

    def train_steps(self) -> list[int]:
        return [e["step"] for e in self.events() if e["event"] == "log" and "loss" in e]

    def log(self) -> str:
        return (self.root / "job.log").read_text(encoding="utf-8", errors="replace")[-4000:]


def start(venv: Path, root: Path, training: Training, stage: JobStage, hf_home: str
          ) -> subprocess.Popen:
    """``stage`` of the job in ``root``, with the job's environment, as a target starts it."""
    log = (root / "job.log").open("ab")
    try:
        return subprocess.Popen(
            [str(venv / "bin" / stage.argv[0]), *stage.argv[1:]],
            cwd=root, env=job_environ(root, training, HF_HOME=hf_home), stdin=subprocess.DEVNULL,
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
    finally:
        log.close()


def finish(process: subprocess.Popen, root: Path, began: float) -> Run:
    try:
        process.wait(timeout=TIMEOUT)
    finally:
        if process.returncode is None:
            os.killpg(process.pid, 9)
            process.wait()
    return Run(root, process.returncode, time.monotonic() - began)


def stage(training: Training, name: str) -> JobStage:
    return next(s for s in job_stages(training, cpu=True) if s.name == name)


@pytest.fixture(scope="module")
def stopped(venv: Path, training: Training, hf_home: str,
            tmp_path_factory: pytest.TempPathFactory) -> Run:
    """A run asked for a snapshot once it logged its third step."""
    root = tmp_path_factory.mktemp("stopped")
    prepare_run_dir(root, training, train_examples=TRAIN_EXAMPLES, eval_examples=4, cpu=True)
    began = time.monotonic()
    process = start(venv, root, training, stage(training, "train"), hf_home)
    metrics = root / "metrics.jsonl"
    while process.poll() is None and time.monotonic() - began < TIMEOUT:
        if metrics.is_file() and _logged_step(metrics) >= 3:
            (root / "snapshot.request").write_text("deadline\n", encoding="utf-8")
            break
        time.sleep(0.02)
    run = finish(process, root, began)
    print(f"\nreal axolotl: stopped run {run.seconds:.1f} s")
    return run


def _logged_step(metrics: Path) -> int:
    """The last training step a ``log`` event names (an ``eval`` event's ``step`` counts
    evaluation batches, not training steps); 0 before any."""
    step = 0
    for line in metrics.read_text(encoding="utf-8").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue  # a line still being written
        if event.get("event") == "log" and isinstance(event.get("step"), int):
            step = event["step"]
    return step


@pytest.fixture(scope="module")
def resumed(venv: Path, training: Training, stopped: Run, hf_home: str,
            tmp_path_factory: pytest.TempPathFactory) -> Run:
    snapshot = json.loads((stopped.root / "snapshot.json").read_text(encoding="utf-8"))
    root = tmp_path_factory.mktemp("resumed")
    prepare_run_dir(
        root, training, train_examples=TRAIN_EXAMPLES, eval_examples=4,
        resume_from=stopped.root / snapshot["checkpoint"], cpu=True,
    )
    began = time.monotonic()
    run = finish(start(venv, root, training, stage(training, "train"), hf_home), root, began)
    print(f"\nreal axolotl: resumed run {run.seconds:.1f} s")
    return run


def test_the_tiny_model_is_made_once(venv, tiny_model):
    began = time.monotonic()
    result = subprocess.run(
        [str(venv / "bin" / "python"), str(TINY_MODEL), str(tiny_model)],
        check=True, capture_output=True, text=True, timeout=60,
    )
    assert "already" in result.stdout
    assert time.monotonic() - began < 5
    template = (tiny_model / "chat_template.jinja").read_text(encoding="utf-8")
    assert "reasoning_content" in template


def test_a_run_writes_metrics_from_begin_to_end(stopped):
    assert stopped.returncode == 0, stopped.log()
    events = stopped.events()
    assert events[0]["event"] == "begin"
    assert events[0]["max_steps"] == STEPS
    assert events[-1]["event"] == "end"
    steps = stopped.train_steps()
    assert steps == list(range(1, len(steps) + 1))
    assert events[-1]["step"] == steps[-1]
    evals = [e for e in events if e["event"] == "eval"]
    assert evals
    assert all(e["total"] >= e["step"] >= 1 for e in evals)
    assert any(e["event"] == "log" and isinstance(e.get("eval_loss"), float) for e in events)
    losses = [e for e in events if e["event"] == "log" and "loss" in e]
    assert all(isinstance(e["loss"], float) and isinstance(e["learning_rate"], float)
               and isinstance(e["grad_norm"], float) for e in losses)


def test_a_snapshot_request_stops_the_run_with_a_resumable_checkpoint(stopped):
    assert stopped.returncode == 0, stopped.log()
    assert (stopped.root / "snapshot.json").is_file(), "no snapshot.json:\n" + stopped.log()
    snapshot = json.loads((stopped.root / "snapshot.json").read_text(encoding="utf-8"))
    step = snapshot["step"]
    assert 3 <= step < STEPS
    assert snapshot["checkpoint"] == f"output/checkpoint-{step}"
    assert snapshot["reason"] == "deadline"
    assert stopped.train_steps()[-1] == step
    checkpoint = stopped.root / snapshot["checkpoint"]
    state = json.loads((checkpoint / "trainer_state.json").read_text(encoding="utf-8"))
    assert state["global_step"] == step
    assert (checkpoint / "optimizer.pt").is_file()
    assert (checkpoint / "adapter_model.safetensors").is_file()
    # Axolotl still writes the partial adapter of that step as its final output.
    assert (stopped.root / "output" / "adapter_model.safetensors").is_file()


def test_the_stopped_runs_settings_match_a_regenerated_config(stopped, training):
    old = (stopped.root / "axolotl.yaml").read_text(encoding="utf-8")
    today = axolotl_config(training, root=str(stopped.root), has_eval=True, cpu=True)
    assert resume_mismatch(old, today) == []
    assert resume_mismatch(old, {**today, "learning_rate": 1e-3}) == ["learning_rate"]


def test_a_resumed_run_continues_after_the_snapshot_and_finishes(stopped, resumed):
    assert resumed.returncode == 0, resumed.log()
    step = json.loads((stopped.root / "snapshot.json").read_text(encoding="utf-8"))["step"]
    assert resumed.train_steps() == list(range(step + 1, STEPS + 1))
    assert resumed.events()[-1] == {**resumed.events()[-1], "event": "end", "step": STEPS}
    assert not (resumed.root / "snapshot.json").exists()
    config = yaml.safe_load((resumed.root / "axolotl.yaml").read_text(encoding="utf-8"))
    assert config["resume_from_checkpoint"] == f"{resumed.root}/resume/checkpoint-{step}"
    assert (resumed.root / "output" / "adapter_model.safetensors").is_file()
    assert (resumed.root / "output" / "adapter_config.json").is_file()


def test_merge_lora_writes_a_merged_model(venv, training, resumed, hf_home):
    assert resumed.returncode == 0, resumed.log()
    began = time.monotonic()
    merge = start(venv, resumed.root, training, stage(training, "merge"), hf_home)
    run = finish(merge, resumed.root, began)
    print(f"\nreal axolotl: merge-lora {run.seconds:.1f} s")
    assert run.returncode == 0, run.log()
    merged = resumed.root / "output" / "merged"
    assert (merged / "model.safetensors").is_file()
    assert (merged / "config.json").is_file()
    assert (merged / "tokenizer.json").is_file()


def test_the_child_is_trained_on_the_reasoning_and_the_answer(venv, stopped):
    """What Axolotl prepared: the assistant turn, reasoning included, is all it trains on."""
    script = (
        "import glob, sys, datasets\n"
        "from transformers import AutoTokenizer\n"
        "tokenizer = AutoTokenizer.from_pretrained(sys.argv[2])\n"
        "for path in sorted(glob.glob(sys.argv[1] + '/prepared/*/')):\n"
        "    row = datasets.load_from_disk(path)[0]\n"
        "    ids = [i for i, label in zip(row['input_ids'], row['labels']) if label != -100]\n"
        "    print(repr(tokenizer.decode(ids)))\n"
    )
    config = yaml.safe_load((stopped.root / "axolotl.yaml").read_text(encoding="utf-8"))
    result = subprocess.run(
        [str(venv / "bin" / "python"), "-c", script, str(stopped.root), config["base_model"]],
        capture_output=True, text=True, timeout=TIMEOUT, check=False,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "DO_NOT_TRACK": "1"},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    trained = result.stdout.splitlines()
    assert len(trained) == 2  # the train and the eval split
    for text in trained:
        assert text.startswith("'<think>\\nLet me think about")
        assert "</think>\\n\\n" in text
        assert text.endswith("<|im_end|>'")
        assert "Question" not in text
