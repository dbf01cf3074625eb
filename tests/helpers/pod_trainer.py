"""The fake trainer's project pointed at the runpod target: each run trains on a pod of the
fake Runpod (tests/helpers/fake_runpod.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from tests.helpers.fake_runpod import FakeRunpod
from tests.helpers.trainer import Trainer

RUNPOD_TRAINING = """
[training]
target = "gpu"
base_model = "Qwen/Qwen3-0.6B"
adapter = "lora"

[targets.gpu]
kind = "runpod"
gpu_types = {gpu_types}
max_hours = {max_hours}
venv = "{venv}"
boot_grace_minutes = {boot_grace}
retrieve_grace_minutes = 1
"""


@dataclass
class PodTrainer(Trainer):
    fake: FakeRunpod = field(kw_only=True)

    def configure(  # type: ignore[override]
        self,
        gpu_types: str = '["NVIDIA A40"]',
        max_hours: float = 1,
        boot_grace: int = 5,
        extra: str = "",
    ) -> None:
        text = (self.dir / "overbrainer.toml").read_text(encoding="utf-8")
        text = text.split("\n[training]")[0]
        training = RUNPOD_TRAINING.format(
            gpu_types=gpu_types, max_hours=max_hours, venv=self.venv, boot_grace=boot_grace
        )
        (self.dir / "overbrainer.toml").write_text(text + training + extra, encoding="utf-8")

    def pod(self, run_id: str) -> dict:
        return json.loads((self.dir / "runs" / run_id / "pod.json").read_text())

    def remote(self, run_id: str) -> Path:
        pod = self.pod(run_id)
        return Path(pod["workdir"]) / run_id
