"""``[budget] max_usd`` kept by the stages, against the loopback provider: no request starts
past it, what was in flight is saved, and a rerun with a raised budget resumes."""

from __future__ import annotations

import json

from tests.helpers.fake_provider import Reply
from tests.helpers.pipeline_data import PIPELINE_CONFIG, lines, seed_questions

from overbrainer.pipeline.spend import spent

# Every loopback answer costs 10 x $3e-6 + 20 x $4e-6 = $0.00011.
EACH = 0.00011
SMALL_REPLIES = PIPELINE_CONFIG.replace("reasoning = true", "reasoning = true\nmax_tokens = 20")


def configure(project_dir, extra="", concurrency=1):
    config = SMALL_REPLIES.replace("concurrency = 4", f"concurrency = {concurrency}")
    (project_dir / "overbrainer.toml").write_text(config + extra, encoding="utf-8")


def eight_questions(project_dir):
    return seed_questions(project_dir, {("ownership", "moves"): [f"q{n}" for n in range(8)]})


def jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def history(project_dir):
    return jsonl(project_dir / ".overbrainer" / "history.jsonl")


def spend(project_dir):
    """The project's spend as its files say (history, journal, live batches)."""
    return spent(project_dir)


def test_answers_stop_before_the_request_that_could_cross_the_budget(
    run_cli, project_dir, provider
):
    # A request's bound: its prompt's 50 bytes as tokens ($0.00015) and max_tokens 20
    # out ($0.00008): $0.00023. After three answers $0.00017 is left: not enough.
    configure(project_dir, "\n[budget]\nmax_usd = 0.0005\n")
    eight_questions(project_dir)
    result = run_cli("answers")
    assert result.exit_code == 1
    assert len(provider.chats("parent-model")) == 3
    assert len(lines(project_dir, "answers.jsonl")) == 3
    assert result.stdout.startswith("answers: 3 done, 0 skipped, 0 failed, 0 excluded;")
    assert result.stderr.endswith(
        "error: budget: answers stopped before a request (up to $0.0002) that could take "
        "the project past max_usd $0.0005: spent $0.0003 (this stage $0.0003), $0.0002 "
        "left; raise the budget ([budget] max_usd in overbrainer.toml, or `overbrainer run "
        "--max-usd`), then run again: it resumes where it stopped\n"
    )
    [entry] = history(project_dir)
    assert entry["status"] == "failed" and round(entry["cost"], 8) == 3 * EACH
    [counted] = jsonl(project_dir / ".overbrainer" / "requests.jsonl")
    assert counted == {"stage": "answers", "model": "parent-model", "requests": 3,
                       "input_tokens": 30, "output_tokens": 60}
    assert round(spend(project_dir), 8) == 3 * EACH


def test_a_raised_budget_resumes_where_it_stopped(run_cli, project_dir, provider):
    configure(project_dir, "\n[budget]\nmax_usd = 0.0005\n")
    eight_questions(project_dir)
    assert run_cli("answers").exit_code == 1
    # The spend so far counts: $0.00033, then $0.00011 an answer, $0.00023 reserved for each.
    again = run_cli("answers", env={"OVERBRAINER_BUDGET__MAX_USD": "0.0008"})
    assert again.exit_code == 1
    assert again.stdout.startswith("answers: 3 done, 3 skipped,")
    assert "spent $0.0007 (this stage $0.0003), $0.0001 left" in again.stderr
    last = run_cli("answers", env={"OVERBRAINER_BUDGET__MAX_USD": "1"})
    assert last.exit_code == 0, last.stderr
    assert last.stdout.startswith("answers: 2 done, 6 skipped,")
    assert len(provider.chats("parent-model")) == 8  # none asked twice


def test_requests_in_flight_are_reserved_at_their_bound_and_saved(
    run_cli, project_dir, provider
):
    configure(project_dir, "\n[budget]\nmax_usd = 0.0005\n", concurrency=3)
    eight_questions(project_dir)
    provider.on(None, Reply(delay=0.2), times=None)
    result = run_cli("answers")
    assert result.exit_code == 1
    asked = len(provider.chats("parent-model"))
    # Two fit at their bound at once, the third waits for them: never more asked than
    # the budget can pay if every one took its max_tokens.
    assert asked == len(lines(project_dir, "answers.jsonl")) == 3
    assert "spent $0.0003 (this stage $0.0003)" in result.stderr
    assert spend(project_dir) <= 0.0005


def test_a_first_request_too_dear_at_max_tokens_goes_with_them_lowered(
    run_cli, project_dir, provider
):
    # max_tokens 16384 makes a request's bound $0.0657, more than the budget: the first
    # goes with what the budget can pay, the next with room for four times the longest
    # answer (the 256-token floor): the stage learns what answers cost, and ends.
    (project_dir / "overbrainer.toml").write_text(
        PIPELINE_CONFIG + "\n[budget]\nmax_usd = 0.01\n"
    )
    eight_questions(project_dir)
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    caps = [seen.body["max_tokens"] for seen in provider.chats("parent-model")]
    assert caps[0] == 2462  # ($0.01 - 50 tokens in at $3e-6) / $4e-6
    assert set(caps[1:]) <= {256, 2462} and 256 in caps
    assert len(caps) == 8
    assert result.stderr.count("max_tokens lowered") == 1
    assert "requests now go with max_tokens lowered to 2462 (of 16384)" in result.stderr
    assert round(spend(project_dir), 8) == 8 * EACH


def test_the_prices_table_comes_before_the_providers(run_cli, project_dir, provider):
    table = (
        "\n[providers.main.prices]\n"
        '"parent-model" = { input = 30.0, output = 40.0 }\n'  # ten times /models' price
        "\n[budget]\nmax_usd = 0.0025\n"
    )
    configure(project_dir, table)
    eight_questions(project_dir)
    result = run_cli("answers")
    assert result.exit_code == 1
    assert result.stdout.startswith("answers: 1 done,")
    assert result.stdout.rstrip().endswith("cost $0.0011")
    assert "up to $0.0023" in result.stderr


def test_a_budget_needs_a_price(run_cli, project_dir, provider):
    configure(project_dir, "\n[budget]\nmax_usd = 1\n")
    provider.prices.clear()
    eight_questions(project_dir)
    result = run_cli("answers")
    assert result.exit_code == 1
    assert provider.chats() == []
    assert result.stderr.endswith(
        "error: budget: the price of main/parent-model is unknown, so max_usd cannot be kept: "
        "set [providers.main.prices]\n"
    )


def test_run_max_usd_overrides_the_settings(run_cli, project_dir, provider):
    configure(project_dir, "\n[budget]\nmax_usd = 100\n")
    result = run_cli("run", "--max-usd", "0.0001")
    assert result.exit_code == 1
    assert "error: budget: subtopics stopped before a request" in result.stderr
    assert "max_tokens lowered" not in result.stderr  # 256 tokens or none: no list in 27
    assert "past max_usd $0.0001" in result.stderr
    assert provider.chats() == []


def test_a_prices_table_for_every_model_asks_the_provider_for_none(
    run_cli, project_dir, provider
):
    table = (
        "\n[providers.main.prices]\n"
        '"parent-model" = { input = 3.0, output = 4.0 }\n'
        '"gen-model" = { input = 1.0, output = 2.0 }\n'
        "\n[budget]\nmax_usd = 1\n"
    )
    configure(project_dir, table)
    eight_questions(project_dir)
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    assert [s.path for s in provider.requests if s.method == "GET"] == []  # no price lookup
