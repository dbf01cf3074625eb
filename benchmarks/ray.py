"""The ray target against the local target: the same tiny job, started and ended.

A 20-step run of the fake trainer, driven by the real CLI, on a local Ray cluster (a head
and one worker node on 127.0.0.1, started here and stopped at the end) and on the local
target. Printed, medians of ``--repeat`` runs each:

- ``train`` -> first metric line: from starting ``overbrainer train`` to the ``time`` of the
  job's first ``log`` line (the trainer's first step), and its ratio ray / local;
- job exit -> ``succeeded``: from the runner writing ``exit_code`` to the CLI printing its
  final line (the run recorded ``succeeded``, its results home), and its ratio.

Run it with the Python of the Ray package's venv (``.ci/run`` makes it)::

    ~/.cache/overbrainer/ray-2.60.0/bin/python benchmarks/ray.py [--repeat 3] [--steps 20]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._harness import medians  # noqa: E402
from benchmarks.train_latency import timed_train  # noqa: E402
from tests.helpers.run_dirs import write_examples  # noqa: E402

from overbrainer.testing.fake_axolotl import make_fake_venv  # noqa: E402
from overbrainer_ray.localcluster import LocalCluster  # noqa: E402

CONFIG = """\
[project]
name = "ray bench"

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
kind = "ray"
address = "{address}"
storage = "{storage}"
venv = "{venv}"
device = "cpu"
local_paths = true

[targets.cluster.runtime_env.env_vars]
FAKE_AXOLOTL_STEPS = "{steps}"
FAKE_AXOLOTL_STEP_SECONDS = "{step_seconds}"
"""



def one_run(work: Path, target: str, address: str, steps: int, step_seconds: float) -> dict:
    project = work / f"{target}-{time.monotonic_ns()}"
    project.mkdir()
    venv = work / "venv"
    if not venv.exists():
        make_fake_venv(venv)
    storage = work / "storage"
    (project / "overbrainer.toml").write_text(
        CONFIG.format(
            target=target,
            venv=venv,
            address=address,
            storage=storage,
            steps=steps,
            step_seconds=step_seconds,
        )
    )
    write_examples(project / "data" / "train.jsonl", range(20))
    env = {
        **os.environ,
        "OVERBRAINER_LOAD_PLUGINS": "local,ray",
        "FAKE_AXOLOTL_STEPS": str(steps),
        "FAKE_AXOLOTL_STEP_SECONDS": str(step_seconds),
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
        cluster = LocalCluster(workers=1, cpus=1).start()
        start_s = time.monotonic() - started
        try:
            results = {}
            for target in ("local", "cluster"):
                results[target] = medians(
                    [
                        one_run(Path(work), target, cluster.address, args.steps, args.step_seconds)
                        for _ in range(args.repeat)
                    ]
                )
        finally:
            cluster.stop()
            cluster.remove()
    local, ray = results["local"], results["cluster"]
    print(
        f"{args.steps}-step fake run, {args.repeat} runs each, medians; poll interval "
        f"{POLL_S:g} s; local Ray cluster (head + 1 worker) started in {start_s:.1f} s"
    )
    for key, title in (
        ("first_metric", "train -> first metric line"),
        ("exit_to_succeeded", "job exit -> succeeded"),
    ):
        print(
            f"{title}: ray {ray[key]:.2f} s, local {local[key]:.2f} s "
            f"(ray / local = {ray[key] / local[key]:.2f})"
        )


if __name__ == "__main__":
    main()
