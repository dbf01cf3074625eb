"""A stage against a loopback provider that admits so many requests a second and refuses
the rest with a 429, in OpenAI's and Anthropic's headers."""

from __future__ import annotations

import json

import pytest
from tests.helpers.pipeline_data import PIPELINE_CONFIG, lines, seed_questions


def limited_project(run_cli, project_dir, count: int, concurrency: int = 64,
                    **settings: str) -> list[dict]:
    """``count`` questions to answer; ``settings``: lines added to the parent role."""
    config = PIPELINE_CONFIG.replace("concurrency = 4", f"concurrency = {concurrency}")
    config = config.replace("max_retries = 2", "max_retries = 3")
    extra = "".join(f"{key} = {value}\n" for key, value in settings.items() if key != "wait")
    config = config.replace("reasoning = true\n", f"reasoning = true\n{extra}")
    if "wait" in settings:
        config += f"max_wait_s = {settings['wait']}\n"
    (project_dir / "overbrainer.toml").write_text(config)
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
    assert "(paced by the provider: 60/s)" in result.stderr  # the limit, in its own unit
    if bucket.refused:
        assert (f"; {bucket.refused} request(s) refused by the rate limit (429), waited out"
                in result.stdout)
        history = (project_dir / ".overbrainer" / "history.jsonl").read_text().splitlines()
        assert json.loads(history[-1])["rate_limited"] == bucket.refused


@pytest.mark.parametrize("dialect", ["openai", "anthropic", "litellm"])
def test_a_token_limit_is_kept_at_the_prompt_plus_max_tokens(run_cli, project_dir, provider,
                                                             dialect):
    questions = limited_project(run_cli, project_dir, 60, concurrency=16, max_tokens="100")
    # Each request is charged ~108 tokens at admission (its prompt and max_tokens), though
    # its reply uses 30: 2,200 tokens a second is 20 requests a second.
    bucket = provider.limit(1000, token_rate=2200, token_burst=2200, dialect=dialect,
                            charge="reserved")
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    assert len(lines(project_dir, "answers.jsonl")) == len(questions)
    # Without a reset the refill is learnt from what is admitted, which a loaded machine
    # (2 cores, CI beside other jobs) makes noisy: 13 of 60 refused was seen once there.
    # The goal itself (5%) is measured by benchmarks/ratelimit.py.
    assert bucket.refused <= (0.3 if dialect == "litellm" else 0.1) * len(questions)
    assert "(paced by the provider: 2200 tokens/s)" in result.stderr or dialect == "litellm"


def test_a_limit_without_a_reset_is_kept(run_cli, project_dir, provider):
    """LiteLLM's dialect: limit and remaining, no reset, 429s that tell no wait."""
    questions = limited_project(run_cli, project_dir, 180)
    bucket = provider.limit(60, dialect="litellm", bare_429=True)
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    assert len(lines(project_dir, "answers.jsonl")) == len(questions)
    assert bucket.refused <= 0.1 * len(questions)  # the goal is 5%: benchmarks/ratelimit.py
    assert "(paced by the provider: 60/s)" in result.stderr


def test_a_window_that_empties_at_once_is_waited_for_as_the_gateway_says(run_cli, project_dir,
                                                                         provider):
    """LiteLLM's per-minute counters (a 1 s window here) and its `llm_provider-retry-after`."""
    questions = limited_project(run_cli, project_dir, 9, concurrency=4)
    bucket = provider.limit(3, dialect="litellm", window_s=1.0)
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    assert len(lines(project_dir, "answers.jsonl")) == len(questions)
    assert bucket.refused <= 4  # one of the first 4 sent, then one a window at most
    assert "waiting 1.0s: the provider's rate limit sets the pace" in result.stderr


def test_a_limit_no_request_passes_stops_without_claiming_the_provider_asked(
        run_cli, project_dir, provider):
    limited_project(run_cli, project_dir, 4, wait="1")
    provider.limit(0.001, burst=0, dialect="litellm", bare_429=True)
    result = run_cli("answers")
    assert result.exit_code == 1
    assert ("(pipeline.max_wait_s = 1), the provider saying nothing of when to come back; "
            "run again later") in result.stderr
    assert "asks for" not in result.stderr
    assert "(the provider said not how long)" in result.stderr
    assert "refused by the rate limit (429), the stage stopped waiting" in result.stdout
    assert "waited out" not in result.stdout


def test_a_token_limit_below_max_tokens_stops_at_once(run_cli, project_dir, provider):
    limited_project(run_cli, project_dir, 4, max_tokens="4096")
    provider.limit(1000, token_rate=100, token_burst=1000, dialect="litellm", bare_429=True,
                   charge="reserved")
    result = run_cli("answers")
    assert result.exit_code == 1
    assert ("a request may use 4096 tokens (max_tokens) and the provider's limit is 1000 "
            "tokens: no wait lets it through; lower the role's max_tokens or raise the limit"
            ) in result.stderr
    assert len(provider.chats()) <= 4


def test_a_stage_with_no_limit_says_nothing_of_one(run_cli, project_dir, provider):
    limited_project(run_cli, project_dir, 20)
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    assert "paced" not in result.stderr
    assert "429" not in result.stdout
    history = (project_dir / ".overbrainer" / "history.jsonl").read_text().splitlines()
    assert "rate_limited" not in json.loads(history[-1])
