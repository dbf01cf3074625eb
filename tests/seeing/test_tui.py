"""`overbrainer tui`: snapshots of its views at 80x24 and 120x40, and pilots that act
through it: delete a question into rejected.jsonl, stop a run of the fake trainer."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from pathlib import Path

import pytest
from tests.helpers.seeing_project import write_tui_project

from overbrainer.tui.app import OverbrainerApp

QUIET = 3600.0
"""No periodic refresh during a snapshot."""


@pytest.fixture
def tui_project(project_dir: Path) -> Path:
    write_tui_project(project_dir)
    return project_dir


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
@pytest.mark.parametrize(
    "keys",
    [(), ("2", "down", "down", "down"), ("3",), ("4",), ("5", "f")],
    ids=["project", "dataset", "pipeline", "training", "logs"],
)
def test_views_snapshots(snap_compare, tui_project, size, keys):
    app = OverbrainerApp(tui_project, refresh_s=QUIET)
    assert snap_compare(app, press=keys, terminal_size=size)


def test_help_lists_the_keys_of_the_view(snap_compare, tui_project):
    app = OverbrainerApp(tui_project, refresh_s=QUIET)
    assert snap_compare(app, press=("4", "question_mark"), terminal_size=(80, 24))


def test_a_small_terminal_shows_a_notice(snap_compare, tui_project):
    app = OverbrainerApp(tui_project, refresh_s=QUIET)
    assert snap_compare(app, terminal_size=(60, 20))


def test_an_idle_tui_holds_no_lock_and_a_command_can_run(tui_project, run_cli):
    asyncio.run(idle_tui(tui_project, run_cli))


async def idle_tui(project_dir, run_cli):
    from overbrainer.runs.lock import ProjectLock

    app = OverbrainerApp(project_dir, refresh_s=0.2)
    async with app.run_test(size=(80, 24)) as pilot:
        for key in ("2", "3", "4", "5", "1"):
            await pilot.press(key)
        await pilot.pause(0.5)
        assert ProjectLock(project_dir).holder() is None
        result = run_cli("split")  # a writer from another shell is not blocked
        assert result.exit_code == 0, result.stderr
        await pilot.press("q")


def test_tui_refuses_without_a_terminal(run_cli):
    result = run_cli("tui")
    assert result.exit_code == 1
    assert result.stderr == "error: tui: needs a terminal (stdout is not one)\n"


async def wait_until(pilot, check, timeout=60.0, what=""):
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await pilot.pause(0.1)


def test_delete_a_question_into_rejected_jsonl(project_dir):
    asyncio.run(delete_a_question(project_dir))


async def delete_a_question(project_dir):
    items = write_tui_project(project_dir)
    app = OverbrainerApp(project_dir, refresh_s=0.5)
    rejected = project_dir / "data" / "rejected.jsonl"
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("2")
        # (no cursor yet), topic, subtopic "moves", its first question (answered)
        await pilot.press("down", "down", "down")
        await pilot.pause()
        assert str(app.query_one("#tree").cursor_node.label) == "[a] What is a move?", str(
            app.query_one("#tree").cursor_node.label
        )
        await pilot.press("d")
        await pilot.pause()
        await pilot.press("n")  # the default is no
        await pilot.pause(0.5)
        assert not rejected.exists()
        await pilot.press("d")
        await pilot.pause()
        await pilot.press("y")
        await wait_until(
            pilot, lambda: rejected.exists() and not app.runner.running(), what="dataset rm"
        )
        await pilot.pause(0.5)
        labels = [
            str(node.label) for node in app.query_one("#tree").root.children[0].children[0].children
        ]
        logs = "\n".join(text for _, text in app.log_entries)
        await pilot.press("q")
    records = [json.loads(line) for line in rejected.read_text().splitlines()]
    question = items["answered"]
    assert records == [
        {
            "kind": "question",
            "id": question["id"],
            "topic": "ownership",
            "subtopic_id": question["subtopic_id"],
            "text": question["text"],
        }
    ]
    questions = (project_dir / "data" / "questions.jsonl").read_text()
    assert question["id"] not in questions
    assert question["id"] not in (project_dir / "data" / "answers.jsonl").read_text()
    assert labels == ["[x] Why does a move invalidate the source?"]
    assert "$ overbrainer dataset rm " + question["id"] in logs
    assert "dataset: deleted 1 question, 1 answer" in logs


def runs(project_dir: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((project_dir / "runs").glob("*/run.json"))]


@pytest.fixture
def training(start_training):
    return start_training()


def test_stop_a_run_from_the_runs_view(project_dir, training):
    asyncio.run(stop_a_run(project_dir, training))


async def stop_a_run(project_dir, training):
    run_id = runs(project_dir)[-1]["id"]
    app = OverbrainerApp(project_dir, refresh_s=0.5)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("4")
        await wait_until(pilot, lambda: app.selected_run() == run_id, what="the run listed")
        await pilot.press("s")
        await wait_until(
            pilot, lambda: runs(project_dir)[-1]["state"] == "stopped", what="the run stopped"
        )
        await wait_until(
            pilot,
            lambda: app.query_one("#runs").get_row(run_id)[1] == "stopped",
            what="the table updated",
        )
        logs = "\n".join(text for _, text in app.log_entries)
        await pilot.press("q")
    assert f"$ overbrainer train stop {run_id}" in logs
    assert f"train: snapshot of run {run_id} requested" in logs
    out, _ = training.communicate(timeout=60)
    assert training.returncode == 0
    assert f"train: run {run_id} stopped at step" in out
    record = runs(project_dir)[-1]
    assert record["snapshot"]["reason"] == "requested"


def test_the_pipeline_view_runs_the_stages_and_shows_their_progress(tmp_path, provider):
    from tests.helpers.pipeline_data import write_project

    project = write_project(tmp_path / "pipeline", provider.url)
    asyncio.run(run_the_stages(project))


async def run_the_stages(project_dir):
    app = OverbrainerApp(project_dir, refresh_s=0.5)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("3", "r")
        await wait_until(
            pilot,
            lambda: app.chain_done == ["subtopics", "questions", "answers", "split"],
            what="the four stages",
        )
        await pilot.pause(0.5)
        chain = str(app.query_one("#chain").render())
        stages = str(app.query_one("#stages").render())
        stage_log = "\n".join(strip.text for strip in app.query_one("#stage-log").lines)
        await pilot.press("q")
    assert "subtopics ✓ → questions ✓ → answers ✓ → split ✓" in chain
    assert "subtopics  1 run(s), 2 done" in stages
    assert "subtopics: 2 done, 0 skipped, 0 failed, 0 excluded" in stage_log
    assert "split: " in stage_log
    assert (project_dir / "data" / "train.jsonl").exists()


def test_logs_export_writes_the_lines_shown(tui_project):
    asyncio.run(export_logs(tui_project))


async def export_logs(project_dir):
    app = OverbrainerApp(project_dir, refresh_s=QUIET)
    async with app.run_test(size=(80, 24)) as pilot:
        app.add_log("info", "split: 1 train, 0 eval")
        app.add_log("debug", "a debug line")
        app.add_log("warning", "a key sk-0123456789abcdefghijklmnop in a line")
        await pilot.press("5", "x")
        await pilot.pause()
        await pilot.press("q")
    (path,) = (project_dir / ".overbrainer").glob("logs-*.log")
    text = path.read_text()
    assert "split: 1 train, 0 eval\n" in text
    assert "a debug line" not in text  # below the level shown
    assert "sk-0123456789abcdefghijklmnop" not in text


def test_every_footer_key_fits_in_80_columns(tui_project):
    """Issue 43: at 80x24 the training view's footer cut off `e export` and `C compare`."""
    asyncio.run(footer_keys(tui_project))


