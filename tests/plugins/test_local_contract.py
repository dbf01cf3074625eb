"""The local target passes the executor conformance suite, in both of its layouts."""

from __future__ import annotations

from pathlib import Path

import pytest

import overbrainer_local
from overbrainer.testing import (
    ContractTarget,
    ExecutorContract,
    job_signaller,
    make_fake_venv,
    runner_signaller,
)


class TestLocalTargetWithAWorkdir(ExecutorContract):
    """Run directories in a work directory of their own: results travel and are verified."""

    @pytest.fixture
    def contract_target(self, tmp_path: Path) -> ContractTarget:
        venv = make_fake_venv(tmp_path / "venv")
        return ContractTarget(
            plugin=overbrainer_local.plugin,
            table={"kind": "local", "venv": str(venv), "workdir": str(tmp_path / "work")},
            job_dir=lambda run: Path(run.remote_dir),
            signal_runner=runner_signaller,
            signal_job=job_signaller,
        )


class TestLocalTargetInTheProject(ExecutorContract):
    """The default: jobs run in the project's runs/ itself, so nothing travels."""

    @pytest.fixture
    def contract_target(self, tmp_path: Path) -> ContractTarget:
        venv = make_fake_venv(tmp_path / "venv")
        return ContractTarget(
            plugin=overbrainer_local.plugin,
            table={"kind": "local", "venv": str(venv)},
            job_dir=lambda run: Path(run.remote_dir),
            signal_runner=runner_signaller,
            signal_job=job_signaller,
        )
