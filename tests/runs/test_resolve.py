"""Naming a run: `latest`, an exact id or a unique prefix, wherever a command takes a run id."""

from __future__ import annotations

from tests.helpers.run_records import write_run

OLD = "demo_20260921-080000"
NEW = "demo_20260922-143005"
OTHER = "side_20260920-100000"


def _runs(project_dir):
    write_run(project_dir, OLD, "2026-09-21T08:00:00Z", "cancelled")
    write_run(project_dir, NEW, "2026-09-22T14:30:05Z", "failed", message="the job exited")
    write_run(project_dir, OTHER, "2026-09-20T10:00:00Z", "cancelled")


def test_latest_and_a_prefix_name_runs_in_runs_show(run_cli, project_dir):
    _runs(project_dir)
    latest = run_cli("runs", "show", "latest")
    assert latest.exit_code == 0, latest.stderr
    assert latest.stdout.startswith(f"{NEW}  failed")
    assert run_cli("runs", "show").stdout == latest.stdout  # the default
    prefix = run_cli("runs", "show", "side")
    assert prefix.exit_code == 0, prefix.stderr
    assert prefix.stdout.startswith(f"{OTHER}  cancelled")


def test_an_ambiguous_prefix_lists_the_runs_it_could_name(run_cli, project_dir):
    _runs(project_dir)
    result = run_cli("runs", "show", "demo_")
    assert result.exit_code == 1
    assert result.stderr == (
        f"error: `demo_` names more than one run ({OLD}, {NEW}): give more of the id\n"
    )


def test_an_unknown_name_says_there_is_no_such_run(run_cli, project_dir):
    _runs(project_dir)
    result = run_cli("train", "attach", "zzz")
    assert result.exit_code == 1
    assert result.stderr == "error: no run zzz in runs/\n"


def test_latest_with_no_run(run_cli):
    result = run_cli("runs", "logs")
    assert result.exit_code == 1
    assert result.stderr == "error: no run in runs/ yet: `latest` names none\n"


def test_runs_logs_defaults_to_the_latest_run(run_cli, project_dir):
    _runs(project_dir)
    (project_dir / "runs" / NEW / "job.log").write_text("newest\n")
    (project_dir / "runs" / OLD / "job.log").write_text("older\n")
    assert run_cli("runs", "logs").stdout == "newest\n"
    assert run_cli("runs", "logs", "demo_20260921").stdout == "older\n"


def test_train_commands_take_a_prefix_and_latest(run_cli, project_dir):
    _runs(project_dir)
    cancel = run_cli("train", "cancel", "side")
    assert cancel.exit_code == 1
    assert cancel.stderr == f"error: run {OTHER} already ended: cancelled\n"
    attach = run_cli("train", "attach", "latest")
    assert attach.stdout.startswith(f"train: run {NEW} failed")
    stop = run_cli("train", "stop", "demo_20260921")
    assert stop.stderr == f"error: run {OLD} has not started: there is no job to snapshot yet\n"


def test_resume_from_takes_a_prefix(run_cli, project_dir):
    _runs(project_dir)
    result = run_cli("train", "--resume-from", "demo_2026092")
    assert result.exit_code == 1
    assert "names more than one run" in result.stderr


def test_export_push_and_compare_resolve_their_run(run_cli, project_dir):
    _runs(project_dir)
    for args in (("export", "nope"), ("push", "nope"), ("compare", "--run", "nope")):
        result = run_cli(*args)
        assert result.stderr == "error: no run nope in runs/\n", args


def test_an_exact_id_wins_over_a_prefix(run_cli, project_dir):
    _runs(project_dir)
    write_run(project_dir, f"{OTHER}_2", "2026-09-20T10:00:01Z", "cancelled")
    result = run_cli("runs", "show", OTHER)
    assert result.stdout.startswith(f"{OTHER}  cancelled")
