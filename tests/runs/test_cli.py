"""`runs ls` and `runs logs`, read from the project directory alone."""

from __future__ import annotations

import pytest
from tests.helpers.run_records import write_run


def test_runs_ls_lists_oldest_first_padded(run_cli, project_dir):
    write_run(project_dir, "demo_20260922-143005", "2026-09-22T14:30:05Z", "running", "pod")
    write_run(project_dir, "demo_20260921-080000_12", "2026-09-21T08:00:00Z", "failed")
    write_run(
        project_dir,
        "demo_20260922-090000",
        "2026-09-22T09:00:00Z",
        "stopped",
        snapshot={"checkpoint": "output/checkpoint-120", "step": 120, "reason": "deadline"},
    )
    write_run(project_dir, "demo_20260921-080000", "2026-09-21T08:00:00Z", "cancelled", "local")
    result = run_cli("runs", "ls")
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout == (
        "RUN                      STATE      TARGET  CREATED               SNAPSHOT\n"
        "demo_20260921-080000     cancelled  local   2026-09-21T08:00:00Z\n"
        "demo_20260921-080000_12  failed     gpu     2026-09-21T08:00:00Z\n"
        "demo_20260922-090000     stopped    gpu     2026-09-22T09:00:00Z"
        "  step 120 (deadline): partial model in output/\n"
        "demo_20260922-143005     running    pod     2026-09-22T14:30:05Z\n"
    )


def test_runs_ls_skips_unreadable_records_with_a_warning(run_cli, project_dir):
    write_run(project_dir, "good_20260922-143005", "2026-09-22T14:30:05Z")
    bad = project_dir / "runs" / "bad_20260922-143005"
    bad.mkdir()
    (bad / "run.json").write_text('{"id": "bad", hf_abcdefghijklmnopqrstuv')
    (project_dir / "runs" / "no_record_yet").mkdir()
    (project_dir / "runs" / ".hidden").mkdir()
    (project_dir / "runs" / "a file").write_text("")
    result = run_cli("runs", "ls")
    assert result.exit_code == 0
    assert result.stdout == (
        "RUN                   STATE      TARGET  CREATED\n"
        "good_20260922-143005  succeeded  gpu     2026-09-22T14:30:05Z\n"
    )
    assert result.stderr == (
        "warning: skipping run bad_20260922-143005: runs/bad_20260922-143005/run.json "
        "is not a valid run record (line 1, column 15)\n"
    )


def test_runs_ls_with_no_runs_prints_nothing(run_cli):
    result = run_cli("runs", "ls")
    assert (result.exit_code, result.stdout, result.stderr) == (0, "", "")


def test_runs_ls_needs_no_valid_configuration(run_cli, project_dir):
    (project_dir / "overbrainer.toml").write_text("not = [valid")
    write_run(project_dir, "good_20260922-143005", "2026-09-22T14:30:05Z")
    result = run_cli("runs", "ls")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[1].startswith("good_20260922-143005  succeeded")


RUN = "demo_20260922-143005"

PEM = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
    "QyNTUxOQAAACDxA6GmR0cyAfvQZ2VtcmlkbGVrZXlzZWNyZXRwYXJ0aGVyZQAAAJgAAAAA\n"
    "-----END OPENSSH PRIVATE KEY-----\n"
)


@pytest.fixture
def job_log(project_dir):
    directory = write_run(project_dir, RUN, "2026-09-22T14:30:05Z")
    return directory / "job.log"


def test_runs_logs_redacts_secrets(run_cli, job_log):
    job_log.write_text(
        "starting\n"
        "token hf_abcdefghijklmnopqrstuvwx in use\n"
        "openai key sk-proj-abcdefghijklmnopqrstuvwx\n"
        "HF_TOKEN=plainsecretvalue other=fine\n"
        'export OPENAI_API_KEY="quoted secret value" done\n'
        "Authorization: Bearer abcdefghijklmnop\n"
        "before key\n" + PEM + "after key\n"
    )
    result = run_cli("runs", "logs", RUN)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == (
        "starting\n"
        "token *** in use\n"
        "openai key ***\n"
        "HF_TOKEN=*** other=fine\n"
        "export OPENAI_API_KEY=*** done\n"
        "Authorization: Bearer ***\n"
        "before key\n"
        "***\n***\n***\n***\n"
        "after key\n"
    )


