"""The fake ``axolotl`` executable and its knobs, run as a job runs it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tests.helpers.run_dirs import job_environ, prepare_run_dir

from overbrainer.config.model import Training
from overbrainer.testing.fake_axolotl import CALLS_FILE, CHILD_FILE, make_fake_venv
from overbrainer.train.job_setup import job_stages

TRAINING = Training(target="box", base_model="/models/tiny", adapter="lora", merge=True)


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    return make_fake_venv(tmp_path / "venv")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "run"
    prepare_run_dir(root, TRAINING, cpu=True)
    return root


Start = Callable[..., subprocess.Popen[bytes]]


@pytest.fixture
def start(venv: Path, root: Path) -> Iterator[Start]:
    """Starts the fake in ``root`` in a process group of its own; killed at the end."""
    started: list[subprocess.Popen[bytes]] = []

    def launch(*args: str, **knobs: str) -> subprocess.Popen[bytes]:
        env = job_environ(root, TRAINING, FAKE_AXOLOTL_STEP_SECONDS="0.01", **knobs)
        process = subprocess.Popen(
            [str(venv / "bin" / "axolotl"), *args], cwd=root, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
        )
        started.append(process)
        return process

    yield launch
    for process in started:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        if process.stdout:
            process.stdout.close()


def train(start: Start, **knobs: str) -> subprocess.Popen[bytes]:
    return start("train", "axolotl.yaml", "--launcher", "python", **knobs)


def finish(process: subprocess.Popen[bytes]) -> int:
    process.wait(timeout=30)
    return process.returncode


def wait_for(condition: Callable[[], bool], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def events(root: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (root / "metrics.jsonl").read_text().splitlines()]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (reaped by nobody yet) counts as gone
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return True


def test_the_job_stages_run_through_the_fake_venv(venv, root):
    env = job_environ(root, TRAINING, FAKE_AXOLOTL_STEP_SECONDS="0")
    for stage in job_stages(TRAINING, cpu=True):
        program = venv / "bin" / stage.argv[0]
        result = subprocess.run(
            [str(program), *stage.argv[1:]], cwd=root, env=env, capture_output=True, check=False
        )
        assert result.returncode == 0, result.stdout + result.stderr
    calls = [json.loads(line) for line in (root / CALLS_FILE).read_text().splitlines()]
    assert calls == [list(stage.argv) for stage in job_stages(TRAINING, cpu=True)]
    kinds = [e["event"] for e in events(root)]
    assert kinds[0] == "begin"
    assert kinds[-1] == "end"
    assert "eval" in kinds
    assert (root / "output" / "adapter_model.safetensors").is_file()
    assert (root / "output" / "adapter_config.json").is_file()
    assert (root / "output" / "checkpoint-6" / "trainer_state.json").is_file()
    assert (root / "output" / "merged" / "model.safetensors").is_file()


def test_merge_lora_refuses_a_launcher_as_axolotl_does(start, root):
    process = start("merge-lora", "axolotl.yaml", "--launcher", "python")
    assert finish(process) == 2
    assert b"No such option: --launcher" in process.stdout.read()


def test_a_missing_config_is_refused(start):
    assert finish(start("train", "missing.yaml")) == 2


def test_the_steps_and_the_exit_code_are_knobs(start, root):
    assert finish(train(start, FAKE_AXOLOTL_STEPS="3", FAKE_AXOLOTL_EXIT="3")) == 3
    steps = [e["step"] for e in events(root) if e["event"] == "log" and "loss" in e]
    assert steps == [1, 2, 3]


def test_without_the_plugin_there_are_no_metrics(start, root):
    assert finish(train(start, FAKE_AXOLOTL_NO_PLUGIN="1")) == 0
    assert not (root / "metrics.jsonl").exists()
    assert (root / "output").is_dir()


def test_without_output_nothing_is_written_under_output(start, root):
    assert finish(train(start, FAKE_AXOLOTL_NO_OUTPUT="1")) == 0
    assert not (root / "output").exists()
    assert events(root)[-1]["event"] == "end"


def test_a_snapshot_request_stops_the_fake_with_a_snapshot(start, root):
    (root / "snapshot.request").write_text("deadline")
    assert finish(train(start)) == 0
    snapshot = json.loads((root / "snapshot.json").read_text())
    assert snapshot["checkpoint"] == "output/checkpoint-1"
    assert snapshot["reason"] == "deadline"


def test_a_fake_ignoring_snapshots_trains_to_the_end(start, root):
    (root / "snapshot.request").write_text("requested")
    assert finish(train(start, FAKE_AXOLOTL_IGNORE_SNAPSHOT="1")) == 0
    assert not (root / "snapshot.json").exists()
    assert events(root)[-1] == {**events(root)[-1], "event": "end", "step": 6}


def test_a_fake_hanging_after_its_snapshot_saves_it_then_never_ends(start, root):
    (root / "snapshot.request").write_text("requested")
    process = train(start, FAKE_AXOLOTL_HANG_AFTER_SNAPSHOT="1")
    wait_for((root / "snapshot.json").is_file)
    time.sleep(0.3)
    assert process.poll() is None
    assert (root / "output" / "checkpoint-1").is_dir()


def test_a_hanging_fake_trains_until_signalled(start, root):
    process = train(start, FAKE_AXOLOTL_HANG="1")
    wait_for(lambda: (root / "metrics.jsonl").is_file() and len(events(root)) > 5)
    assert process.poll() is None
    process.terminate()
    assert finish(process) == -signal.SIGTERM


def test_a_hanging_fake_still_stops_for_a_snapshot(start, root):
    process = train(start, FAKE_AXOLOTL_HANG="1")
    wait_for(lambda: (root / "metrics.jsonl").is_file() and len(events(root)) > 3)
    (root / "snapshot.request").write_text("cost")
    assert finish(process) == 0
    assert json.loads((root / "snapshot.json").read_text())["reason"] == "cost"


def test_a_fake_ignoring_term_only_dies_of_kill(start, root):
    process = train(start, FAKE_AXOLOTL_HANG="1", FAKE_AXOLOTL_IGNORE_TERM="1")
    wait_for((root / "metrics.jsonl").is_file)
    process.terminate()
    time.sleep(0.3)
    assert process.poll() is None
    process.kill()
    assert finish(process) == -signal.SIGKILL


def test_the_child_of_a_fake_dies_with_its_process_group(start, root):
    process = train(start, FAKE_AXOLOTL_HANG="1", FAKE_AXOLOTL_CHILD="1")
    wait_for((root / CHILD_FILE).is_file)
    wait_for(lambda: (root / CHILD_FILE).read_text().endswith("\n"))
    child = int((root / CHILD_FILE).read_text())
    assert alive(child)
    assert os.getpgid(child) == process.pid
    os.killpg(process.pid, signal.SIGTERM)
    assert finish(process) == -signal.SIGTERM
    wait_for(lambda: not alive(child))


def _worker_pids(process: subprocess.Popen[bytes], count: int) -> tuple[list[int], bytes]:
    """The pids the fake announces for its workers, read from its output as they come."""
    seen, pids = b"", []
    while len(pids) < count:
        line = process.stdout.readline()  # type: ignore[union-attr]
        assert line, f"the fake ended before starting {count} workers:\n{seen.decode()}"
        seen += line
        if line.startswith(b"fake axolotl: worker pid "):
            pids.append(int(line.split()[-1]))
    return pids, seen


def test_the_workers_start_with_the_epoch_and_end_with_it(start, root):
    process = train(start, FAKE_AXOLOTL_STEPS="3", FAKE_AXOLOTL_WORKERS="2")
    workers, _ = _worker_pids(process, 2)
    assert all(os.getpgid(pid) == process.pid for pid in workers)
    assert finish(process) == 0
    assert not any(alive(pid) for pid in workers)
    assert [e["step"] for e in events(root) if e["event"] == "log" and "loss" in e] == [1, 2, 3]


# Exec ARGV with SIGTERM ignored and blocked, as the job's runner starts a stage.
SHIELDED = (
    "import os, signal, sys; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM}); "
    "os.execv(sys.argv[1], sys.argv[1:])"
)


@pytest.fixture
def shielded(venv: Path, root: Path) -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    """Starts the hanging fake with workers as the runner starts a stage (TERM ignored and
    blocked), with or without the metrics plugin; killed at the end."""
    started: list[subprocess.Popen[bytes]] = []

    def launch(plugin: bool) -> subprocess.Popen[bytes]:
        env = job_environ(root, TRAINING, FAKE_AXOLOTL_STEP_SECONDS="0.01",
                          FAKE_AXOLOTL_HANG="1", FAKE_AXOLOTL_WORKERS="2",
                          FAKE_AXOLOTL_NO_PLUGIN="" if plugin else "1")
        argv = [str(venv / "bin" / "axolotl"), "train", "axolotl.yaml", "--launcher", "python"]
        process = subprocess.Popen(
            [sys.executable, "-c", SHIELDED, *argv], cwd=root, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
        )
        started.append(process)
        return process

    yield launch
    for process in started:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        process.stdout.close()  # type: ignore[union-attr]


def test_a_worker_killed_by_sigterm_fails_the_fake_as_torchs_fail_the_trainer(shielded):
    # Without the plugin holding TERM blocked, the fake's unblocking (as preparing the data
    # does) reaches its workers, which die of a TERM whatever they inherited.
    process = shielded(plugin=False)
    workers, _ = _worker_pids(process, 2)
    os.killpg(process.pid, signal.SIGTERM)
    out = process.stdout.read().decode()  # type: ignore[union-attr]
    assert finish(process) == 1
    assert "RuntimeError: DataLoader worker (pid " in out
    assert any(
        f"DataLoader worker (pid {pid}) is killed by signal: Terminated." in out for pid in workers
    )


def test_under_the_plugin_the_workers_outlive_a_term_to_every_process(shielded, root):
    process = shielded(plugin=True)
    workers, _ = _worker_pids(process, 2)
    os.killpg(process.pid, signal.SIGTERM)
    time.sleep(0.3)
    assert process.poll() is None and all(alive(pid) for pid in workers)
    (root / "snapshot.request").write_text("requested\n")
    out = process.stdout.read().decode()  # type: ignore[union-attr]
    assert finish(process) == 0, out
    assert (root / "snapshot.json").is_file()
    assert not any(alive(pid) for pid in workers)
