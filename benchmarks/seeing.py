"""What seeing costs: `runs show` start-up against `--help`, and the TUI's idle CPU while a
run is followed.

    uv run python benchmarks/seeing.py [-n 11] [--seconds 30]

1. `overbrainer --help`, `runs ls`, `runs show ID` and `runs show ID --plot` on a run of
   1,000 logged steps, each N times in a fresh process (interleaved, after a warm-up);
   medians and their ratio to `--help`. Also checked: `runs show` without `--plot`
   imports no matplotlib.
2. The TUI (headless, its own process, refreshing every 2 s) on the Training view of a run
   the fake trainer is writing a step to every 0.2 s, followed by `train attach` started
   from the TUI: the CPU share of the TUI's process over ``--seconds``, and of the attach
   process beside it.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import suppress
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._harness import in_turns, median_timing  # noqa: E402
from tests.helpers.run_dirs import write_examples  # noqa: E402
from tests.helpers.seeing_project import TRAINING  # noqa: E402
from tests.helpers.seeing_runs import write_metrics, write_run  # noqa: E402

RUN = "bench_20260922-143005"
CLI = [sys.executable, "-c", "from overbrainer.cli import main; main()"]


def startup(root: Path, repeat: int) -> None:
    (root / "overbrainer.toml").write_text('[project]\nname = "bench"\n')
    directory = write_run(root, RUN)
    write_metrics(directory, range(1, 1001), max_steps=1000, evals=tuple(range(0, 1001, 50)),
                  loss=lambda step: 5.0 / (1 + step / 100))
    commands = {
        "--help": [*CLI, "--help"],
        "runs ls": [*CLI, "-C", str(root), "runs", "ls"],
        "runs show": [*CLI, "-C", str(root), "runs", "show", RUN],
        "runs show --plot": [*CLI, "-C", str(root), "runs", "show", RUN, "--plot",
                             str(root / "x.png")],
    }
    timings = in_turns(commands, repeat)
    times = {name: median_timing(values).wall for name, values in timings.items()}
    base = times["--help"]
    for name, median in times.items():
        print(f"{name:<18} median {median * 1000:7.1f} ms  ratio to --help {median / base:5.2f}")
    probe = (
        "import sys; from overbrainer.cli import cli\n"
        f"try: cli(['-C', {str(root)!r}, 'runs', 'show', {RUN!r}])\n"
        "except SystemExit: pass\n"
        "print('matplotlib' in sys.modules, file=sys.stderr)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=False)
    print(f"runs show imports matplotlib: {done.stderr.strip().splitlines()[-1]}")


TUI = """
import asyncio, sys, time
from pathlib import Path
from overbrainer.tui.app import OverbrainerApp

async def main(project, seconds):
    app = OverbrainerApp(Path(project), refresh_s=2.0)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("4")
        await pilot.pause(1)
        await pilot.press("a")
        print("ready", flush=True)
        await pilot.pause(seconds + 5)
        app.runner.stop_all()

asyncio.run(main(sys.argv[1], float(sys.argv[2])))
"""


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def tui_idle(root: Path, seconds: float) -> None:
    from overbrainer.testing.fake_axolotl import make_fake_venv

    project = root / "tui"
    project.mkdir()
    venv = make_fake_venv(root / "venv")
    (project / "overbrainer.toml").write_text(
        '[project]\nname = "bench"\n\n[providers.main]\nprotocol = "openai"\n\n'
        '[roles.generator]\nprovider = "main"\nmodel = "g"\n\n[roles.parent]\n'
        'provider = "main"\nmodel = "p"\n' + TRAINING.format(venv=venv)
    )
    write_examples(project / "data" / "train.jsonl", range(10))
    write_examples(project / "data" / "eval.jsonl", range(10, 12))
    env = {**os.environ, "FAKE_AXOLOTL_STEP_SECONDS": "0.2", "FAKE_AXOLOTL_STEPS": "100000"}
    train = subprocess.Popen([*CLI, "-C", str(project), "train"], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    tui = None
    try:
        deadline = time.monotonic() + 60
        while not list(project.glob("runs/*/metrics.jsonl")):
            assert time.monotonic() < deadline, "no training"
            assert train.poll() is None, "no training"
            time.sleep(0.2)
        # Let attach follow it: the training process lets the run go on its own.
        train.send_signal(signal.SIGINT)
        train.wait(timeout=30)
        tui = subprocess.Popen([sys.executable, "-c", TUI, str(project), str(seconds)],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert tui.stdout is not None
        assert tui.stdout.readline().strip() == "ready"
        time.sleep(2)
        attach = children(tui.pid)
        start_tui = cpu_seconds(tui.pid)
        start_attach = sum(cpu_seconds(pid) for pid in attach)
        start = time.monotonic()
        time.sleep(seconds)
        elapsed = time.monotonic() - start
        tui_share = (cpu_seconds(tui.pid) - start_tui) / elapsed
        attach_share = (sum(cpu_seconds(pid) for pid in attach) - start_attach) / elapsed
        metrics = next(project.glob("runs/*/metrics.jsonl")).read_text().count('"log"')
        print(f"TUI CPU while following a run: {tui_share * 100:.2f} % of one core "
              f"(goal < 2 %); its train attach process: {attach_share * 100:.2f} %; "
              f"{metrics} steps logged so far")
    finally:
        for process in (tui, train):
            if process is not None:
                with suppress(ProcessLookupError):
                    process.kill()
                process.wait()
        for pid_file in project.glob("runs/*/job.pid"):
            with suppress(ProcessLookupError, ValueError):
                os.killpg(int(pid_file.read_text()), signal.SIGKILL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=11)
    parser.add_argument("--seconds", type=float, default=30.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        startup(Path(tmp), args.n)
        tui_idle(Path(tmp), args.seconds)


if __name__ == "__main__":
    main()
