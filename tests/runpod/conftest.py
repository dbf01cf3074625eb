"""Fixtures of the runpod tests: ``trainer`` here is the fake trainer's project on the fake
Runpod (the root conftest's ``trainer`` trains on this machine)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.helpers.fake_runpod import FakeRunpod
from tests.helpers.pod_trainer import PodTrainer
from tests.helpers.run_dirs import write_examples

from overbrainer.runs import follow
from overbrainer.testing.fake_axolotl import make_fake_venv


@pytest.fixture
def trainer(
    project_dir: Path, tmp_path: Path, fake_runpod: FakeRunpod, monkeypatch: pytest.MonkeyPatch
) -> Iterator[PodTrainer]:
    monkeypatch.setattr(follow, "POLL_S", 0.05)
    venv = make_fake_venv(tmp_path / "fake-venv")
    write_examples(project_dir / "data" / "train.jsonl", range(10))
    write_examples(project_dir / "data" / "eval.jsonl", range(10, 12))
    trainer = PodTrainer(project_dir, venv, fake=fake_runpod)
    trainer.configure()
    yield trainer
    trainer.stop_all(fake_runpod.root / "pods")
