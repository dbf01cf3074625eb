"""The Training view shows the gauges of the selected run's machine under its chart."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from tests.helpers.run_records import SAMPLE
from tests.helpers.seeing_project import RUN, write_tui_project
from tests.helpers.seeing_runs import add_kd_terms
from textual.widgets import Static

from overbrainer.tui.app import OverbrainerApp

QUIET = 3600.0


def test_the_training_view_shows_the_machine_of_the_run(snap_compare, project_dir: Path):
    write_tui_project(project_dir)
    sample = {**SAMPLE, "time": 1790001065.0}  # 2026-09-21T14:31:05Z
    (project_dir / "runs" / RUN / "machine.json").write_text(json.dumps(sample))
    app = OverbrainerApp(project_dir, refresh_s=QUIET)
    assert snap_compare(app, press=("4",), terminal_size=(120, 40))


@pytest.mark.parametrize("size", [(80, 24), (100, 30), (120, 40)])
def test_the_gauges_are_on_screen_without_scrolling(project_dir: Path, size):
    """The smallest terminal the TUI takes shows the chart and every GPU's gauge at once:
    the chart gives rows up to its least, then the gauges fold into two lines."""
    write_tui_project(project_dir)
    (project_dir / "runs" / RUN / "machine.json").write_text(json.dumps(SAMPLE))
    lines, height = asyncio.run(training_view(project_dir, size))
    assert len(lines) <= height, lines
    assert any(line.startswith("machine at ") for line in lines), lines
    gpus = [line for line in lines if "gpu 1 " in line]
    assert gpus and "48.0 GiB" in gpus[0], lines
    assert any("┤" in line for line in lines)  # the chart is still drawn


def test_the_chart_of_a_kd_run_says_its_loss_is_the_kd_trainers_sum(project_dir: Path):
    write_tui_project(project_dir)
    (project_dir / "runs" / RUN / "axolotl.yaml").write_text("kd_trainer: true\nkd_alpha: 0.9\n")
    lines, _ = asyncio.run(training_view(project_dir, (120, 40)))
    assert any(line.startswith("  loss (KD) (line: train, •: eval) against step")
               for line in lines), lines
    assert any(line.startswith("  last: ") and ", loss " in line for line in lines), lines


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
def test_a_kd_run_s_terms_take_their_rows_from_its_chart(project_dir: Path, size):
    write_tui_project(project_dir)
    directory = project_dir / "runs" / RUN
    (directory / "axolotl.yaml").write_text("kd_trainer: true\nkd_alpha: 0.9\n")
    (directory / "machine.json").write_text(json.dumps(SAMPLE))
    add_kd_terms(directory)
    lines, height = asyncio.run(training_view(project_dir, size))
    assert len(lines) <= height, lines
    assert any(line.startswith("  terms: KD loss ") for line in lines), lines
    assert any(line.startswith("machine at ") for line in lines), lines


async def training_view(project_dir: Path, size: tuple[int, int]) -> tuple[list[str], int]:
    """The Training view's lines in a terminal of ``size``, and the rows its pane has."""
    app = OverbrainerApp(project_dir, refresh_s=QUIET)
    async with app.run_test(size=size) as pilot:
        await pilot.press("4")
        await pilot.pause()
        widget = app.query_one("#curves", Static)
        assert widget.parent is not None
        shown = str(widget.render()).splitlines(), widget.parent.region.height
        await pilot.press("q")
    return shown
