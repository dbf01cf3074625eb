"""`overbrainer tui` keeps up: digits switch views from any focus, the detail follows the
data, failures show where the user is, long lines and labels stay readable, the loss chart
fits 80x24, and training, export and compare start from the Training view."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from tests.helpers.run_dirs import write_examples
from tests.helpers.seeing_project import RUN, TRAINING, runs, write_tui_project
from tests.helpers.seeing_runs import write_metrics, write_run

from overbrainer.pipeline.ids import question_id
from overbrainer.testing.fake_axolotl import make_fake_venv
from overbrainer.tui.app import OverbrainerApp

QUIET = 3600.0


async def wait_until(pilot, check, timeout=60.0, what=""):
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await pilot.pause(0.1)


def screen(app) -> list[str]:
    """The lines the terminal shows now."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


def shown(app, widget: str) -> str:
    return str(app.screen.query_one(widget).render())


def notices(app) -> str:
    return "\n".join(notification.message for notification in app._notifications)


@pytest.fixture
def tui_project(project_dir: Path) -> Path:
    write_tui_project(project_dir)
    return project_dir


def test_digits_switch_views_while_the_tree_or_the_table_has_focus(tui_project):
    async def check():
        app = OverbrainerApp(tui_project, refresh_s=QUIET)
        async with app.run_test(size=(80, 24)) as pilot:
            for key, view in (("2", "dataset"), ("3", "pipeline"), ("4", "training")):
                await pilot.press(key)
                assert app.view == view
            await pilot.press("1")
            assert app.view == "project"
            await pilot.press("2", "1")
            assert app.view == "project"
            await pilot.press("4", "3")
            assert app.view == "pipeline"
            await pilot.press("2", "down", "down", "d", "3")  # behind the dialog: no change
            assert app.view == "dataset"
            await pilot.press("n", "5")
            assert app.view == "logs"

    asyncio.run(check())


def test_the_detail_of_a_run_shows_it_stopped_without_an_eta(project_dir):
    directory = write_run(project_dir, RUN, "running")
    write_metrics(directory, range(1, 31))

    async def check():
        app = OverbrainerApp(project_dir, refresh_s=0.2)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("4")
            await wait_until(pilot, lambda: "ETA" in shown(app, "#curves"), what="the ETA")
            assert f"{RUN}  running" in shown(app, "#curves")
            write_run(project_dir, RUN, "stopped")  # its metrics do not change
            await wait_until(
                pilot, lambda: f"{RUN}  stopped" in shown(app, "#curves"), what="stopped"
            )
            assert "ETA" not in shown(app, "#curves")

    asyncio.run(check())


def test_the_detail_of_a_question_deleted_elsewhere_is_cleared(tui_project, run_cli):
    async def check():
        app = OverbrainerApp(tui_project, refresh_s=0.2)
        async with app.run_test(size=(120, 40)) as pilot:
            # topic, moves, its two questions, borrowing, its question
            await pilot.press("2", *["down"] * 6)
            text = "When may two borrows coexist?"
            assert text in shown(app, "#detail")
            node = app.query_one("#tree").cursor_node
            result = run_cli("dataset", "rm", node.data[1].id)  # from another shell
            assert result.exit_code == 0, result.stderr
            await wait_until(pilot, lambda: text not in shown(app, "#detail"), what="cleared")
            assert not any(text in line for line in screen(app))

    asyncio.run(check())


def test_a_highlight_after_the_detail_pane_is_gone_is_ignored(tui_project):
    """A refresh's highlight may arrive while the app is quitting, its panes removed."""

    async def check():
        app = OverbrainerApp(tui_project, refresh_s=QUIET)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("2", "down")
            await app.screen.query_one("#detail").remove()
            await pilot.press("down", "down")
            await pilot.pause()
            assert not app.screen.query("#detail")

    asyncio.run(check())


def test_the_detail_follows_its_question_when_the_dataset_changes(tui_project, run_cli):
    async def check():
        app = OverbrainerApp(tui_project, refresh_s=0.2)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("2", *["down"] * 4)  # the excluded question
            assert "Why does a move invalidate" in shown(app, "#detail")
            answers = tui_project / "data" / "answers.jsonl"
            records = [json.loads(line) for line in answers.read_text().splitlines()]
            records[1]["meta"]["excluded"] = None  # answered and used now
            answers.write_text("".join(json.dumps(record) + "\n" for record in records))
            await wait_until(
                pilot, lambda: "status answered" in shown(app, "#detail"), what="refreshed"
            )
            assert "Why does a move invalidate" in shown(app, "#detail")

    asyncio.run(check())


def test_attach_on_a_locked_project_says_why_where_the_user_is(tui_project):
    from overbrainer.runs.lock import ProjectLock

    async def check():
        app = OverbrainerApp(tui_project, refresh_s=QUIET)
        async with app.run_test(size=(120, 40)) as pilot:
            with ProjectLock(tui_project):
                await pilot.press("4", "a")
                await wait_until(pilot, lambda: not app.runner.running(), what="attach")
                await pilot.pause(0.3)
            assert app.view == "training"
            assert "✗ another overbrainer (pid " in notices(app)
            assert "is using this project" in notices(app)

    asyncio.run(check())


