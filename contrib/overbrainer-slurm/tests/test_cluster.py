"""The test Slurm itself: Slurm's own commands submit, list, show and cancel its jobs."""

from __future__ import annotations

import time

from overbrainer_slurm.localcluster import LocalSlurm
from slurm_fixtures import slurm_cluster  # noqa: F401 - the fixture


def _state(cluster: LocalSlurm, job: str) -> str:
    line = cluster.command("scontrol", "show", "job", "-o", job)
    return line.split("JobState=", 1)[1].split()[0]


def _wait_state(cluster: LocalSlurm, job: str, states: set[str]) -> str:
    deadline = time.monotonic() + 30
    while (state := _state(cluster, job)) not in states:
        assert time.monotonic() < deadline, f"job {job} stayed {state}"
        time.sleep(0.1)
    return state


def test_a_batch_job_runs_and_a_held_one_is_cancelled_before_it_starts(
    slurm_cluster: LocalSlurm,  # noqa: F811
    tmp_path,
) -> None:
    script = tmp_path / "job.sh"
    script.write_text(f"#!/bin/sh\necho ran $SLURM_JOB_ID > {tmp_path}/out\n")
    out = f"--output={tmp_path}/slurm-%j.out"  # not the submitting directory (the checkout)
    job = slurm_cluster.command(
        "sbatch", "--parsable", "--export=NONE", out, str(script)
    ).strip()
    assert _wait_state(slurm_cluster, job, {"COMPLETED", "FAILED"}) == "COMPLETED"
    assert (tmp_path / "out").read_text() == f"ran {job}\n"

    held = slurm_cluster.command("sbatch", "--parsable", "--hold", out, str(script)).strip()
    assert held in slurm_cluster.command("squeue", "-h", "-o", "%i").split()
    slurm_cluster.command("scancel", held)
    assert _wait_state(slurm_cluster, held, {"CANCELLED"}) == "CANCELLED"