def test_runs_logs_hides_registered_secrets(run_cli, job_log):
    from overbrainer.redact import register_secret

    register_secret("correct-horse-battery")
    job_log.write_text("the password is correct-horse-battery\n")
    result = run_cli("runs", "logs", RUN)
    assert result.stdout == "the password is ***\n"


def test_runs_logs_makes_control_characters_printable(run_cli, job_log):
    job_log.write_bytes(
        b"\x1b[31mred\x1b[0m text\n"
        b"bell\x07 and nul\x00\n"
        b"progress 10%\rprogress 50%\rprogress 100%\n"
        b"crlf line\r\n"
        b"tab\tkept\n"
        b"title \x1b]0;pwned\x07 and csi \xc2\x9b31m c1\n"
        b"bad utf8 \xff\n"
    )
    result = run_cli("runs", "logs", RUN)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == (
        "red text\n"
        "bell\\x07 and nul\\x00\n"
        "progress 100%\n"
        "crlf line\n"
        "tab\tkept\n"
        "title \\x1b]0;pwned\\x07 and csi \\x9b31m c1\n"
        "bad utf8 \ufffd\n"
    )


def test_runs_logs_tail(run_cli, job_log):
    job_log.write_text("".join(f"line {n}\n" for n in range(1, 11)))
    result = run_cli("runs", "logs", RUN, "--tail", "3")
    assert result.stdout == "line 8\nline 9\nline 10\n"
    result = run_cli("runs", "logs", RUN, "--tail", "30")
    assert result.stdout.splitlines()[0] == "line 1"


def test_runs_logs_tail_inside_a_private_key_still_hides_it(run_cli, job_log):
    job_log.write_text("start\n" + PEM + "done\n")
    result = run_cli("runs", "logs", RUN, "--tail", "3")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "***\n***\ndone\n"


def test_runs_logs_tail_must_be_positive(run_cli, job_log):
    job_log.write_text("x\n")
    result = run_cli("runs", "logs", RUN, "--tail", "0")
    assert result.exit_code == 2
    assert "Invalid value for '--tail'" in result.stderr


def test_runs_logs_refuses_a_symlinked_job_log(run_cli, job_log, tmp_path):
    (tmp_path / "secret.txt").write_text("sk-abcdefghijklmnopqrstuvwx\n")
    job_log.symlink_to(tmp_path / "secret.txt")
    result = run_cli("runs", "logs", RUN)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == f"error: runs/{RUN}/job.log is a symbolic link: refusing to read it\n"


def test_runs_logs_before_the_log_exists(run_cli, job_log):
    result = run_cli("runs", "logs", RUN)
    assert result.exit_code == 1
    assert result.stderr == f"error: runs: no job.log for run {RUN} yet\n"


def test_runs_logs_of_an_unknown_run(run_cli):
    result = run_cli("runs", "logs", "nope_20260922-143005")
    assert result.exit_code == 1
    assert result.stderr == "error: no run nope_20260922-143005 in runs/\n"


@pytest.mark.parametrize("run_id", ["../project", "a/b", ".."])
def test_runs_logs_refuses_ids_that_escape_runs(run_cli, run_id):
    result = run_cli("runs", "logs", run_id)
    assert result.exit_code == 1
    assert (
        result.stderr == f"error: invalid run id `{run_id}`: a run id names a directory in runs/\n"
    )


OUT_OF_PROJECT = "error: runs is a symbolic link leading out of the project: refusing to use it\n"


