"""``runs ls`` reads only what it prints: the same lines as the fully validated records
give, every state and snapshot shown as saved, nothing stale, bad records skipped."""

from __future__ import annotations

import json

import pytest
from tests.helpers.run_records import backdate

from overbrainer.errors import UserError
from overbrainer.job.layout import TARGET_NOTE
from overbrainer.job.record import RunState, SnapshotReason
from overbrainer.runs.listed import REASONS, STATES
from overbrainer.runs.listing import run_line, run_lines, runs_json
from overbrainer.runs.listing_cache import FIELDS
from overbrainer.runs.store import RunStore


def write(project_dir, run_id, created, **fields):
    directory = project_dir / "runs" / run_id
    directory.mkdir(parents=True, exist_ok=True)
    record = {"id": run_id, "target": "gpu", "created": created, "remote_dir": "/r", **fields}
    (directory / "run.json").write_text(json.dumps(record, indent=2))


def test_the_states_and_reasons_are_the_records():
    assert tuple(state.value for state in RunState) == STATES
    assert tuple(reason.value for reason in SnapshotReason) == REASONS


def test_the_same_lines_as_the_validated_records(project_dir):
    for number, state in enumerate(STATES):
        write(project_dir, f"demo_20260101-00000{number}", f"2026-01-01T00:00:0{number}Z",
              state=state, job={"dir": "/r", "pid": 1234, "token": "t"}, future_field=[1])
    for number, reason in enumerate(REASONS):
        write(project_dir, f"demo_20260102-00000{number}", "2026-01-02T00:00:00Z",
              state="stopped", snapshot={"checkpoint": "output/checkpoint-7", "step": number,
                                         "reason": reason})
    write(project_dir, "demo_20260103-000000", "2026-01-03T00:00:00Z")  # no state: preparing
    store = RunStore(project_dir)
    records = store.list()
    width = max(len(record.id) for record in records)
    assert list(run_lines(store.root)) == [run_line(record, width) for record in records]
    assert len(records) == len(STATES) + len(REASONS) + 1


def test_a_state_written_since_is_what_the_next_listing_shows(project_dir):
    write(project_dir, "demo_20260101-000000", "2026-01-01T00:00:00Z", state="running")
    root = RunStore(project_dir).root
    assert "running" in next(run_lines(root))
    write(project_dir, "demo_20260101-000000", "2026-01-01T00:00:00Z", state="succeeded")
    assert "succeeded" in next(run_lines(root))


def test_records_wrong_in_what_is_printed_are_skipped_with_why(run_cli, project_dir):
    write(project_dir, "good_20260101-000000", "2026-01-01T00:00:00Z", state="failed")
    write(project_dir, "bad_20260101-000001", "2026-01-01T00:00:01Z", state="exploded")
    write(project_dir, "bad_20260101-000002", "2026-01-01T00:00:02Z",
          snapshot={"checkpoint": "c", "step": -1})
    write(project_dir, "bad_20260101-000003", 20260101)
    write(project_dir, "bad_20260101-000004", "2026-01-01T00:00:04Z", id="other")
    result = run_cli("runs", "ls")
    assert result.exit_code == 0
    assert result.stdout == (
        "RUN                   STATE      TARGET  CREATED\n"
        "good_20260101-000000  failed     gpu     2026-01-01T00:00:00Z\n"
    )
    shown = "warning: skipping run {0}: runs/{0}/run.json is not a valid run record ({1})"
    assert sorted(result.stderr.splitlines()) == sorted([
        shown.format("bad_20260101-000001", "state: Input should be " + ", ".join(
            repr(state) for state in STATES)),
        shown.format("bad_20260101-000002",
                     "snapshot.step: Input should be an integer of 0 or more"),
        shown.format("bad_20260101-000003", "created: Input should be a valid string"),
        shown.format("bad_20260101-000004", "id: names another run"),
    ])


