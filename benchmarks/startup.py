"""Start-up cost of the CLI: `overbrainer --help` and `overbrainer runs ls` on 1,000 runs.

Each command runs N times in a fresh process (interleaved, after one unmeasured warm-up run
that also writes the bytecode caches); the median wall time and CPU time (user + system) are
compared with `python -c pass` and `python -c "import click"` measured in the same session,
and the issue's two rows are printed as ratios: `--help` against a bare click group's
`--help` (goal 1.15 or less) and `runs ls` against `--help` (goal 3 or less), in CPU.
The runs' files are dated to their end, and the warm-up run fills the listing cache
(``runs/.listing.json``); `runs ls` with that cache removed before each run is measured too
(the first listing after many runs changed).

    uv run python benchmarks/startup.py [-n 21] [--runs 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._harness import in_turns, median_timing

STATES = ("succeeded", "failed", "cancelled", "stopped", "running")

# The floor for `--help`: a bare click group with as many commands, printing its help.
CLICK_HELP = """
import click

@click.group()
@click.option("-C", "--project-dir", type=click.Path(file_okay=False), default=".")
@click.version_option("0", "-V", "--version")
def cli(project_dir):
    "Distill a large parent LLM into a small open-weights child model."

for name in ("config", "init", "plugins", "runs"):
    cli.command(name, help=f"The {name} command.")(lambda: None)

cli(["--help"], prog_name="overbrainer")
"""


def make_project(root: Path, runs: int) -> None:
    """A project with ``runs`` run records, written directly as run.json files."""
    (root / "overbrainer.toml").write_text('[project]\nname = "bench"\n', encoding="utf-8")
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for index in range(runs):
        created = start + timedelta(minutes=7 * index)
        run_id = f"bench_{created:%Y%m%d-%H%M%S}"
        directory = root / "runs" / run_id
        directory.mkdir(parents=True)
        state = STATES[index % len(STATES)]
        record = {
            "id": run_id,
            "target": "gpu" if index % 3 else "pod",
            "created": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "remote_dir": f"/home/me/overbrainer/runs/{run_id}",
            "job": {
                "dir": f"/home/me/overbrainer/runs/{run_id}",
                "pid": 1000 + index,
                "container": None,
            },
            "state": state,
            "message": None,
            "snapshots": True,
        }
        if state == "stopped":
            record["snapshot"] = {
                "checkpoint": "output/checkpoint-40",
                "step": 40,
                "reason": "requested",
            }
        (directory / "run.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        # What `runs ls` reads beyond the record: the tail of a 200-step metrics file.
        at = created.timestamp()
        lines = [json.dumps({"event": "begin", "time": at, "max_steps": 200})]
        lines += [
            json.dumps({"event": "log", "time": at + step, "step": step, "epoch": step / 100,
                        "max_steps": 200, "loss": 2.0 - step / 400, "learning_rate": 2e-4,
                        "grad_norm": 0.8})
            for step in range(1, 201)
        ]
        lines.append(json.dumps({"event": "log", "time": at + 200, "step": 200,
                                 "eval_loss": 1.6}))
        (directory / "metrics.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        # Dated as a real run's files are: last changed when it ended (the listing keeps
        # what it read of a run whose files have been still for a while).
        ended = (at + 200, at + 200)
        for path in (directory / "run.json", directory / "metrics.jsonl", directory):
            os.utime(path, ended)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=21, help="measured runs of each command")
    parser.add_argument("--runs", type=int, default=1000, help="run records in the project")
    args = parser.parse_args()

    script = Path(sys.executable).parent / "overbrainer"
    if not script.is_file():
        sys.exit(f"{script} is missing: run `uv sync` first")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OVERBRAINER_")}
    # Installed packages normally have their bytecode compiled: measure that case.
    env.pop("PYTHONDONTWRITEBYTECODE", None)

    with tempfile.TemporaryDirectory(prefix="overbrainer-bench-") as temp:
        project = Path(temp)
        make_project(project, args.runs)
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "python -c 'import click'": [sys.executable, "-c", "import click"],
            "bare click group --help": [sys.executable, "-c", CLICK_HELP],
            "overbrainer --help": [str(script), "--help"],
            f"overbrainer runs ls ({args.runs} runs)": [str(script), "runs", "ls"],
            "runs ls, no listing cache": [str(script), "runs", "ls"],
        }
        cache = project / "runs" / ".listing.json"
        listed = subprocess.run(
            commands[f"overbrainer runs ls ({args.runs} runs)"],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        assert len(listed.stdout.splitlines()) == args.runs + 1, listed.stderr  # and the header

        def before(name: str) -> None:
            if name == "runs ls, no listing cache":
                cache.unlink()

        timings = in_turns(commands, args.n, cwd=project, env=env, before=before)

    found = {name: median_timing(values) for name, values in timings.items()}
    medians = {name: timing.wall for name, timing in found.items()}
    cpu = {name: timing.cpu for name, timing in found.items()}
    base = medians["python -c pass"]
    click = medians["python -c 'import click'"]
    print(f"median of {args.n} runs each, {sys.version.split()[0]} on {os.cpu_count()} CPUs")
    print(f"{'command':<36} {'ms':>7} {'cpu ms':>7} {'x pass':>7} {'x click':>8}")
    for name, median in medians.items():
        print(
            f"{name:<36} {median * 1000:7.1f} {cpu[name] * 1000:7.1f} {median / base:7.2f} "
            f"{median / click:8.2f}"
        )
    ls = f"overbrainer runs ls ({args.runs} runs)"
    print(
        f"--help CPU / bare click group --help: "
        f"{cpu['overbrainer --help'] / cpu['bare click group --help']:.2f} (goal <= 1.15)"
    )
    print(
        f"runs ls CPU / --help: {cpu[ls] / cpu['overbrainer --help']:.2f} (goal <= 3); "
        f"with no listing cache {cpu['runs ls, no listing cache'] / cpu['overbrainer --help']:.2f}"
    )


if __name__ == "__main__":
    main()
