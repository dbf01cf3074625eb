"""Run ids and run records on disk: `runs/<id>/run.json`."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime

import pytest

from overbrainer.errors import UserError
from overbrainer.job.record import Container, JobHandle, RunRecord, RunState, Snapshot
from overbrainer.runs.ids import base_id, check_run_id, slug
from overbrainer.runs.store import RunStore

NOW = datetime(2026, 9, 22, 14, 30, 5, tzinfo=UTC)
BASE = "demo_project_20260922-143005"


def remote(run_id: str) -> str:
    return f"/home/me/overbrainer/runs/{run_id}"


@pytest.fixture
def store(tmp_path):
    return RunStore(tmp_path)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("Demo Project", "demo_project"),
        ("rust--ownership & borrowing!", "rust_ownership_borrowing"),
        ("(Über) 2", "ber_2"),
        ("MiXeD42", "mixed42"),
        ("x" * 50, "x" * 40),
        ("a" + " " * 60 + "b", "a_b"),
        ("!!!", "run"),
        ("_private_", "private"),
        ("x" * 39 + " tail", "x" * 39),
    ],
)
def test_slug(name, expected):
    assert slug(name) == expected


def test_base_id_is_the_slug_and_the_utc_time():
    assert base_id("Demo Project", NOW) == BASE


@pytest.mark.parametrize(
    "run_id", ["../etc", "a/b", "..", ".", "", ".hidden", "-rf", "a\\b", "x\x00", "a..b", "x" * 200]
)
def test_ids_that_could_escape_runs_are_refused(store, run_id):
    with pytest.raises(UserError) as caught:
        store.run_dir(run_id)
    assert str(caught.value).startswith("invalid run id `")
    assert str(caught.value).endswith("`: a run id names a directory in runs/")
    with pytest.raises(UserError):
        store.load(run_id)


def test_an_odd_id_is_shown_escaped_and_cut():
    with pytest.raises(UserError) as caught:
        check_run_id("a/\x1b[31m" + "z" * 100)
    assert str(caught.value) == (
        "invalid run id `a/\\x1b[31m" + "z" * 70 + "`: a run id names a directory in runs/"
    )


def test_create_makes_a_preparing_run(store, tmp_path):
    claimed = []
    record = store.create(
        "Demo Project", "gpu", lambda run_id: claimed.append(run_id) or remote(run_id), NOW
    )
    assert record == RunRecord(
        id=BASE, target="gpu", created="2026-09-22T14:30:05Z", remote_dir=remote(BASE)
    )
    assert record.state is RunState.PREPARING
    assert claimed == [BASE]
    assert store.load(BASE) == record
    assert sorted(p.name for p in (tmp_path / "runs" / BASE).iterdir()) == ["run.json"]


def test_a_project_name_without_letters_still_makes_a_usable_run(store):
    record = store.create("(Test)", "gpu", remote, NOW)
    assert record.id == "test_20260922-143005"  # a letter or digit first, as the reference wants
    assert store.load(record.id) == record
    assert [r.id for r in store.list()] == [record.id]


def test_collisions_take_the_next_suffix(store, tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / BASE).mkdir()
    for suffix in range(2, 8):
        (runs / f"{BASE}_{suffix}").mkdir()
    (runs / BASE / "keep").write_text("someone else's")
    record = store.create("Demo Project", "gpu", remote, NOW)
    assert record.id == f"{BASE}_8"
    assert (runs / BASE / "keep").read_text() == "someone else's"
    assert store.create("Demo Project", "gpu", remote, NOW).id == f"{BASE}_9"


def test_all_suffixes_taken(store, tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / BASE).mkdir()
    for suffix in range(2, 100):
        (runs / f"{BASE}_{suffix}").mkdir()
    with pytest.raises(UserError) as caught:
        store.create("Demo Project", "gpu", remote, NOW)
    assert str(caught.value) == f"runs {BASE} to {BASE}_99 all exist"
    assert not (runs / f"{BASE}_100").exists()


def test_an_id_claimed_on_the_target_moves_to_the_next_suffix(store, tmp_path):
    taken = {BASE, f"{BASE}_2"}
    seen = []

    def claim(run_id: str) -> str:
        seen.append(run_id)
        return "" if run_id in taken else remote(run_id)

    record = store.create("Demo Project", "gpu", claim, NOW)
    assert seen == [BASE, f"{BASE}_2", f"{BASE}_3"]
    assert record.id == f"{BASE}_3"
    # The local directories of the ids taken on the target are released.
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == [f"{BASE}_3"]


def test_a_failing_claim_releases_the_directory(store, tmp_path):
    def claim(run_id: str) -> str:
        raise UserError("cannot reach target `gpu`")

    with pytest.raises(UserError, match="cannot reach target"):
        store.create("Demo Project", "gpu", claim, NOW)
    assert list((tmp_path / "runs").iterdir()) == []


def test_a_claim_no_plugin_answers_is_an_error_not_a_taken_id(store, tmp_path):
    with pytest.raises(UserError, match="no plugin can reserve a run directory on target `gpu`"):
        store.create("Demo Project", "gpu", lambda run_id: None, NOW)
    assert list((tmp_path / "runs").iterdir()) == []


def test_run_json_is_pretty_and_omits_unset_optional_keys(store, tmp_path):
    record = store.create("Demo Project", "gpu", remote, NOW)
    text = (tmp_path / "runs" / BASE / "run.json").read_text()
    assert (
        text
        == json.dumps(
            {
                "id": BASE,
                "target": "gpu",
                "created": "2026-09-22T14:30:05Z",
                "remote_dir": remote(BASE),
                "job": None,
                "state": "preparing",
                "message": None,
                "snapshots": False,
            },
            indent=2,
        )
        + "\n"
    )
    running = record.evolve(
        state=RunState.RUNNING,
        snapshots=True,
        job=JobHandle(dir=remote(BASE), pid=4242, container=Container(engine="docker", name="ob")),
    )
    store.save(running)
    data = json.loads((tmp_path / "runs" / BASE / "run.json").read_text())
    assert data["job"] == {
        "dir": remote(BASE),
        "pid": 4242,
        "container": {"engine": "docker", "name": "ob"},
    }
    assert "snapshot" not in data
    assert "resumed_from" not in data
    stopped = running.evolve(
        state=RunState.STOPPED,
        snapshot=Snapshot(checkpoint="output/checkpoint-40", step=40, reason="deadline"),
        resumed_from="demo_project_20260921-080000",
    )
    store.save(stopped)
    data = json.loads((tmp_path / "runs" / BASE / "run.json").read_text())
    assert data["snapshot"] == {
        "checkpoint": "output/checkpoint-40",
        "step": 40,
        "reason": "deadline",
    }
    assert data["resumed_from"] == "demo_project_20260921-080000"
    assert store.load(BASE) == stopped


def test_save_is_atomic_and_leaves_no_temporary_file(store, tmp_path):
    record = store.create("Demo Project", "gpu", remote, NOW)
    directory = tmp_path / "runs" / BASE
    for step in range(5):
        store.save(record.evolve(message=f"step {step}"))
    assert sorted(p.name for p in directory.iterdir()) == ["run.json"]
    assert store.load(BASE).message == "step 4"


def test_a_failed_save_keeps_the_old_record_and_no_temporary_file(store, tmp_path):
    record = store.create("Demo Project", "gpu", remote, NOW)
    directory = tmp_path / "runs" / BASE
    (directory / "run.json").unlink()
    (directory / "run.json").mkdir()  # rename onto a directory fails
    (directory / "run.json" / "x").write_text("")
    with pytest.raises(UserError, match=rf"^cannot write runs/{BASE}/run.json: Is a directory$"):
        store.save(record)
    assert sorted(p.name for p in directory.iterdir()) == ["run.json"]


@pytest.mark.parametrize(
    ("content", "where"),
    [
        ('{\n  "id": "x",\n  "target": sk-abcdefghijklmnopqrstu\n}\n', "line 3, column 13"),
        ("", "line 1, column 1"),
        ('{"id": "x"', "line 1, column 11"),
    ],
)
def test_a_malformed_record_names_its_path_and_location_only(store, tmp_path, content, where):
    directory = tmp_path / "runs" / BASE
    directory.mkdir(parents=True)
    (directory / "run.json").write_text(content)
    with pytest.raises(UserError) as caught:
        store.load(BASE)
    assert str(caught.value) == f"runs/{BASE}/run.json is not a valid run record ({where})"


def test_a_record_with_wrong_fields_is_not_valid(store, tmp_path):
    directory = tmp_path / "runs" / BASE
    directory.mkdir(parents=True)
    (directory / "run.json").write_text(json.dumps({"id": BASE, "target": "gpu"}))
    with pytest.raises(UserError) as caught:
        store.load(BASE)
    assert (
        str(caught.value)
        == f"runs/{BASE}/run.json is not a valid run record (created: Field required)"
    )


def test_a_record_naming_another_run_is_not_valid(store, tmp_path):
    store.create("Demo Project", "gpu", remote, NOW)
    other = tmp_path / "runs" / "other"
    other.mkdir()
    (other / "run.json").write_bytes((tmp_path / "runs" / BASE / "run.json").read_bytes())
    with pytest.raises(UserError) as caught:
        store.load("other")
    assert (
        str(caught.value) == "runs/other/run.json is not a valid run record (id: names another run)"
    )


def test_a_symlinked_record_is_refused(store, tmp_path):
    store.create("Demo Project", "gpu", remote, NOW)
    other = tmp_path / "runs" / "other"
    other.mkdir()
    (other / "run.json").symlink_to(tmp_path / "runs" / BASE / "run.json")
    with pytest.raises(UserError) as caught:
        store.load("other")
    assert str(caught.value) == "runs/other/run.json is a symbolic link: refusing to read it"


def test_no_such_run(store):
    with pytest.raises(UserError) as caught:
        store.load("nothing_here")
    assert str(caught.value) == "no run nothing_here in runs/"


def test_saving_keeps_the_mode_of_run_json(store, tmp_path):
    previous = os.umask(0o002)
    try:
        record = store.create("Demo Project", "gpu", remote, NOW)
        path = tmp_path / "runs" / BASE / "run.json"
        assert path.stat().st_mode & 0o777 == 0o664  # a new file: what the umask gives
        path.chmod(0o640)
        store.save(record.evolve(message="later"))
        assert path.stat().st_mode & 0o777 == 0o640
    finally:
        os.umask(previous)


def test_a_new_run_is_never_made_through_a_link_out_of_the_project(tmp_path):
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir()
    elsewhere.mkdir()
    (project / "runs").symlink_to(elsewhere)
    with pytest.raises(UserError) as caught:
        RunStore(project).create("Demo Project", "gpu", remote, NOW)
    assert caught.value.message == (
        "runs is a symbolic link leading out of the project: refusing to use it"
    )
    assert list(elsewhere.iterdir()) == []


def test_fields_this_version_does_not_know_are_tolerated(store, tmp_path):
    directory = tmp_path / "runs" / BASE
    directory.mkdir(parents=True)
    (directory / "run.json").write_text(json.dumps({
        "id": BASE, "target": "gpu", "created": "2026-09-22T14:30:05Z", "remote_dir": "/w",
        "job": {"dir": "/w", "pid": 42, "container": None, "gpu_hours": 1.5},
        "state": "running", "message": None, "pod": {"id": "k3x9"},
    }))
    record = store.load(BASE)
    assert (record.state, record.job.pid) == ("running", 42)


def test_artifacts_not_brought_home_are_a_field_of_the_record(store, tmp_path):
    record = store.create("Demo Project", "gpu", remote, NOW)
    failed = record.evolve(
        state=RunState.FAILED, message="the job exited with code 3", artifacts_missing=True
    )
    store.save(failed)
    data = json.loads((tmp_path / "runs" / BASE / "run.json").read_text())
    assert data["artifacts_missing"] is True
    assert store.load(BASE).artifacts_missing
    settled = store.load(BASE).evolve(state=RunState.FAILED, message=None, artifacts_missing=False)
    store.save(settled)
    data = json.loads((tmp_path / "runs" / BASE / "run.json").read_text())
    assert "artifacts_missing" not in data  # unset: omitted, as the other optional keys


@pytest.mark.parametrize(
    ("message", "missing"),
    [
        ("the job exited with code 3 (artifacts not retrieved: connection lost)", True),
        ("the job exited with code 3 (see runs/x/job.log)", False),
        (None, False),
    ],
)
def test_a_record_written_before_the_field_reads_and_saves_as_it_was(
    store, tmp_path, message, missing
):
    directory = tmp_path / "runs" / BASE
    directory.mkdir(parents=True)
    old = {
        "id": BASE, "target": "gpu", "created": "2026-09-22T14:30:05Z", "remote_dir": "/w",
        "job": {"dir": "/w", "pid": 42, "container": None},
        "state": "failed", "message": message, "snapshots": False,
    }  # fmt: skip
    text = json.dumps(old, indent=2) + "\n"
    (directory / "run.json").write_text(text)
    record = store.load(BASE)
    assert record.artifacts_missing is missing  # an old record said it in its message alone
    if not missing:
        store.save(record)
        assert (directory / "run.json").read_text() == text