async def footer_keys(project_dir):
    from textual.widgets._footer import FooterKey

    app = OverbrainerApp(project_dir, refresh_s=QUIET)
    async with app.run_test(size=(80, 24)) as pilot:
        for view in "12345":
            await pilot.press(view)
            await pilot.pause()
            shown = {key.action: key.region for key in app.screen.query(FooterKey)}
            assert {"quit", "reload", "help", *app.VIEW_KEYS.get(app.view, ())} <= set(shown)
            for action, region in shown.items():
                assert region.width > 0 and region.right <= 80, (app.view, action)
            ordered = sorted(shown.values(), key=lambda region: region.x)
            for left, right in itertools.pairwise(ordered):  # none over another
                assert left.right <= right.x, app.view
        await pilot.press("q")


def test_the_logs_view_opens_with_the_project_s_last_stage_runs(tui_project, project_dir):
    """Issue 43: it was empty until the TUI ran something."""
    from overbrainer.pipeline.history import append_history, execution_lines, read_history

    for stage, done in (("questions", 6), ("answers", 5)):
        append_history(
            tui_project,
            {"stage": stage, "started_at": "2026-12-05T10:00:00Z", "ended_at":
             "2026-12-05T10:01:00Z", "status": "completed", "provider": "main",
             "model": "parent-model", "done": done, "skipped": 0, "failed": 0, "excluded": 0,
             "input_tokens": 100, "output_tokens": 200, "cost": 0.01},
        )  # fmt: skip
    entries = read_history(tui_project)
    assert len(entries) == 2
    lines = asyncio.run(opening_logs(tui_project))
    assert lines[0] == "the last 2 of 2 stage runs (.overbrainer/history.jsonl):"
    assert lines[1:] == [f"  {line}" for line in execution_lines(entries)]


def test_a_project_with_no_history_says_so_in_its_logs(project_dir):
    lines = asyncio.run(opening_logs(project_dir))
    assert lines == ["no stage has run here yet: what the TUI runs shows here"]


async def opening_logs(project_dir):
    app = OverbrainerApp(project_dir, refresh_s=QUIET)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("5")
        await pilot.pause()
        lines = [text for _, text in app.log_entries]
        await pilot.press("q")
    return lines
