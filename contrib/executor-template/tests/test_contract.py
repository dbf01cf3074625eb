"""The template passes the executor contract: the whole test suite of an executor package."""

from __future__ import annotations

from pathlib import Path

import pytest

import overbrainer_spool
from overbrainer.plugin import RunRecord
from overbrainer.testing import ContractTarget, ExecutorContract, make_fake_venv


def signal_runner(run: RunRecord) -> None:
    """SIGTERM to the runner alone, as a scheduler's graceful stop."""
    import os
    import signal

    assert run.job is not None
    os.kill(run.job.data_as(overbrainer_spool.SpoolJob).pid, signal.SIGTERM)


def signal_job(run: RunRecord) -> None:
    """SIGTERM to every process of the job at once (the runner's session), as a scheduler's
    stop does."""
    import os
    import signal

    assert run.job is not None
    os.killpg(run.job.data_as(overbrainer_spool.SpoolJob).pid, signal.SIGTERM)


class TestSpoolExecutor(ExecutorContract):
    @pytest.fixture
    def contract_target(self, tmp_path: Path) -> ContractTarget:
        venv = make_fake_venv(tmp_path / "venv")  # its bin/ holds the fake axolotl
        return ContractTarget(
            plugin=overbrainer_spool.plugin,
            table={
                "kind": "spool",
                "directory": str(tmp_path / "spool"),
                "python": str(venv / "bin" / "python"),
            },
            job_dir=lambda run: Path(run.remote_dir),
            signal_runner=signal_runner,
            signal_job=signal_job,
        )