def test_a_targets_note_ends_its_runs_line(project_dir):
    write(project_dir, "demo_20260101-000000", "2026-01-01T00:00:00Z", state="running")
    write(project_dir, "demo_20260101-000001", "2026-01-01T00:00:01Z", state="running")
    run_dir = project_dir / "runs" / "demo_20260101-000000"
    (run_dir / TARGET_NOTE).write_text("pod running k3x $0.44/h\nignored\n")
    (project_dir / "runs" / "demo_20260101-000001" / TARGET_NOTE).symlink_to(
        run_dir / TARGET_NOTE
    )
    lines = list(run_lines(RunStore(project_dir)))
    assert lines == [
        "demo_20260101-000000  running    gpu  2026-01-01T00:00:00Z  pod running k3x $0.44/h",
        "demo_20260101-000001  running    gpu  2026-01-01T00:00:01Z",
    ]


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ('{"id": "x",', "line 1, column 12"),
        ("[1, 2]", "record: not an object"),
        (b'{"id": "\xff"}', "not UTF-8"),
    ],
)
def test_the_listing_and_the_store_word_an_unreadable_record_alike(
    run_cli, project_dir, content, why
):
    run_id = "demo_20260101-000000"
    directory = project_dir / "runs" / run_id
    directory.mkdir(parents=True)
    path = directory / "run.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    message = f"runs/{run_id}/run.json is not a valid run record ({why})"
    with pytest.raises(UserError) as caught:
        RunStore(project_dir).load(run_id)
    assert str(caught.value) == message
    result = run_cli("runs", "ls")
    assert result.exit_code == 0
    assert result.stdout == ""
    assert result.stderr == f"warning: skipping run {run_id}: {message}\n"


def test_a_listing_kept_in_the_cache_follows_every_change_to_the_files(project_dir):
    write(project_dir, "demo_20260101-000000", "2026-01-01T00:00:00Z", state="succeeded")
    write(project_dir, "demo_20260101-000001", "2026-01-01T00:00:01Z", state="running")
    metrics = project_dir / "runs" / "demo_20260101-000001" / "metrics.jsonl"
    metrics.write_text(json.dumps({"event": "log", "time": 1767225661.0, "loss": 2.5}) + "\n")
    backdate(project_dir)
    root = RunStore(project_dir).root
    first = list(run_lines(root))
    cache = json.loads((root / ".listing.json").read_text())
    assert sorted(cache["runs"]) == ["demo_20260101-000000", "demo_20260101-000001"]
    assert list(run_lines(root)) == first  # from the cache
    assert first[1].endswith("  2.5000")
    with metrics.open("a") as file:  # the running run's metrics grow in place
        file.write(json.dumps({"event": "log", "time": 1767225700.0, "loss": 1.25}) + "\n")
    record = root / "demo_20260101-000000" / "run.json"
    record.write_text(record.read_text().replace("succeeded", "cancelled"))  # same size
    lines = list(run_lines(root))
    assert "cancelled" in lines[0]
    assert lines[1].endswith("  1.2500")
    (root / "demo_20260101-000000" / "target.note").write_text("pod gone\n")
    (root / "demo_20260101-000001").rename(root / "x")
    assert list(run_lines(root)) == [lines[0] + "  pod gone"]


def test_a_cached_row_is_escaped_as_a_fresh_one_is(project_dir):
    """The cache is a file anyone may write: its row is shown escaped, its stat key
    matching or not (terminal escapes, a right-to-left override, a line of its own)."""
    write(project_dir, "demo_20260101-000000", "2026-01-01T00:00:00Z", state="succeeded")
    backdate(project_dir)
    root = RunStore(project_dir).root
    [fresh] = list(run_lines(root))
    cache_path = root / ".listing.json"
    cache = json.loads(cache_path.read_text())
    [entry] = cache["runs"].values()
    entry[-FIELDS + 2] += "\x1b[2J\u202e\nerror: fake line"  # its creation time
    cache_path.write_text(json.dumps(cache))
    [shown] = list(run_lines(root))
    assert shown == fresh + "\\x1b[2J\\u202e\\x0aerror: fake line"
    assert "\x1b" not in shown and "\n" not in shown and "\u202e" not in shown


def test_a_cache_that_is_not_the_listings_is_ignored(project_dir):
    write(project_dir, "demo_20260101-000000", "2026-01-01T00:00:00Z", state="succeeded")
    backdate(project_dir)
    root = RunStore(project_dir).root
    fresh = list(run_lines(root))
    cache = root / ".listing.json"
    for text in ("not json", "[]", '{"version": 2, "runs": {"demo_20260101-000000": [1, 2]}}'):
        cache.write_text(text)
        assert list(run_lines(root)) == fresh
    data = json.loads(cache.read_text())
    key = data["runs"]["demo_20260101-000000"][0]
    data["runs"]["demo_20260101-000000"] = [key, [["x"], "", [], "  forged"]]
    cache.write_text(json.dumps(data))
    assert list(run_lines(root)) == fresh


def test_runs_just_changed_or_with_exports_are_not_kept(project_dir):
    write(project_dir, "demo_20260101-000000", "2026-01-01T00:00:00Z", state="succeeded")
    write(project_dir, "demo_20260101-000001", "2026-01-01T00:00:01Z", state="succeeded")
    (project_dir / "runs" / "demo_20260101-000001" / "exports").mkdir()
    backdate(project_dir)
    write(project_dir, "demo_20260101-000002", "2026-01-01T00:00:02Z", state="succeeded")
    root = RunStore(project_dir).root
    list(run_lines(root))
    cache = json.loads((root / ".listing.json").read_text())
    assert sorted(cache["runs"]) == ["demo_20260101-000000"]
    export = root / "demo_20260101-000001" / "exports" / "e1"
    export.mkdir()
    (export / "export.json").write_text("{}")
    assert "exported" in list(run_lines(root))[1]


