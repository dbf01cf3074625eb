"""What the TUI reads, without a screen."""

from __future__ import annotations

import json
import os

from tests.helpers.seeing_runs import write_run

from overbrainer.runs.store import RunStore
from overbrainer.tui.data import RecordCache, fit_label, read_config


def test_records_are_read_again_only_when_they_change(project_dir, monkeypatch):
    write_run(project_dir, "demo_20260922-143005")
    second = write_run(project_dir, "demo_20260922-153005", "running")
    loads = []
    load = RunStore.load
    monkeypatch.setattr(
        RunStore, "load", lambda self, run_id: loads.append(run_id) or load(self, run_id)
    )
    cache = RecordCache(project_dir)
    assert [r.state.value for r in cache.records()] == ["succeeded", "running"]
    assert len(loads) == 2
    assert len(cache.records()) == 2
    assert len(loads) == 2  # nothing changed: nothing parsed
    record = json.loads((second / "run.json").read_text())
    (second / "run.json").write_text(json.dumps({**record, "state": "stopped"}))
    stat = (second / "run.json").stat()
    os.utime(second / "run.json", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert [r.state.value for r in cache.records()] == ["succeeded", "stopped"]
    assert loads[2:] == ["demo_20260922-153005"]


def test_the_config_view_lists_every_problem(project_dir):
    (project_dir / "overbrainer.toml").write_text('[project]\nname = "x"\n[pipeline]\nseed = "a"\n')
    view = read_config(project_dir)
    assert view.lines == []
    assert any("roles" in problem for problem in view.problems)
    assert any("pipeline.seed" in problem for problem in view.problems)


def test_fit_label_keeps_the_start_and_the_end():
    assert fit_label("short", 10) == "short"
    assert fit_label("What is the difference, for an integer?", 21) == "What is th…n integer?"
    assert len(fit_label("x" * 100, 21)) == 21
    assert fit_label("abcdefghij", 5) == "abcd…"
