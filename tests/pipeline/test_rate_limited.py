"""A stage against a loopback provider that admits so many requests a second and refuses
the rest with a 429, in OpenAI's and Anthropic's headers."""

from __future__ import annotations

import json

import pytest

from pipeline_data import PIPELINE_CONFIG, lines, seed_questions


def limited_project(run_cli, project_dir, count: int, concurrency: int = 64) -> list[dict]:
    config = PIPELINE_CONFIG.replace("concurrency = 4", f"concurrency = {concurrency}")
    (project_dir / "overbrainer.toml").write_text(config.replace("max_retries = 2",
                                                                 "max_retries = 3"))
    texts = [f"question {n} on moves?" for n in range(count)]
    return seed_questions(project_dir, {("ownership", "moves"): texts})


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
def test_every_question_is_answered_at_the_providers_pace(run_cli, project_dir, provider,
                                                          dialect):
    questions = limited_project(run_cli, project_dir, 180)
    bucket = provider.limit(60, dialect=dialect)
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    assert len(lines(project_dir, "answers.jsonl")) == len(questions)
    assert bucket.admitted == len(questions)
    assert bucket.refused <= 0.1 * len(questions)  # the goal is 5%: benchmarks/ratelimit.py
    assert "(paced by the provider: " in result.stderr
    if bucket.refused:
        assert (f"; {bucket.refused} request(s) refused by the rate limit (429), waited out"
                in result.stdout)
        history = (project_dir / ".overbrainer" / "history.jsonl").read_text().splitlines()
        assert json.loads(history[-1])["rate_limited"] == bucket.refused


def test_a_token_limit_is_kept_too(run_cli, project_dir, provider):
    questions = limited_project(run_cli, project_dir, 60, concurrency=16)
    # 30 tokens a reply: 900 tokens a second is 30 requests a second.
    bucket = provider.limit(1000, token_rate=900, token_burst=900)
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    assert len(lines(project_dir, "answers.jsonl")) == len(questions)
    assert bucket.refused <= 0.1 * len(questions)


def test_a_stage_with_no_limit_says_nothing_of_one(run_cli, project_dir, provider):
    limited_project(run_cli, project_dir, 20)
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    assert "paced" not in result.stderr
    assert "429" not in result.stdout
    history = (project_dir / ".overbrainer" / "history.jsonl").read_text().splitlines()
    assert "rate_limited" not in json.loads(history[-1])
