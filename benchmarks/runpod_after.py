"""What a pod of its own costs an ``export`` or ``compare`` of a Runpod run, on the fake
Runpod of the tests.

    uv run python benchmarks/runpod_after.py [--commands 3]

For each command: the time from ``open_target`` (the pod's create) to a shell that runs a
command there, plus the time of its release (logs home, deletion confirmed), and the calls
to the Runpod API it made. Baseline, in the same run: the same on the ``ssh`` target (a
loopback sshd, the same kind as a fake pod's), whose machine is already there. Printed: both
medians and their ratio, and the API calls. The fake pod starts in well under a second; a
real one takes about a minute to boot, which this does not measure.
"""

from __future__ import annotations

import argparse
import collections
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# This file's directory holds runpod.py: it must not shadow the `runpod` package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks"]
sys.path.insert(0, str(ROOT))

from benchmarks._harness import median  # noqa: E402
from benchmarks.runpod import loopback_pods  # noqa: E402

from overbrainer.after.target_run import open_target  # noqa: E402
from overbrainer.job.record import RunRecord  # noqa: E402
from overbrainer.project import Project  # noqa: E402
from overbrainer.testing.jobs import contract_settings, manager_with  # noqa: E402

KEY = "rpa_BENCHMARKKEY"


def one_command(kind: str, plugin: object, table: dict, root: Path, index: int) -> float:
    """Seconds from ``open_target`` to the end of its release, one command run there."""
    plugins = manager_with(plugin)
    model = plugins.kinds[kind].model_validate(table)
    project_dir = root / f"{kind}-{index}"
    run_id = f"bench_20260101-{index:06d}"
    (project_dir / "runs" / run_id).mkdir(parents=True)
    project = Project(project_dir, contract_settings("t", model), dict(os.environ))
    remote = f"{root}/ssh-work/{run_id}" if kind == "ssh" else f"/workspace/overbrainer/{run_id}"
    run = RunRecord(
        id=run_id, target="t", created="2026-01-01T00:00:00Z", remote_dir=remote, state="succeeded"
    )
    started = time.monotonic()
    with open_target(project, plugins.hook, run, purpose="bench") as target:
        target.shell.host.check(f"mkdir -p {target.run.remote_dir} && echo ok\n")
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--commands", type=int, default=3)
    args = parser.parse_args()
    from loguru import logger

    import overbrainer_runpod
    import overbrainer_ssh

    logger.remove()
    logging.getLogger("paramiko").setLevel(logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp, loopback_pods(Path(tmp)) as (alias, venv, fake):
        root = Path(tmp)
        ssh_times, pod_times, calls = [], [], []
        kinds: collections.Counter[str] = collections.Counter()
        for index in range(args.commands):
            ssh_table = {"kind": "ssh", "host": alias, "venv": str(venv)}
            ssh_times.append(one_command("ssh", overbrainer_ssh.plugin, ssh_table, root, index))
            pod_table = {"kind": "runpod", "gpu_types": ["NVIDIA A40"], "max_hours": 1,
                         "venv": str(venv), "boot_grace_minutes": 10}  # fmt: skip
            before = len(fake.calls)
            elapsed = one_command("runpod", overbrainer_runpod.plugin, pod_table, root, index)
            pod_times.append(elapsed)
            calls.append(len(fake.calls) - before)
            kinds = collections.Counter(fake.calls[before:])
        left = len(fake.alive())
    ssh, pod = median(ssh_times), median(pod_times)
    runs = len(ssh_times)
    print(f"ssh target, open -> command -> release:        {ssh:.2f} s (median of {runs})")
    print(f"runpod, new pod: create -> command -> deleted: {pod:.2f} s (median of {runs})")
    print(f"ratio runpod / ssh: {pod / ssh:.1f}x")
    print(f"Runpod API calls per command: {calls} (median {median(calls):g})")
    print("the last command's calls: " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())))
    print(f"pods left: {left}")


if __name__ == "__main__":
    main()
