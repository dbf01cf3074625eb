"""The slurm target against a real one-node Slurm: the executor contract, and Slurm's part.

The cluster (munged, slurmctld and slurmd on 127.0.0.1) is started once for the session
and stopped at its end by pid (``slurm_fixtures.py``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import secrets as tokens
import time
from pathlib import Path

import pytest
from loguru import logger

import overbrainer_slurm
from overbrainer.plugin import LOST, JobHandle, JobState, JobStatus, RunRecord, TransientError
from overbrainer.testing import ContractTarget, Driver, ExecutorContract, make_fake_venv
from overbrainer_slurm.localcluster import LocalSlurm, find_program
from overbrainer_slurm.transport import LocalCommands
from slurm_fixtures import slurm_cluster  # noqa: F401 - the fixture

SECRET_NAME = "HF_TOKEN"


def slurm_table(spool: Path, venv: Path, **more: object) -> dict:
    return {
        "kind": "slurm",
        "spool": str(spool),
        "venv": str(venv),
        "device": "cpu",
        "local_paths": True,
        **more,
    }


def job_id(run: RunRecord) -> str:
    assert run.job is not None
    return run.job.data_as(overbrainer_slurm.SlurmJob).job_id


def term_the_batch_shell(cluster: LocalSlurm):
    """Slurm's own graceful stop of a job: SIGTERM to its batch shell, the runner."""

    def stop(run: RunRecord) -> None:
        cluster.command("scancel", "--signal=TERM", "--batch", job_id(run))

    return stop


def term_every_process(cluster: LocalSlurm):
    """Slurm's stop of every process of a job at once (``scancel --signal=TERM --full``, as at
    a time limit without ``B:``)."""

    def stop(run: RunRecord) -> None:
        cluster.command("scancel", "--signal=TERM", "--full", job_id(run))

    return stop


def slurm_state(cluster: LocalSlurm, job: str) -> str:
    line = cluster.command("scontrol", "show", "job", "-o", job)
    return line.split("JobState=", 1)[1].split()[0]


