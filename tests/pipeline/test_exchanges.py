"""``.overbrainer/exchanges.jsonl`` and ``overbrainer log``: every prompt and reply of the
stages kept, redacted, rotated, never written through a link."""

from __future__ import annotations

import json
import stat

from tests.helpers.fake_provider import Reply
from tests.helpers.pipeline_data import API_KEY, seed_questions

from overbrainer.pipeline import exchanges


def kept(project_dir):
    path = project_dir / ".overbrainer" / "exchanges.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_every_answer_is_kept_with_its_prompt_and_reply(run_cli, project_dir, provider):
    seed_questions(project_dir, {("ownership", "moves"): ["q1", "q2"]})
    provider.on(lambda seen: seen.prompt == "q2",
                Reply({"error": {"message": "busy"}}, status=500), times=None)
    result = run_cli("answers")
    assert result.exit_code == 1
    lines = sorted(kept(project_dir), key=lambda line: line["messages"][-1]["content"])
    assert [line["stage"] for line in lines] == ["answers", "answers"]
    ok, failed = lines
    assert ok["reply"] == "The answer to: q1" and ok["failure"] is None
    assert ok["reasoning"] == "Thinking about: q1"
    assert ok["messages"] == [{"role": "system", "content": "system|ownership"},
                              {"role": "user", "content": "q1"}]
    assert failed["reply"] is None and failed["failure"] == "HTTP 500: busy"
    path = project_dir / ".overbrainer" / "exchanges.jsonl"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert API_KEY not in path.read_text()

    shown = run_cli("log")
    assert shown.exit_code == 0, shown.stderr
    assert shown.stdout.count("  answers  ") == 2
    assert "parent-model  failed: HTTP 500: busy" in shown.stdout
    assert "  < The answer to: q1" in shown.stdout
    only = run_cli("log", "--failed", "--json")
    [line] = [json.loads(text) for text in only.stdout.splitlines()]
    assert line["failure"] == "HTTP 500: busy"


def test_an_excluded_answer_is_a_failed_exchange(run_cli, project_dir, provider):
    from tests.helpers.fake_provider import openai_completion

    seed_questions(project_dir, {("ownership", "moves"): ["q1"]})
    provider.on(None, Reply(openai_completion("cut", finish="length", reasoning="r")))
    assert run_cli("answers").exit_code == 0
    [line] = kept(project_dir)
    assert line["failure"] == "truncated"


def test_a_secret_in_a_reply_is_never_written(run_cli, project_dir, provider):
    from tests.helpers.fake_provider import openai_completion

    seed_questions(project_dir, {("ownership", "moves"): ["q1"]})
    provider.on(None, Reply(openai_completion(f"my key is {API_KEY}", reasoning="r")))
    assert run_cli("answers").exit_code == 0
    text = (project_dir / ".overbrainer" / "exchanges.jsonl").read_text()
    assert API_KEY not in text
    assert "my key is ***" in text


def test_the_log_is_rotated_and_both_files_are_read(project_dir, monkeypatch):
    monkeypatch.setattr(exchanges, "MAX_BYTES", 2000)
    log = exchanges.ExchangeLog(project_dir)
    for n in range(40):
        log.record("answers", f"q{n}", "m", [{"role": "user", "content": f"question {n}"}],
                   "x" * 50)
    rotated = project_dir / ".overbrainer" / "exchanges.1.jsonl"
    assert rotated.stat().st_size <= 2000
    items = [entry["item"] for entry in exchanges.read_exchanges(project_dir)]
    assert items[-1] == "q39"
    assert items == sorted(items, key=lambda item: int(item[1:]))  # oldest first
    assert len(items) < 40  # what was rotated twice is gone


def test_a_linked_log_is_not_written_through(run_cli, project_dir, provider, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("precious")
    (project_dir / ".overbrainer").mkdir(exist_ok=True)
    (project_dir / ".overbrainer" / "exchanges.jsonl").symlink_to(outside)
    seed_questions(project_dir, {("ownership", "moves"): ["q1"]})
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    assert outside.read_text() == "precious"


def test_log_with_nothing_kept_says_so(run_cli):
    result = run_cli("log", "--failed", "--stage", "answers")
    assert result.exit_code == 0
    assert result.stdout == "no exchange kept that failed for stage answers\n"


def test_a_reply_orjson_refuses_is_written_as_the_standard_library_writes_it(project_dir):
    log = exchanges.ExchangeLog(project_dir)
    log.record("answers", "q1", "m", [{"role": "user", "content": "é?"}], "half \ud800 pair")
    log.record("answers", "q2", "m", [{"role": "user", "content": "é?"}], "API_KEY=abc é")
    log.close()
    first, second = kept(project_dir)
    assert first["reply"] == "half ? pair"
    assert first["messages"] == [{"role": "user", "content": "é?"}]
    assert second["reply"] == "API_KEY=*** é"
    path = project_dir / ".overbrainer" / "exchanges.jsonl"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_each_line_is_dated_to_its_second_in_utc(project_dir, monkeypatch):
    from datetime import UTC, datetime

    clock = [1_700_000_000.2]
    monkeypatch.setattr(exchanges.time, "time", lambda: clock[0])
    log = exchanges.ExchangeLog(project_dir)
    instants = [1_700_000_000.2, 1_700_000_000.9, 1_700_000_001.0, 1_700_000_059.999,
                1_700_003_600.5, 1_700_003_600.7]
    for n, instant in enumerate(instants):
        clock[0] = instant
        log.record("answers", f"q{n}", "m", [{"role": "user", "content": "q"}], "a")
    log.close()
    dated = [entry["at"] for entry in exchanges.read_exchanges(project_dir)]
    assert dated == [
        datetime.fromtimestamp(int(t), UTC).strftime("%Y-%m-%dT%H:%M:%SZ") for t in instants
    ]
    assert dated[:3] == ["2023-11-14T22:13:20Z", "2023-11-14T22:13:20Z", "2023-11-14T22:13:21Z"]


def test_log_names_an_exchange_log_that_is_a_directory(run_cli, project_dir):
    (project_dir / ".overbrainer" / "exchanges.jsonl").mkdir(parents=True)
    result = run_cli("log")
    assert result.exit_code == 1
    assert result.stderr == (
        "error: .overbrainer/exchanges.jsonl is not a regular file: move it away, then try "
        "again\n"
    )
