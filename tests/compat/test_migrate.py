"""`overbrainer migrate`: an older project's files to the current format, once."""

from __future__ import annotations

import json

from tests.helpers.project import LOCAL_PROVIDER
from tests.helpers.reference_project import REJECTED_SHAPES


def old_project(project_dir):
    """Files as earlier versions of this tool left them."""
    data = project_dir / "data"
    data.mkdir(exist_ok=True)
    rejected = [
        {"kind": "question", "id": "q1", "topic": "ownership", "subtopic_id": "s1",
         "subtopic": "moves", "text": "old question", "reason": "lexical"},
        {"kind": "subtopic", "topic": "ownership", "text": "Drop"},
    ]  # fmt: skip
    (data / "rejected.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rejected))
    state = project_dir / ".overbrainer"
    state.mkdir(exist_ok=True)
    (state / "history.jsonl").write_text(
        json.dumps({"stage": "split", "started_at": "2026-01-01T00:00:00Z", "status": "ok",
                    "done": 9, "cost": 0.0, "split": {"train": 8, "eval": 1, "orphaned": 0}})
        + "\n"
    )  # fmt: skip
    config = project_dir / "overbrainer.toml"
    config.write_text(
        config.read_text()
        + '\n[training]\ntarget = "local"\nbase_model = "m"\nadapter = "lora"\n'
        '# the repo to push to\nhub_model_id = "me/model"\n\n[targets.local]\nkind = "local"\n'
    )
    (project_dir / ".gitignore").write_text(".env\n/data/")


def test_a_dry_run_says_everything_and_changes_nothing(run_cli, project_dir):
    old_project(project_dir)
    before = {p: p.read_bytes() for p in project_dir.rglob("*") if p.is_file()}
    result = run_cli("migrate", "--dry-run")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines() == [
        'would move training.hub_model_id to [hub] repo = "me/model" (private, after_training)',
        "would add /.overbrainer/ to .gitignore",
        "would rewrite 2 record(s) of data/rejected.jsonl to the reference tool's shape",
        "would rewrite 1 split line(s) of .overbrainer/history.jsonl (done 0, cost null)",
        "would write .overbrainer/version: format 1",
    ]
    after = {p: p.read_bytes() for p in project_dir.rglob("*") if p.is_file()}
    assert after == before


def test_a_migration_is_made_once(run_cli, project_dir):
    old_project(project_dir)
    result = run_cli("migrate")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[0].startswith("moved training.hub_model_id")
    rejected = [json.loads(line) for line in
                (project_dir / "data" / "rejected.jsonl").read_text().splitlines()]
    for record in rejected:
        assert set(record) == REJECTED_SHAPES[record["kind"]]
    assert rejected[1]["name"] == "Drop"
    reasons = [json.loads(line) for line in
               (project_dir / "data" / "rejected.reasons.jsonl").read_text().splitlines()]
    assert reasons == [{"id": "q1", "kind": "question", "topic": "ownership", "reason": "lexical"}]
    config = (project_dir / "overbrainer.toml").read_text()
    assert "hub_model_id" not in config and 'repo = "me/model"' in config
    assert (project_dir / ".gitignore").read_text() == ".env\n/data/\n/.overbrainer/\n"
    split = json.loads((project_dir / ".overbrainer" / "history.jsonl").read_text())
    assert (split["done"], split["cost"]) == (0, None)
    assert run_cli("config", "check", env=LOCAL_PROVIDER).exit_code == 0
    again = run_cli("migrate")
    assert again.stdout == "nothing to migrate\n"


def test_a_newer_format_is_refused(run_cli, project_dir):
    (project_dir / ".overbrainer").mkdir()
    (project_dir / ".overbrainer" / "version").write_text("7\n")
    result = run_cli("migrate")
    assert result.exit_code == 1
    assert result.stderr == (
        "error: this project uses format 7, newer than the format 1 this overbrainer knows: "
        "upgrade overbrainer\n"
    )


def test_history_lines_are_rewritten_whole_and_the_others_kept_byte_for_byte(
    run_cli, project_dir
):
    """A record may hold U+2028 (a line separator to str.splitlines: the record was cut in
    two on the rewrite), and a line that is not JSON is kept as it was, bytes included."""
    state = project_dir / ".overbrainer"
    state.mkdir()
    split = {"stage": "split", "status": "ok", "done": 9, "cost": 0.0, "note": "a\u2028b"}
    other = b'{"stage": "answers", "error": "x\xff"\n'
    (state / "history.jsonl").write_bytes(
        json.dumps(split, ensure_ascii=False).encode() + b"\n" + other
    )
    result = run_cli("migrate")
    assert result.exit_code == 0, result.stderr
    first, second, end = (state / "history.jsonl").read_bytes().split(b"\n")
    assert json.loads(first) == {**split, "done": 0, "cost": None}
    assert (second + b"\n", end) == (other, b"")


def test_a_fifo_in_the_place_of_a_file_migrate_reads_is_refused_not_waited_on(
    run_cli, project_dir
):
    import os

    os.mkfifo(project_dir / ".gitignore")
    result = run_cli("migrate")
    assert result.exit_code == 1
    assert result.stderr == "error: .gitignore is a FIFO: refusing to read it\n"
