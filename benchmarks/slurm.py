"""The slurm target against the local target: the same tiny job, started and ended.

A 20-step run of the fake trainer, driven by the real CLI, on a one-node Slurm (munged,
slurmctld and slurmd on 127.0.0.1, started here and stopped at the end by pid) and on the
local target, alternately. Printed, medians of ``--repeat`` runs each:

- ``train`` -> first metric line: from starting ``overbrainer train`` to the ``time`` of the
  job's first ``log`` line (the trainer's first step), and its ratio slurm / local;
- job exit -> ``succeeded``: from the runner writing ``exit_code`` to the CLI printing its
  final line (the run recorded ``succeeded``, its results home), and its ratio.

Needs Slurm's daemons and commands (``.ci/prereqs`` installs them)::

    uv run python benchmarks/slurm.py [--repeat 3] [--steps 20]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "contrib" / "overbrainer-slurm")]

from benchmarks._harness import medians  # noqa: E402
from benchmarks.train_latency import timed_train  # noqa: E402
from tests.helpers.run_dirs import write_examples  # noqa: E402

from overbrainer.testing.fake_axolotl import make_fake_venv  # noqa: E402
from overbrainer_slurm.localcluster import LocalSlurm  # noqa: E402

CONFIG = """\
[project]
name = "slurm bench"

[providers.p]
protocol = "openai"

[roles.generator]
provider = "p"
model = "g"

[roles.parent]
provider = "p"
model = "m"

[training]
target = "{target}"
base_model = "Qwen/Qwen3-0.6B"
adapter = "lora"

[targets.local]
kind = "local"
venv = "{venv}"
pass_env = ["FAKE_AXOLOTL_*"]

[targets.cluster]
kind = "slurm"
spool = "{spool}"
venv = "{venv}"
device = "cpu"
local_paths = true
pass_env = ["FAKE_AXOLOTL_*"]
"""



def installed_site(work: Path) -> str:
    """A ``.dist-info`` declaring the slurm package's entry point, as an install makes."""
    info = work / "site" / "overbrainer_slurm-0.1.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    metadata = "Metadata-Version: 2.1\nName: overbrainer-slurm\nVersion: 0.1.0\n"
    (info / "METADATA").write_text(metadata)
    (info / "entry_points.txt").write_text("[overbrainer]\nslurm = overbrainer_slurm:plugin\n")
    return os.pathsep.join([str(ROOT / "contrib" / "overbrainer-slurm"), str(work / "site")])


def one_run(work: Path, target: str, cluster: LocalSlurm, steps: int, step_s: float) -> dict:
    project = work / f"{target}-{time.monotonic_ns()}"
    project.mkdir()
    venv = work / "venv"
    if not venv.exists():
        make_fake_venv(venv)
    (project / "overbrainer.toml").write_text(
        CONFIG.format(target=target, venv=venv, spool=work / "spool")
    )
    write_examples(project / "data" / "train.jsonl", range(20))
    env = {
        **os.environ,
        **cluster.env,
        "PYTHONPATH": installed_site(work),
        "OVERBRAINER_LOAD_PLUGINS": "local,slurm",
        "FAKE_AXOLOTL_STEPS": str(steps),
        "FAKE_AXOLOTL_STEP_SECONDS": str(step_s),
    }
    return timed_train(project, target, env)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--step-seconds", type=float, default=0.05)
    args = parser.parse_args()
    from overbrainer.runs.follow import POLL_S

    with tempfile.TemporaryDirectory() as work:
        started = time.monotonic()
        cluster = LocalSlurm(root=Path(work) / "slurm").start()
        start_s = time.monotonic() - started
        runs: dict[str, list[dict]] = {"local": [], "cluster": []}
        try:
            for _ in range(args.repeat):  # alternately: both see the same machine load
                for target, done in runs.items():
                    done.append(one_run(Path(work), target, cluster, args.steps, args.step_seconds))
        finally:
            cluster.stop()
    local, slurm = medians(runs["local"]), medians(runs["cluster"])
    print(
        f"{args.steps}-step fake run, {args.repeat} runs each, medians; poll interval "
        f"{POLL_S:g} s; one-node Slurm started in {start_s:.1f} s"
    )
    for key, title in (
        ("first_metric", "train -> first metric line"),
        ("exit_to_succeeded", "job exit -> succeeded"),
    ):
        print(
            f"{title}: slurm {slurm[key]:.2f} s, local {local[key]:.2f} s "
            f"(slurm / local = {slurm[key] / local[key]:.2f})"
        )


if __name__ == "__main__":
    main()
