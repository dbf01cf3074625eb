"""The Training view shows the gauges of the selected run's machine under its chart."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fixtures.seeing_project import RUN, write_tui_project
from tests.runs.test_machine_show import SAMPLE

from overbrainer.tui.app import OverbrainerApp

QUIET = 3600.0


def test_the_training_view_shows_the_machine_of_the_run(snap_compare, project_dir: Path):
    write_tui_project(project_dir)
    sample = {**SAMPLE, "time": 1790001065.0}  # 2026-09-21T14:31:05Z
    (project_dir / "runs" / RUN / "machine.json").write_text(json.dumps(sample))
    app = OverbrainerApp(project_dir, refresh_s=QUIET)
    assert snap_compare(app, press=("4",), terminal_size=(120, 40))
