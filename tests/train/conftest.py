"""The train tests' fixtures beyond ``trainer`` (``tests/fixtures/training.py``): the real
Axolotl on the tiny model, and a count of run-record reads."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from overbrainer.runs.store import RunStore

# The real Axolotl (the real tier): the quickstart's answers, the tiny model, the CPU.

QUICKSTART_DATA = Path(__file__).parents[2] / "examples" / "quickstart" / "data" / "answers.jsonl"

REAL_TRAINING = """
[training]
target = "local"
base_model = "{model}"
adapter = "lora"
chat_template = "tokenizer_default"
epochs = {epochs}
sequence_len = 384
sample_packing = false
micro_batch_size = 1
gradient_accumulation_steps = 1
evals_per_epoch = 1
saves_per_epoch = 1

[targets.local]
kind = "local"
venv = "{venv}"
device = "cpu"
"""


@pytest.fixture
def real(trainer, venv, tiny_model, monkeypatch):
    """The trainer project, pointed at the real Axolotl and the tiny model."""
    lines = QUICKSTART_DATA.read_text().splitlines()
    (trainer.dir / "data" / "train.jsonl").write_text("\n".join(lines[:16]) + "\n")
    (trainer.dir / "data" / "eval.jsonl").write_text("\n".join(lines[16:19]) + "\n")
    monkeypatch.setenv("AXOLOTL_DO_NOT_TRACK", "1")
    monkeypatch.setenv("DO_NOT_TRACK", "1")

    def configure(epochs: int = 1, extra: str = "") -> None:
        text = (trainer.dir / "overbrainer.toml").read_text().split("\n[training]")[0]
        (trainer.dir / "overbrainer.toml").write_text(
            text + REAL_TRAINING.format(model=tiny_model, epochs=epochs, venv=venv) + extra
        )

    trainer.configure_real = configure
    configure()
    return trainer


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How many times each run's record was read (``RunStore.load``), by id."""
    counted: Counter[str] = Counter()
    load = RunStore.load

    def counting(self: RunStore, run_id: str):
        counted[run_id] += 1
        return load(self, run_id)

    monkeypatch.setattr(RunStore, "load", counting)
    return counted