def test_a_long_log_line_wraps_instead_of_being_cut(tui_project):
    async def check():
        app = OverbrainerApp(tui_project, refresh_s=QUIET)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("5")
            await pilot.pause()
            app.add_log("info", "train: " + "word " * 30 + "THE-END")
            await pilot.pause()
            assert any("THE-END" in line for line in screen(app))

    asyncio.run(check())


def test_questions_with_the_same_start_get_different_labels(tui_project):
    data = tui_project / "data"
    questions = [json.loads(line) for line in (data / "questions.jsonl").read_text().splitlines()]
    start = "What is the difference between moving a value and copying it when "
    for ending in ("it is an integer?", "it is a String?"):
        text = start + ending
        questions.append({**questions[0], "id": question_id(questions[0]["subtopic_id"], text)})
        questions[-1]["text"] = text
    (data / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions))

    async def check():
        app = OverbrainerApp(tui_project, refresh_s=QUIET)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("2")
            await pilot.pause()
            labels = [line[:40].rstrip() for line in screen(app) if "[ ] What is the" in line]
            assert len(labels) == 2, labels
            assert labels[0] != labels[1], labels
            assert labels[0].endswith("an integer?"), labels
            assert labels[1].endswith("a String?"), labels

    asyncio.run(check())


def test_an_excluded_answer_says_why(tui_project):
    async def check():
        app = OverbrainerApp(tui_project, refresh_s=QUIET)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("2", *["down"] * 4)
            assert (
                "status excluded (truncated: the parent's answer hit its output token limit"
                in shown(app, "#detail")
            )

    asyncio.run(check())


def test_the_loss_chart_fits_80x24(tui_project):
    async def check():
        app = OverbrainerApp(tui_project, refresh_s=QUIET)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("4")
            await pilot.pause()
            lines = screen(app)
            assert any(RUN in line and "stopped" in line for line in lines)
            assert any("└────" in line for line in lines)  # the x axis
            assert any("grad_norm" in line for line in lines)

    asyncio.run(check())


def test_train_and_compare_start_from_the_training_view(project_dir, tmp_path, monkeypatch):
    venv = make_fake_venv(tmp_path / "fake-venv")
    write_examples(project_dir / "data" / "train.jsonl", range(10))
    write_examples(project_dir / "data" / "eval.jsonl", range(10, 12))
    config = project_dir / "overbrainer.toml"
    config.write_text(config.read_text() + TRAINING.format(venv=venv))
    monkeypatch.setenv("FAKE_AXOLOTL_STEP_SECONDS", "0.1")
    monkeypatch.setenv("FAKE_AXOLOTL_STEPS", "100000")
    asyncio.run(train_and_compare(project_dir))


def newest_state(project_dir: Path) -> str | None:
    found = runs(project_dir) if (project_dir / "runs").is_dir() else []
    return found[-1]["state"] if found else None


async def train_and_compare(project_dir: Path) -> None:
    app = OverbrainerApp(project_dir, refresh_s=0.3)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("4", "t")
        await pilot.pause()
        question = shown(app, "#question")
        assert "start a training run? target `local`, Qwen/Qwen3-0.6B (lora)" in question
        assert "10 train examples; it may cost" in question
        await pilot.press("n")  # the default is no
        await pilot.pause(0.3)
        assert not app.runner.jobs
        await pilot.press("t", "y")
        await wait_until(pilot, lambda: newest_state(project_dir) == "running", what="running")
        run_id = runs(project_dir)[-1]["id"]
        await wait_until(pilot, lambda: app.selected_run() == run_id, what="the run listed")
        await pilot.press("C")  # refused while train runs: no dialog, no job
        await pilot.pause(0.3)
        assert [job.name for job in app.runner.jobs] == ["train"]
        assert "✗ train is running: compare waits for it to end" in notices(app)
        await pilot.press("s")
        await wait_until(pilot, lambda: not app.runner.running(), what="train stopped")
        assert newest_state(project_dir) == "stopped"
        await pilot.press("C", "y")
        await wait_until(pilot, lambda: not app.runner.running(), what="compare")
        logs = "\n".join(text for _, text in app.log_entries)
        await pilot.press("q")
    assert "$ overbrainer train\n" in logs
    assert f"train: run {run_id} stopped at step" in logs
    assert "train: exited with code 0" in logs
    assert f"$ overbrainer compare --run {run_id}" in logs
    assert [job.name for job in app.runner.jobs] == ["train", "stop", "compare"]


def test_export_starts_from_the_training_view(finished):
    async def check():
        app = OverbrainerApp(finished.dir, refresh_s=0.3)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("4")
            await wait_until(pilot, lambda: app.selected_run() == finished.run_id, what="listed")
            await pilot.press("e", "y")
            await wait_until(pilot, lambda: app.runner.jobs, what="export started")
            await wait_until(pilot, lambda: not app.runner.running(), what="export")
            logs = "\n".join(text for _, text in app.log_entries)
        assert f"$ overbrainer export {finished.run_id}" in logs
        assert f"export: GGUF in runs/{finished.run_id}/output/gguf/" in logs
        assert "export: exited with code 0" in logs

    asyncio.run(check())
