"""The ray target against a real local Ray cluster: the executor contract, and secrets.

The cluster (a head and one worker node, bound to 127.0.0.1) is started once for the
session and stopped at its end, every process of it by pid. Needs Ray installed: run in
the Ray package's environment (``.ci/run`` makes it).
"""

from __future__ import annotations

import hashlib
import json
import secrets as tokens
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("ray.job_submission", reason="needs Ray: run in the Ray package's venv")

import overbrainer_ray
from overbrainer.plugin import JobStatus, RunRecord
from overbrainer.testing import ContractTarget, Driver, ExecutorContract, make_fake_venv
from overbrainer_ray.localcluster import LocalCluster

SECRET_NAME = "HF_TOKEN"


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[LocalCluster]:
    """A head and one worker node on 127.0.0.1, every process stopped by pid at the end."""
    cluster = LocalCluster(workers=1, cpus=1).start()
    try:
        yield cluster
    finally:
        cluster.stop()
        left = cluster.processes()
        cluster.remove()
        assert not left, f"Ray processes outlived the cluster: {sorted(left)}"


def ray_table(cluster: LocalCluster, tmp_path: Path, venv: Path, **more: object) -> dict:
    return {
        "kind": "ray",
        "address": cluster.address,
        "storage": str(tmp_path / "storage"),
        "venv": str(venv),
        "device": "cpu",
        "local_paths": True,
        **more,
    }


def stop_through_ray(address: str):
    """Ray's own stop (what `ray job stop` and the dashboard do): SIGTERM to the runner."""

    def stop(run: RunRecord) -> None:
        from ray.job_submission import JobSubmissionClient

        assert run.job is not None
        job = run.job.data_as(overbrainer_ray.RayJob)
        assert JobSubmissionClient(address).stop_job(job.submission_id)

    return stop


def dashboard_jobs(address: str) -> bytes:
    with urllib.request.urlopen(f"{address}/api/jobs/", timeout=10) as reply:
        return reply.read()


class TestRayExecutor(ExecutorContract):
    @pytest.fixture
    def contract_target(self, ray_cluster: LocalCluster, tmp_path: Path) -> ContractTarget:
        venv = make_fake_venv(tmp_path / "venv")  # its bin/ holds the fake axolotl
        return ContractTarget(
            plugin=overbrainer_ray.plugin,
            table=ray_table(ray_cluster, tmp_path, venv),
            job_dir=lambda run: Path(run.remote_dir),
            signal_runner=stop_through_ray(ray_cluster.address),
            # Ray's stop_job TERMs the entrypoint and every process under it.
            signal_job=stop_through_ray(ray_cluster.address),
        )

    def test_no_secret_where_ray_publishes_or_in_any_file_left(
        self, driver: Driver, ray_cluster: LocalCluster, tmp_path: Path
    ) -> None:
        secret = "hf_" + tokens.token_hex(16)
        run = driver.launch(
            knobs={"FAKE_AXOLOTL_STEPS": "3", "FAKE_AXOLOTL_SHOW_SECRET": SECRET_NAME},
            secrets={SECRET_NAME: secret},
        )
        poll, _ = driver.follow(run)
        assert poll.status == JobStatus.exited(0)
        driver.collect(run)
        digest = hashlib.sha256(secret.encode()).hexdigest()
        assert f"{SECRET_NAME} sha256 {digest}".encode() in driver.whole_log(run)
        jobs = dashboard_jobs(ray_cluster.address)
        job_id = run.job.data_as(overbrainer_ray.RayJob).submission_id  # type: ignore[union-attr]
        assert job_id.encode() in jobs  # the job is listed, with its entrypoint and env
        assert secret.encode() not in jobs
        assert b"run_job.py" in jobs
        places = [tmp_path, ray_cluster.root]
        for place in places:
            for path in place.rglob("*"):
                if path.is_file() and not path.is_symlink():
                    assert secret.encode() not in path.read_bytes(), f"the secret is in {path}"
        assert not (Path(run.remote_dir) / ".secrets.json").exists()

    def test_the_job_is_a_ray_job_with_its_resources_and_metadata(
        self, driver: Driver, ray_cluster: LocalCluster
    ) -> None:
        run = driver.launch(knobs={"FAKE_AXOLOTL_STEPS": "1"})
        driver.follow(run)
        job_id = run.job.data_as(overbrainer_ray.RayJob).submission_id  # type: ignore[union-attr]
        deadline = time.monotonic() + 30
        while True:  # the runner's exit_code comes a moment before Ray sees it exit
            listed = json.loads(dashboard_jobs(ray_cluster.address))
            job = next(job for job in listed if job["submission_id"] == job_id)
            if job["status"] != "RUNNING" or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert job["status"] == "SUCCEEDED" and job["driver_exit_code"] == 0
        assert job["metadata"]["overbrainer_run"] == run.id
        assert job["entrypoint"].endswith("/bin/python run_job.py")
        assert job["runtime_env"]["env_vars"] == {"RAY_JOB_STOP_WAIT_TIME_S": "1800"}
