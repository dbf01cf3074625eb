"""Every training command releases its target's executor once, however it ends, with the
run's outcome when it has one: seen by a real plugin that notes each ``release_executor``
call beside the local target's own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

# Notes each release (the run and the outcome) in $RELEASES; fails or interrupts on demand.
RECORDER = """
import json, os, signal
from overbrainer import hookimpl
from overbrainer.errors import UserError

@hookimpl(tryfirst=True)
def release_executor(executor, run, outcome):
    with open(os.environ["RELEASES"], "a") as file:
        file.write(json.dumps([run.id if run else None, getattr(outcome, "value", outcome)]))
        file.write("\\n")
    if os.environ.get("RELEASE_FAILS"):
        raise RuntimeError("the target's API is down")

@hookimpl(tryfirst=True)
def launch_job(executor, run, job):
    if os.environ.get("LAUNCH_FAILS"):
        raise UserError("the launcher refused the job")

@hookimpl(hookwrapper=True)
def poll_job(executor, run):
    if os.environ.get("POLL_INTERRUPTS"):
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while following
    yield
"""


@pytest.fixture
def releases(site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    site.install("recorder", RECORDER)
    path = tmp_path / "releases.jsonl"
    monkeypatch.setenv("RELEASES", str(path))
    monkeypatch.setenv("OVERBRAINER_LOAD_PLUGINS", "local,recorder")
    return path


def released(path: Path) -> list[list[str | None]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_trained_run_is_released_once_with_its_outcome(trainer, run_cli, releases):
    result = run_cli("train", env={"FAKE_AXOLOTL_STEPS": "3"})
    assert result.exit_code == 0, result.stderr
    assert released(releases) == [[trainer.run()["id"], "succeeded"]]


def test_a_failed_start_is_released_with_the_failure(trainer, run_cli, releases, loads):
    result = run_cli("train", env={"LAUNCH_FAILS": "1"})
    assert result.exit_code == 1
    assert result.stderr.endswith("error: the launcher refused the job\n")
    run = trainer.run()
    assert run["state"] == "failed"
    assert released(releases) == [[run["id"], "failed"]]
    assert loads[run["id"]] == 0  # the failure was noted, not read back


def test_a_refused_preparation_is_released_with_no_run(trainer, run_cli, releases):
    result = run_cli("train", "--keep-machine")
    assert result.exit_code == 1
    assert trainer.runs() == []
    assert released(releases) == [[None, None]]


def test_ctrl_c_while_following_releases_with_no_outcome(trainer, run_cli, releases, loads):
    result = run_cli("train", env={"POLL_INTERRUPTS": "1", "FAKE_AXOLOTL_HANG": "1"})
    run = trainer.run()
    assert result.exit_code == 0, result.stderr
    assert result.stdout.endswith(
        f"interrupted: run {run['id']} keeps running on target `local`; follow it "
        f"again with `overbrainer train attach {run['id']}`\n"
    )
    assert released(releases) == [[run["id"], None]]
    assert loads[run["id"]] == 1  # read back at the Ctrl-C: it might have ended meanwhile
    cancelled = run_cli("train", "cancel", run["id"])
    assert cancelled.exit_code == 0, cancelled.stderr
    assert released(releases)[1:] == [[run["id"], "cancelled"]]


def test_ctrl_c_as_the_run_ends_releases_with_its_outcome(trainer, run_cli, releases):
    """A Ctrl-C after the outcome was saved, before the follower hands it on: the release
    still gets it (a machine made for the run is ended), and nothing says it keeps running."""
    from overbrainer.events import TrainEnd, subscribe

    def ctrl_c_at_the_end(event):
        if isinstance(event, TrainEnd):
            raise KeyboardInterrupt

    stop = subscribe(ctrl_c_at_the_end)
    try:
        result = run_cli("train", env={"FAKE_AXOLOTL_STEPS": "3"})
    finally:
        stop()
    run = trainer.run()
    assert run["state"] == "succeeded"
    assert result.exit_code == 130
    assert "keeps running" not in result.stdout
    assert released(releases) == [[run["id"], "succeeded"]]


def test_attach_and_stop_release_once_with_the_outcome(trainer, run_cli, releases, loads):
    process = trainer.spawn(
        "train", env={"FAKE_AXOLOTL_HANG": "1", "OVERBRAINER_LOAD_PLUGINS": "local"}
    )
    run = trainer.wait_running()
    process.kill()  # the job keeps running, to be followed again
    process.wait()
    interrupted = run_cli("train", "attach", run["id"], env={"POLL_INTERRUPTS": "1"})
    assert interrupted.exit_code == 0, interrupted.stderr
    assert released(releases) == [[run["id"], None]]
    assert loads[run["id"]] == 2  # attach read it once, and again at the Ctrl-C
    stopped = run_cli("train", "stop", run["id"])
    assert stopped.exit_code == 0, stopped.stderr
    assert released(releases)[1:] == [[run["id"], "stopped"]]


def test_a_failing_release_is_a_warning_and_the_outcome_stands(trainer, run_cli, releases):
    result = run_cli("train", env={"FAKE_AXOLOTL_STEPS": "3", "RELEASE_FAILS": "1"})
    assert result.exit_code == 0, result.stderr
    assert "warning: cannot release target resources: the target's API is down" in result.stderr
    assert trainer.run()["state"] == "succeeded"
    assert released(releases) == [[trainer.run()["id"], "succeeded"]]
