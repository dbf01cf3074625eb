"""The ssh target passes the executor conformance suite against the real sshd."""

from __future__ import annotations

from pathlib import Path

import pytest

import overbrainer_ssh
from overbrainer.testing import (
    ContractTarget,
    ExecutorContract,
    job_signaller,
    make_fake_venv,
    runner_signaller,
)


class TestSshTarget(ExecutorContract):
    @pytest.fixture
    def contract_target(self, ssh_alias: str, tmp_path: Path) -> ContractTarget:
        # The "remote" machine is this one: the fake venv and the job directory are
        # reachable from here, for the tests that alter or scan the target's files.
        venv = make_fake_venv(tmp_path / "venv")
        return ContractTarget(
            plugin=overbrainer_ssh.plugin,
            table={"kind": "ssh", "host": ssh_alias, "venv": str(venv)},
            job_dir=lambda run: Path(run.remote_dir),
            signal_runner=runner_signaller,
            signal_job=job_signaller,
        )
