"""The runpod target passes the executor conformance suite: every run on its own pod of
the fake Runpod, reached over SSH."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tests.helpers.fake_runpod import FakeRunpod

import overbrainer_runpod
from overbrainer.testing import (
    ContractTarget,
    ExecutorContract,
    job_signaller,
    make_fake_venv,
    runner_signaller,
)


class TestRunpodTarget(ExecutorContract):
    @pytest.fixture
    def contract_target(self, fake_runpod: FakeRunpod, tmp_path: Path) -> ContractTarget:
        venv = make_fake_venv(tmp_path / "venv")
        return ContractTarget(
            plugin=overbrainer_runpod.plugin,
            table={
                "kind": "runpod",
                "gpu_types": ["NVIDIA A40"],
                "max_hours": 1,
                "venv": str(venv),
            },
            env=dict(os.environ),
            job_dir=lambda run: Path(run.remote_dir),
            signal_runner=runner_signaller,
            signal_job=job_signaller,
        )
