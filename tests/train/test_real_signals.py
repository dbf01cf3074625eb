"""The real Axolotl on the CPU, signalled as schedulers signal a job (issue 23).

Slurm at a time limit and on ``scancel``, systemd and Ray's ``stop_job`` send SIGTERM to
every process of the job, torch's DataLoader workers included: that must end in a snapshot
and a ``stopped`` run, as a TERM to the runner alone does.

Run with ``OVERBRAINER_AXOLOTL_VENV=<venv holding bin/axolotl> uv run pytest -m real``.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from tests.helpers.real import REAL_TIMEOUT, WORKERS
from tests.helpers.trainer import log_steps

pytestmark = pytest.mark.real

def _workers(pgid: int) -> list[int]:
    """The pids of the DataLoader workers in process group ``pgid`` (torch names them)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        name, fields = text[text.find("(") + 1 : text.rfind(")")], text.rsplit(")", 1)[1].split()
        if int(fields[2]) == pgid and fields[0] != "Z" and name == "pt_data_worker":
            found.append(int(stat.parent.name))
    return found


def test_sigterm_to_every_process_of_the_job_ends_in_a_snapshot(real):
    real.configure_real(epochs=3, extra=WORKERS)
    process = real.spawn("train")
    real.wait_for(lambda: real.runs() and real.run()["state"] == "running", REAL_TIMEOUT, "a run")
    run = real.run()
    pgid = run["job"]["pid"]
    real.wait_for(lambda: len(log_steps(real, run["id"])) >= 2, REAL_TIMEOUT, "two steps")
    workers = _workers(pgid)
    assert workers, "Axolotl started no DataLoader worker: the test proves nothing"
    os.killpg(pgid, signal.SIGTERM)  # as Slurm, systemd and Ray's stop_job do
    out, err = process.communicate(timeout=REAL_TIMEOUT)
    log = (real.dir / "runs" / run["id"] / "job.log").read_text(errors="replace")
    assert process.returncode == 0, err[-3000:] + log[-3000:]
    record = real.run()
    assert record["state"] == "stopped", record
    step = record["snapshot"]["step"]
    assert record["snapshot"]["reason"] == "requested"
    assert (real.dir / "runs" / run["id"] / "output" / f"checkpoint-{step}").is_dir()
    assert "is killed by signal" not in log
    assert f"stopped at step {step} (requested)" in out