class TestSlurmExecutor(ExecutorContract):
    @pytest.fixture
    def table(self, tmp_path: Path) -> dict:
        """The target table; a test changes it before ``driver`` is made."""
        venv = make_fake_venv(tmp_path / "venv")  # its bin/ holds the fake axolotl
        return slurm_table(tmp_path / "spool", venv)

    @pytest.fixture
    def contract_target(
        self,
        slurm_cluster: LocalSlurm,  # noqa: F811
        table: dict,
    ) -> ContractTarget:
        return ContractTarget(
            plugin=overbrainer_slurm.plugin,
            table=table,
            env={**os.environ, **slurm_cluster.env},
            job_dir=lambda run: Path(run.remote_dir),
            signal_runner=term_the_batch_shell(slurm_cluster),
            signal_job=term_every_process(slurm_cluster),
        )

    @pytest.fixture
    def held_driver(self, table: dict, request: pytest.FixtureRequest) -> Driver:
        """A driver whose jobs are submitted held (``--hold``): queued until released."""
        table["sbatch_args"] = ["--hold"]
        return request.getfixturevalue("driver")

    def test_no_secret_in_what_slurm_stores_or_shows(
        self,
        driver: Driver,
        slurm_cluster: LocalSlurm,  # noqa: F811
        tmp_path: Path,
    ) -> None:
        secret = "hf_" + tokens.token_hex(16)
        # sbatch as called, its environment and argv kept: a shim first on PATH.
        shim, seen = tmp_path / "shim", tmp_path / "sbatch.seen"
        shim.mkdir()
        real = find_program("sbatch")
        (shim / "sbatch").write_text(
            f'#!/bin/sh\n{{ env; printf "%s\\n" "$@"; }} > {seen}\nexec {real} "$@"\n'
        )
        (shim / "sbatch").chmod(0o755)
        # The secret in overbrainer's own environment too, as OVERBRAINER_HF_TOKEN is.
        project = driver.executor.project
        env = {
            **project.env,
            "OVERBRAINER_HF_TOKEN": secret,
            "PATH": f"{shim}:{project.env['PATH']}",
        }
        driver.executor.project = dataclasses.replace(project, env=env)
        driver.executor.slurm.commands = LocalCommands(env)
        run = driver.launch(
            knobs={"FAKE_AXOLOTL_HANG": "1", "FAKE_AXOLOTL_SHOW_SECRET": SECRET_NAME},
            secrets={SECRET_NAME: secret},
        )
        driver.training(run)
        digest = hashlib.sha256(secret.encode()).hexdigest()
        assert f"{SECRET_NAME} sha256 {digest}".encode() in driver.whole_log(run)
        job = job_id(run)
        shown = [
            slurm_cluster.command("scontrol", "show", "job", "-dd", job),
            slurm_cluster.command("scontrol", "write", "batch_script", job, "-"),
            slurm_cluster.command("squeue", "-j", job, "-o", "%all"),
        ]
        assert "--export=NONE" in seen.read_text().splitlines()
        assert secret not in seen.read_text()
        assert "run_job.py" in shown[1]
        assert f"overbrainer-{run.id}" in shown[2]
        for text in shown:
            assert secret not in text
        driver.hook.request_snapshot(executor=driver.executor, run=run, reason="requested")
        driver.follow(run)
        for place in (tmp_path, slurm_cluster.root):
            for path in place.rglob("*"):
                if path.is_file() and not path.is_symlink():
                    assert secret.encode() not in path.read_bytes(), f"the secret is in {path}"

    def test_the_job_is_a_slurm_batch_job_with_the_targets_options(
        self,
        driver: Driver,
        slurm_cluster: LocalSlurm,  # noqa: F811
        table: dict,
    ) -> None:
        run = driver.launch(knobs={"FAKE_AXOLOTL_STEPS": "1"})
        poll, _ = driver.follow(run)
        assert poll.status == JobStatus.exited(0)
        deadline = time.monotonic() + 30  # Slurm sees the end a moment after the runner's
        while slurm_state(slurm_cluster, job_id(run)) in ("RUNNING", "COMPLETING"):
            assert time.monotonic() < deadline, "Slurm never saw the job end"
            time.sleep(0.1)
        shown = slurm_cluster.command("scontrol", "show", "job", "-o", job_id(run))
        assert f"JobName=overbrainer-{run.id} " in shown
        assert f"WorkDir={run.remote_dir} " in shown
        assert f"StdOut={run.remote_dir}/job.log " in shown
        assert "JobState=COMPLETED " in shown and "ExitCode=0:0 " in shown
        log = driver.whole_log(run)
        assert b"fake axolotl: training completed" in log

    def test_a_queued_job_is_cancelled_before_it_starts(
        self,
        slurm_cluster: LocalSlurm,  # noqa: F811
        held_driver: Driver,
    ) -> None:
        driver = held_driver
        run = driver.launch(knobs={"FAKE_AXOLOTL_STEPS": "1"}, secrets={SECRET_NAME: "hf_x"})
        where = Path(run.remote_dir)
        assert driver.poll(run).status.state is JobState.RUNNING  # queued counts as running
        assert slurm_state(slurm_cluster, job_id(run)) == "PENDING"
        note = driver.project / "runs" / run.id / "target.note"
        assert note.read_text() == f"slurm job {job_id(run)} PENDING (JobHeldUser)\n"
        assert driver.cancel(run).state is JobState.CANCELLED
        assert slurm_state(slurm_cluster, job_id(run)) == "CANCELLED"
        assert not (where / ".secrets.json").exists()
        assert not (where / "metrics.jsonl").exists(), "the job started"
        assert driver.cancel(run).state is JobState.CANCELLED
        assert note.read_text() == f"slurm job {job_id(run)} CANCELLED\n"

    def test_a_stop_asked_while_queued_is_a_snapshot_at_the_first_step(
        self,
        slurm_cluster: LocalSlurm,  # noqa: F811
        held_driver: Driver,
    ) -> None:
        driver = held_driver
        run = driver.launch(knobs={"FAKE_AXOLOTL_HANG": "1"})
        assert driver.hook.request_snapshot(executor=driver.executor, run=run, reason="deadline")
        slurm_cluster.command("scontrol", "release", job_id(run))
        poll, _ = driver.follow(run)
        assert poll.status == JobStatus.exited(0)
        assert poll.snapshot is not None and '"reason": "deadline"' in poll.snapshot

    def test_cancel_ends_every_process_at_once_not_after_killwait(
        self,
        driver: Driver,
        slurm_cluster: LocalSlurm,  # noqa: F811
    ) -> None:
        run = driver.launch(knobs={"FAKE_AXOLOTL_HANG": "1", "FAKE_AXOLOTL_CHILD": "1"})
        driver.training(run)
        child_file = Path(run.remote_dir) / "fake_axolotl.child"
        deadline = time.monotonic() + 30
        while not child_file.exists():
            assert time.monotonic() < deadline, "the fake trainer started no child"
            time.sleep(0.05)
        child = int(child_file.read_text())
        started = time.monotonic()
        assert driver.cancel(run).state is JobState.CANCELLED
        took = time.monotonic() - started
        assert took < slurm_cluster.kill_wait_s / 2, f"cancel took {took:.1f} s"
        assert not _alive(child), "the trainer's child outlived the cancel"
        assert not slurm_cluster.jobs()

    def test_a_time_limit_ends_in_a_snapshot(
        self,
        table: dict,
        slurm_cluster: LocalSlurm,  # noqa: F811
        request: pytest.FixtureRequest,
    ) -> None:
        # Slurm sends the warning once, at one of its periodic checks (up to a minute
        # early). Due at once, it came while the job was still starting on a loaded machine
        # and was lost (one run in several: no signal before the limit). So the job starts
        # with a long limit, and the limit is cut once the runner is training: the warning
        # is then due at the next check, 3 to 4 minutes before the new end.
        table.update({"time_limit": "60", "snapshot_margin_s": 230})
        driver = request.getfixturevalue("driver")
        run = driver.launch(knobs={"FAKE_AXOLOTL_HANG": "1"})
        driver.training(run)
        shown = slurm_cluster.command("scontrol", "show", "job", "-o", job_id(run))
        hours, minutes, _ = shown.split(" RunTime=", 1)[1].split()[0].split("-")[-1].split(":")
        cut = int(hours) * 60 + int(minutes) + 4
        slurm_cluster.command("scontrol", "update", f"JobId={job_id(run)}", f"TimeLimit={cut}")
        deadline = time.monotonic() + 270
        while (poll := driver.poll(run)).status.state is JobState.RUNNING:
            assert time.monotonic() < deadline, "no signal before the time limit"
            time.sleep(0.5)
        assert poll.status == JobStatus.exited(0)
        assert poll.snapshot is not None and '"reason": "requested"' in poll.snapshot
        deadline = time.monotonic() + 30
        while (state := slurm_state(slurm_cluster, job_id(run))) in ("RUNNING", "COMPLETING"):
            assert time.monotonic() < deadline, "Slurm never saw the job end"
            time.sleep(0.1)
        assert state == "COMPLETED", "the job ran into its time limit"

    @pytest.mark.parametrize("table_more", [{"venv": None, "python": "/no/such/python"}])
    def test_a_batch_script_that_cannot_start_the_runner_is_its_exit_code(
        self, table: dict, table_more: dict, request: pytest.FixtureRequest
    ) -> None:
        table.update(table_more)
        driver = request.getfixturevalue("driver")
        run = driver.launch(secrets={SECRET_NAME: "hf_" + tokens.token_hex(8)})
        poll, _ = driver.follow(run)
        assert poll.status == JobStatus.exited(127)
        assert b"/no/such/python" in driver.whole_log(run)
        assert not (Path(run.remote_dir) / ".secrets.json").exists()

    def test_a_job_slurm_does_not_know_without_an_exit_code_is_lost_with_a_warning(
        self, driver: Driver
    ) -> None:
        run = driver.new_run()
        handle = JobHandle().with_data(
            overbrainer_slurm.SlurmJob(job_id="999999", directory=run.remote_dir)
        )
        warnings: list[str] = []
        sink = logger.add(lambda message: warnings.append(str(message)), level="WARNING")
        try:
            assert driver.poll(run.evolve(job=handle)).status == LOST
            assert driver.poll(run.evolve(job=handle)).status == LOST
        finally:
            logger.remove(sink)
        assert len(warnings) == 1, "warned once a run"
        assert (
            "target `contract`: Slurm ended job 999999 before its runner finished: "
            "forgotten by the controller" in warnings[0]
        )

    def test_a_controller_out_of_reach_is_a_transient_error_naming_scontrol(
        self,
        driver: Driver,
        slurm_cluster: LocalSlurm,  # noqa: F811
        tmp_path: Path,
    ) -> None:
        run = driver.launch(knobs={"FAKE_AXOLOTL_HANG": "1"})
        driver.training(run)
        conf = slurm_cluster.conf.read_text()
        port = next(line for line in conf.splitlines() if line.startswith("SlurmctldPort="))
        elsewhere = tmp_path / "slurm.conf"
        # Nothing listens there; the client gives up after its connect retries (about 2 s).
        elsewhere.write_text(conf.replace(port, "SlurmctldPort=9\nTCPTimeout=1\nMessageTimeout=1"))
        reachable = driver.executor.slurm.commands
        driver.executor.slurm.commands = LocalCommands({**os.environ, "SLURM_CONF": str(elsewhere)})
        try:
            with pytest.raises(
                TransientError,
                match=r"^target `contract`: scontrol on this machine: .*Unable to contact slurm",
            ):
                driver.poll(run)
        finally:
            driver.executor.slurm.commands = reachable
        assert driver.cancel(run).state is JobState.CANCELLED


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"
