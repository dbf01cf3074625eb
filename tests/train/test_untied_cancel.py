"""Issues 26 and 23: cancel signals only a process group its run record ties to the job.

A record without a job token (the reference tool's, an older overbrainer's, an edited one)
ties a group by its directory: the group is the job's only if one of its processes runs in
the job's directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

from tests.helpers.trainer import group_alive


def _untie(trainer, run: dict, pid: int):
    """The run's record and job.pid naming ``pid``, with no job token."""
    path = trainer.dir / "runs" / run["id"] / "run.json"
    record = json.loads(path.read_text())
    record["job"].pop("token", None)
    record["job"]["pid"] = pid
    path.write_text(json.dumps(record))
    (path.parent / "job.pid").write_text(f"{pid}\n")
    return path


def test_without_a_token_an_unrelated_group_is_never_signalled(trainer, run_cli, tmp_path):
    process = trainer.spawn("train", env={"FAKE_AXOLOTL_HANG": "1"})
    run = trainer.wait_running()
    process.kill()
    process.wait()
    job = run["job"]["pid"]  # the job's group: the test ends it, as the edited record cannot
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    unrelated = subprocess.Popen(["sleep", "300"], start_new_session=True, cwd=elsewhere)
    try:
        path = _untie(trainer, run, unrelated.pid)
        result = run_cli("train", "cancel", run["id"])
        assert result.exit_code == 1
        assert result.stderr == (
            f"error: cannot cancel the job of run {run['id']}: process group {unrelated.pid} "
            "is not this job's: its run record has no job token and none of its processes "
            f"runs in the job's directory (they run in {os.path.realpath(elsewhere)}); nothing "
            "was signalled\n"
        )
        assert group_alive(unrelated.pid) and unrelated.poll() is None
        assert not (path.parent / "cancelling").exists()
    finally:
        unrelated.kill()
        unrelated.wait()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(job, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while group_alive(job) and time.monotonic() < deadline:
            time.sleep(0.05)
    assert not group_alive(job), f"the job's group {job} outlived the test"


def test_without_a_token_the_jobs_own_group_is_cancelled(trainer, run_cli):
    process = trainer.spawn("train", env={"FAKE_AXOLOTL_HANG": "1", "FAKE_AXOLOTL_CHILD": "1"})
    run = trainer.wait_running()
    process.kill()
    process.wait()
    pgid = run["job"]["pid"]
    _untie(trainer, run, pgid)
    result = run_cli("train", "cancel", run["id"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"train: run {run['id']} cancelled\n"
    assert trainer.run()["state"] == "cancelled"
    assert not group_alive(pgid)
    child = int((trainer.dir / "runs" / run["id"] / "fake_axolotl.child").read_text())
    try:
        state = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        state = "gone"
    assert state in ("gone", "Z"), f"the fake's child {child} outlived the cancel"