def test_a_runs_directory_linked_out_of_the_project_is_refused(run_cli, project_dir, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    write_run(elsewhere.parent / "fake", "demo_20260101-000000", "2026-01-01T00:00:00Z")
    (elsewhere.parent / "fake" / "runs").rename(elsewhere)
    (elsewhere / "demo_20260101-000000" / "job.log").write_text("secret log\n")
    (project_dir / "runs").symlink_to(elsewhere)
    for args in (["runs", "ls"], ["runs", "logs", "demo_20260101-000000"],
                 ["train", "attach", "demo_20260101-000000"],
                 ["train", "cancel", "demo_20260101-000000"]):
        result = run_cli(*args)
        assert result.exit_code == 1, args
        assert result.stderr == OUT_OF_PROJECT, args
        assert result.stdout == "", args


def test_a_runs_directory_linked_inside_the_project_is_used(run_cli, project_dir):
    write_run(project_dir / "store", "demo_20260101-000000", "2026-01-01T00:00:00Z")
    (project_dir / "runs").symlink_to(project_dir / "store" / "runs")
    result = run_cli("runs", "ls")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[1].startswith("demo_20260101-000000  succeeded")


def test_a_run_directory_that_is_a_link_is_refused(run_cli, project_dir, tmp_path):
    write_run(tmp_path, "demo_20260101-000000", "2026-01-01T00:00:00Z")
    (tmp_path / "runs" / "demo_20260101-000000" / "job.log").write_text("other log\n")
    (project_dir / "runs").mkdir()
    (project_dir / "runs" / "demo_20260101-000000").symlink_to(
        tmp_path / "runs" / "demo_20260101-000000"
    )
    for args in (["runs", "logs", "demo_20260101-000000"],
                 ["train", "attach", "demo_20260101-000000"]):
        result = run_cli(*args)
        assert result.exit_code == 1, args
        assert result.stderr == (
            "error: runs/demo_20260101-000000 is a symbolic link: refusing to use it\n"
        ), args


def completions(project_dir, incomplete="demo"):
    import click

    from overbrainer.cli import cli
    from overbrainer.cli.complete import complete_run_id

    ctx = click.Context(cli)
    ctx.params = {"project_dir": str(project_dir)}
    return [(item.value, item.help) for item in complete_run_id(ctx, None, incomplete)]


def test_run_id_completion_escapes_records_and_follows_no_link_out(project_dir, tmp_path):
    write_run(project_dir, "demo_20260101-000000", "2026-01-01T00:00:00Z", target="gpu\x1b[2J")
    assert completions(project_dir) == [("demo_20260101-000000", r"succeeded on gpu\x1b[2J")]
    (project_dir / "runs").rename(tmp_path / "elsewhere")
    (project_dir / "runs").symlink_to(tmp_path / "elsewhere")
    assert completions(project_dir) == []


def test_a_tail_beyond_the_bound_is_an_option_error_not_a_crash(run_cli):
    result = run_cli("runs", "logs", "demo-20260101-000000", "--tail", "99999999999999999999")
    assert result.exit_code == 2
    assert "Invalid value for '--tail': 99999999999999999999 is not in the range 1<=x<=1000000" in (
        result.stderr
    )
    assert "Traceback" not in result.stderr and "OverflowError" not in result.stderr


def test_run_id_completion_offers_latest(project_dir):
    assert completions(project_dir, "l") == []  # no run: nothing to name
    write_run(project_dir, "demo_20260101-000000", "2026-01-01T00:00:00Z")
    assert completions(project_dir, "l") == [("latest", "the newest run")]
    assert completions(project_dir, "") == [
        ("latest", "the newest run"),
        ("demo_20260101-000000", "succeeded on gpu"),
    ]


def test_runs_logs_shows_a_line_past_the_bound_cut_and_goes_on(run_cli, job_log):
    """A progress bar's carriage returns and no newline for hours: one line, never read
    whole (it took the whole log into memory): shown cut, and the lines after it."""
    from overbrainer.runs.logs import LOG_LINE

    job_log.write_bytes(b"start\n" + b"step 1/9\r" * (LOG_LINE // 4) + b"\ndone\n")
    result = run_cli("runs", "logs", RUN)
    assert result.exit_code == 0, result.stderr
    first, cut, last = result.stdout.splitlines()
    assert (first, last) == ("start", "done")
    assert cut.endswith("[... line cut: longer than the bound]")
