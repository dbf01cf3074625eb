"""``history``: per stage, and per execution."""

from __future__ import annotations

import json

from tests.helpers.history import entry

from overbrainer.pipeline.history import append_history


def test_nothing_has_run_yet(run_cli):
    for args in (("history",), ("history", "--all")):
        result = run_cli(*args)
        assert result.exit_code == 0
        assert result.stdout == "no stage has run yet\n"


def test_one_line_per_stage_and_a_total(run_cli, project_dir):
    append_history(project_dir, entry("answers"))
    append_history(project_dir, entry("subtopics", cost=0.25))
    append_history(project_dir, entry("answers", status="failed", failed=3, cost=None))
    result = run_cli("history")
    assert result.stdout.splitlines() == [
        "subtopics  1 run(s), 2 done, 0 failed; tokens 10 in, 20 out; $0.2500",
        "answers    2 run(s), 4 done, 3 failed; tokens 20 in, 40 out; $0.5000 + unknown",
        "total      3 run(s), 6 done, 3 failed; tokens 30 in, 60 out; $0.7500 + unknown",
    ]


def test_all_shows_each_execution(run_cli, project_dir):
    append_history(project_dir, entry("answers", status="interrupted", cost=None))
    split = entry("split", provider=None, model=None, input_tokens=0, output_tokens=0, cost=None,
                  split={"train": 9, "eval": 1, "orphaned": 0})
    append_history(project_dir, split)
    result = run_cli("history", "--all")
    assert result.stdout.splitlines() == [
        "2026-01-02T03:04:05Z  answers    interrupted  2 done, 1 skipped, 0 failed, 1 excluded; "
        "tokens 10 in, 20 out; cost unknown; main/m",
        "2026-01-02T03:04:05Z  split      ok           2 done, 1 skipped, 0 failed, 1 excluded; "
        "tokens 0 in, 0 out; $0.0000; 9 train, 1 eval, 0 orphaned",
    ]


def test_every_stage_execution_is_recorded(run_cli, project_dir, provider):
    assert run_cli("run").exit_code == 0
    entries = [json.loads(line) for line in
               (project_dir / ".overbrainer" / "history.jsonl").read_text().splitlines()]
    assert [(e["stage"], e["status"]) for e in entries] == [
        ("subtopics", "ok"), ("questions", "ok"), ("answers", "ok"), ("split", "ok")
    ]
    answers = entries[2]
    assert set(answers) == {"stage", "started_at", "ended_at", "status", "provider", "model",
                            "done", "skipped", "failed", "excluded", "input_tokens",
                            "output_tokens", "cost"}
    assert (answers["provider"], answers["model"], answers["done"]) == ("main", "parent-model", 8)
    assert answers["cost"] == 8 * (10 * 3e-6 + 20 * 4e-6)
    assert run_cli("history").stdout.splitlines()[-1].startswith("total      4 run(s)")


def test_a_split_line_is_written_as_the_reference_tool_writes_it(run_cli, project_dir, provider):
    assert run_cli("run").exit_code == 0
    entries = [json.loads(line) for line in
               (project_dir / ".overbrainer" / "history.jsonl").read_text().splitlines()]
    split = entries[-1]
    assert split["stage"] == "split"
    assert (split["done"], split["cost"]) == (0, None)
    assert split["split"] == {"train": 7, "eval": 1, "orphaned": 0}
