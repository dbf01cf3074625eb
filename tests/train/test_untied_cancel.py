"""Issue 26: cancel never signals a process group its run record cannot tie to the job."""

from __future__ import annotations

import json
import subprocess

from tests.train.conftest import group_alive


def test_a_record_without_a_job_token_is_never_signalled(trainer, run_cli, tmp_path):
    # The reference tool's records, older ones and edited ones carry no token: the pid they
    # name may be any process group by now (here an unrelated `sleep` of its own group).
    process = trainer.spawn("train", env={"FAKE_AXOLOTL_HANG": "1"})
    run = trainer.wait_running()
    process.kill()
    process.wait()
    unrelated = subprocess.Popen(["sleep", "300"], start_new_session=True, cwd=tmp_path)
    try:
        path = trainer.dir / "runs" / run["id"] / "run.json"
        for pid in (unrelated.pid, run["job"]["pid"]):
            record = json.loads(path.read_text())
            record["job"].pop("token", None)
            record["job"]["pid"] = pid
            path.write_text(json.dumps(record))
            (path.parent / "job.pid").write_text(f"{pid}\n")
            result = run_cli("train", "cancel", run["id"])
            assert result.exit_code == 1
            assert result.stderr == (
                f"error: cannot cancel the job of run {run['id']}: process group {pid} cannot "
                "be tied to this job: its run record has no job token (written by another "
                "tool or an older version); nothing was signalled. If it is the job, stop it "
                f"by hand: kill -TERM -{pid}\n"
            )
            assert group_alive(pid)
            assert not (path.parent / "cancelling").exists()
        assert unrelated.poll() is None
    finally:
        unrelated.kill()
        unrelated.wait()
