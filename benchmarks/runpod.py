"""The provisioning overhead of the runpod target, on the fake Runpod of the tests.

    uv run python benchmarks/runpod.py [--runs 3]

For each run: the time from the claim (the pod's create) to the first metric line of the
job, and the number of calls to the Runpod API over the run's whole life (create, readiness,
the end, the deletion's confirmation). Baseline, in the same run: the ``ssh`` target's time
from the claim to the first metric line on the same kind of loopback sshd (its keys made
once, its connection opened by the claim). Printed: both medians and their ratio.
"""

from __future__ import annotations

import argparse
import collections
import getpass
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# This file is named like the SDK: its directory must not shadow the `runpod` package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks"]
sys.path.insert(0, str(ROOT))

from benchmarks._harness import median  # noqa: E402
from tests.helpers.fake_runpod import FakeRunpod  # noqa: E402
from tests.helpers.sshd import Sshd, make_keys, write_client_config  # noqa: E402

from overbrainer.job.record import RunRecord  # noqa: E402
from overbrainer.job.spec import JobSpec  # noqa: E402
from overbrainer.project import Project  # noqa: E402
from overbrainer.testing.fake_axolotl import make_fake_venv  # noqa: E402
from overbrainer.testing.jobs import contract_settings, manager_with, prepare_job  # noqa: E402

KEY = "rpa_BENCHMARKKEY"


def first_metric(
    kind: str, plugin: object, table: dict, root: Path, index: int
) -> tuple[float, object]:
    plugins = manager_with(plugin)
    model = plugins.kinds[kind].model_validate(table)
    project_dir = root / f"{kind}-{index}"
    (project_dir / "runs").mkdir(parents=True)
    project = Project(project_dir, contract_settings("t", model), dict(os.environ))
    hook = plugins.hook
    executor = hook.create_executor(name="t", target=model, project=project, run=None)
    run_id = f"bench_20260101-{index:06d}"
    started = time.monotonic()
    hook.prepare_target(executor=executor)  # the runpod target's orphan check
    remote = hook.claim_run_dir(executor=executor, run_id=run_id)
    run = RunRecord(id=run_id, target="t", created="2026-01-01T00:00:00Z", remote_dir=remote)
    local = project_dir / "runs" / run_id
    prepare_job(
        local, cpu=True, env={"FAKE_AXOLOTL_STEP_SECONDS": "0.02", "FAKE_AXOLOTL_STEPS": "3"}
    )
    handle = hook.launch_job(
        executor=executor, run=run, job=JobSpec(run_id=run_id, local_dir=local)
    )
    run = run.evolve(job=handle, state="running", snapshots=True)
    while not any('"log"' in line for line in hook.poll_job(executor=executor, run=run).lines):
        time.sleep(0.02)
    elapsed = time.monotonic() - started
    while hook.poll_job(executor=executor, run=run).status.state.value == "running":
        time.sleep(0.05)
    hook.release_executor(executor=executor, run=run.evolve(state="succeeded"), outcome="succeeded")
    return elapsed, executor


@contextmanager
def loopback_pods(root: Path) -> Iterator[tuple[str, Path, FakeRunpod]]:
    """A real sshd and the fake Runpod API on loopback, this process's HOME and settings
    pointed at them: (the ssh target's alias, a fake trainer's venv, the fake API)."""
    home = root / "home"
    home.mkdir()
    os.environ["HOME"] = str(home)
    os.environ.pop("SSH_AUTH_SOCK", None)
    venv = make_fake_venv(root / "venv")
    (root / "keys").mkdir()
    (root / "sshd").mkdir()
    sshd = Sshd(root / "sshd", make_keys(root / "keys"))
    sshd.start()
    alias = write_client_config(home, sshd)
    fake = FakeRunpod(root / "fake", KEY, pod_env={}).start()
    os.environ.update(
        {
            "OVERBRAINER_RUNPOD__API_KEY": KEY,
            "OVERBRAINER_RUNPOD__BASE_URL": fake.url,
            "RUNPOD_OVERBRAINER_TIMING": "minute=0.5,tick=0.2,poll=0.05,confirm=0.02",
            "RUNPOD_OVERBRAINER_SSH_USER": getpass.getuser(),
        }
    )
    try:
        yield alias, venv, fake
    finally:
        fake.stop()
        sshd.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    import overbrainer_runpod
    import overbrainer_ssh

    with tempfile.TemporaryDirectory() as tmp, loopback_pods(Path(tmp)) as (alias, venv, fake):
        root = Path(tmp)
        ssh_times, pod_times, calls = [], [], []
        kinds: collections.Counter[str] = collections.Counter()
        for index in range(args.runs):
            ssh_table = {"kind": "ssh", "host": alias, "venv": str(venv)}
            ssh_times.append(first_metric("ssh", overbrainer_ssh.plugin, ssh_table, root, index)[0])
            pod_table = {"kind": "runpod", "gpu_types": ["NVIDIA A40"], "max_hours": 1,
                         "venv": str(venv)}  # fmt: skip
            before = len(fake.calls)
            elapsed, _ = first_metric("runpod", overbrainer_runpod.plugin, pod_table, root, index)
            pod_times.append(elapsed)
            calls.append(len(fake.calls) - before)
            kinds = collections.Counter(fake.calls[before:])
    ssh, pod = median(ssh_times), median(pod_times)
    print(f"ssh target, claim -> first metric line:     {ssh:.2f} s (median of {args.runs})")
    print(f"runpod target, create -> first metric line: {pod:.2f} s (median of {args.runs})")
    print(f"ratio runpod / ssh: {pod / ssh:.1f}x")
    print(f"Runpod API calls per run: {calls} (median {median(calls):g})")
    print("the last run's calls: " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())))


if __name__ == "__main__":
    main()