def test_what_the_cache_gives_is_what_the_files_give_text_and_json(project_dir):
    write(project_dir, "demo_20260101-000000", "2026-01-01T00:00:00Z", state="succeeded")
    write(project_dir, "demo_20260101-000001", "2026-01-01T00:00:01Z", state="stopped",
          snapshot={"checkpoint": "output/checkpoint-7", "step": 7, "reason": "cost"})
    write(project_dir, "demo_20260101-000002", "2026-01-01T00:00:02Z", state="running")
    root = RunStore(project_dir).root
    (root / "demo_20260101-000001" / TARGET_NOTE).write_text("pod gone $1.20\n")
    (root / "demo_20260101-000002" / "metrics.jsonl").write_text(
        json.dumps({"event": "log", "time": 1767225662.0, "step": 3, "loss": 0.5,
                    "eval_loss": 0.75}) + "\n"
    )
    backdate(project_dir)
    fresh_lines, fresh_json = list(run_lines(root, header=True)), runs_json(root)
    cache = json.loads((root / ".listing.json").read_text())
    assert len(cache["runs"]) == 3
    assert list(run_lines(root, header=True)) == fresh_lines
    assert runs_json(root) == fresh_json
    assert fresh_json[1]["snapshot"] == {"step": 7, "reason": "cost"}
    assert fresh_json[1]["note"] == "pod gone $1.20"
    assert fresh_json[2]["eval_loss"] == 0.75


def test_metrics_that_appear_for_a_running_run_are_shown(project_dir):
    write(project_dir, "demo_20260101-000000", "2026-01-01T00:00:00Z", state="running")
    backdate(project_dir)
    root = RunStore(project_dir).root
    assert "loss" not in next(run_lines(root))
    assert "demo_20260101-000000" in json.loads((root / ".listing.json").read_text())["runs"]
    # Made in place, as the follower's copy would be if the directory's time were kept.
    directory = root / "demo_20260101-000000"
    before = directory.stat()
    (directory / "metrics.jsonl").write_text(
        json.dumps({"event": "log", "time": 1767225601.0, "loss": 0.25}) + "\n"
    )
    import os

    os.utime(directory, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert next(run_lines(root)).endswith("  0.2500")


def test_a_cache_of_the_layout_before_is_not_read(project_dir):
    write(project_dir, "demo_20260101-000000", "2026-01-01T00:00:00Z", state="succeeded")
    backdate(project_dir)
    root = RunStore(project_dir).root
    fresh = list(run_lines(root))
    data = json.loads((root / ".listing.json").read_text())
    entry = data["runs"]["demo_20260101-000000"]
    key, fields = entry[:4], entry[6:]
    data["version"] = 2  # its entries were [key, [listed, note, figures, line]]
    data["runs"]["demo_20260101-000000"] = [
        key, [["demo_20260101-000000", *fields[:5]], fields[5], fields[6:11], "  forged"]
    ]
    (root / ".listing.json").write_text(json.dumps(data))
    assert list(run_lines(root)) == fresh


def test_a_cached_row_names_only_a_valid_run_id(project_dir):
    """A run directory whose name is no run id is never listed, even when the cache holds
    a row for it with its stat key (the id was printed raw: terminal escapes, a line)."""
    write(project_dir, "demo_20260101-000000", "2026-01-01T00:00:00Z", state="succeeded")
    backdate(project_dir)
    root = RunStore(project_dir).root
    [fresh] = list(run_lines(root))
    cache_path = root / ".listing.json"
    cache = json.loads(cache_path.read_text())
    evil = "demo\x1b[2J\nerror: fake"
    (root / "demo_20260101-000000").rename(root / evil)
    cache["runs"] = {evil: next(iter(cache["runs"].values()))}
    cache_path.write_text(json.dumps(cache))
    backdate(project_dir)
    folder, record = (root / evil).stat(), (root / evil / "run.json").stat()
    # The key the cache holds made the renamed directory's, as one who wrote both would.
    cache["runs"][evil][:4] = [folder.st_mtime_ns, record.st_ino, record.st_size,
                               record.st_mtime_ns]  # fmt: skip
    cache_path.write_text(json.dumps(cache))
    assert fresh
    assert list(run_lines(root)) == []
