"""Prices from where the provider keeps them, against the loopback provider: OpenRouter's
``/models`` ``pricing``, LiteLLM's ``/model/info`` and the cost a reply states, the prices
table first (and then no look-up), a look-up refused by a 429 waited out."""

from __future__ import annotations

import json

from tests.helpers.fake_provider import Reply
from tests.helpers.pipeline_data import PIPELINE_CONFIG, seed_questions

# Every loopback answer uses 10 tokens in and 20 out; the parent's listed price is $3e-6
# in and $4e-6 out: $0.00011 an answer.
LISTED = 10 * 3e-6 + 20 * 4e-6
LISTING = ("models?detailed=true", "model/info")


def four_questions(project_dir):
    seed_questions(project_dir, {("ownership", "moves"): [f"q{n}" for n in range(4)]})


def journal_costs(project_dir):
    path = project_dir / ".overbrainer" / "spend.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    return [record["cost"] for record in records if "paid" in record]


def history_cost(project_dir):
    path = project_dir / ".overbrainer" / "history.jsonl"
    [entry] = [json.loads(line) for line in path.read_text().splitlines()]
    return entry["cost"]


def asked(provider):
    return [seen.path for seen in provider.requests if seen.method == "GET"]


def test_prices_from_litellm_s_model_info(run_cli, project_dir, provider):
    provider.listing = "litellm"  # /models lists no price, /model/info does
    four_questions(project_dir)
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.rstrip().endswith(f"cost ${4 * LISTED:.4f}")
    assert journal_costs(project_dir) == [round(LISTED, 9)] * 4
    assert asked(provider) == list(LISTING)


def test_openrouter_s_pricing_needs_no_second_look_up(run_cli, project_dir, provider):
    four_questions(project_dir)
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.rstrip().endswith(f"cost ${4 * LISTED:.4f}")
    assert asked(provider) == ["models?detailed=true"]


def test_a_provider_with_no_prices_anywhere_leaves_the_cost_unknown(
    run_cli, project_dir, provider
):
    provider.prices.clear()
    four_questions(project_dir)
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.rstrip().endswith("cost unknown")
    assert journal_costs(project_dir) == [None] * 4
    assert asked(provider) == list(LISTING)


def test_the_cost_a_reply_states_wins_over_the_listed_price(run_cli, project_dir, provider):
    provider.listing = "litellm"
    stated = ["0.25", "0.5", "nan", "-1"]  # the last two say nothing usable: listed price
    provider.on(None, lambda seen: Reply(headers={"x-litellm-response-cost": stated.pop(0)}),
                times=None)
    four_questions(project_dir)
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    total = 0.25 + 0.5 + 2 * LISTED
    assert result.stdout.rstrip().endswith(f"cost ${total:.4f}")
    assert sorted(journal_costs(project_dir)) == sorted(
        [0.25, 0.5, round(LISTED, 9), round(LISTED, 9)]
    )
    assert round(history_cost(project_dir), 9) == round(total, 9)


def test_a_stated_cost_needs_no_listed_price(run_cli, project_dir, provider):
    provider.prices.clear()
    provider.on(None, Reply(headers={"x-litellm-response-cost": "0.001"}), times=None)
    four_questions(project_dir)
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.rstrip().endswith("cost $0.0040")
    assert journal_costs(project_dir) == [0.001] * 4


def test_a_prices_table_that_prices_every_model_asks_the_provider_nothing(
    run_cli, project_dir, provider
):
    table = (
        "\n[providers.main.prices]\n"
        '"gen-model" = { input = 1.0, output = 2.0 }\n'
        '"parent-model" = { input = 30.0, output = 40.0 }\n'
        "\n[budget]\nmax_usd = 1\n"
    )
    (project_dir / "overbrainer.toml").write_text(PIPELINE_CONFIG + table)
    result = run_cli("run")
    assert result.exit_code == 0, result.stderr
    assert asked(provider) == []
    assert len(provider.chats()) > 0


def test_a_prices_table_that_misses_a_model_still_asks(run_cli, project_dir, provider):
    table = '\n[providers.main.prices]\n"parent-model" = { input = 30.0, output = 40.0 }\n'
    (project_dir / "overbrainer.toml").write_text(PIPELINE_CONFIG + table)
    four_questions(project_dir)
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    assert asked(provider) == ["models?detailed=true"]  # gen-model has no price of its own
    assert result.stdout.rstrip().endswith(f"cost ${4 * 10 * LISTED:.4f}")  # the table's


def test_a_price_look_up_refused_by_a_429_waits_and_asks_again(run_cli, project_dir, provider):
    provider.on(
        lambda seen: seen.method == "GET",
        Reply({"error": {"message": "Rate limit reached"}}, status=429,
              headers={"retry-after-ms": "50"}),
        times=2,
    )
    four_questions(project_dir)
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    assert asked(provider) == ["models?detailed=true"] * 3
    assert result.stdout.rstrip().endswith(f"cost ${4 * LISTED:.4f}")


def test_a_price_look_up_waits_no_longer_than_max_wait_s(run_cli, project_dir, provider):
    config = PIPELINE_CONFIG.replace("[pipeline]", "[pipeline]\nmax_wait_s = 0.2")
    (project_dir / "overbrainer.toml").write_text(config)
    provider.on(
        lambda seen: seen.method == "GET",
        Reply({"error": {"message": "Rate limit reached"}}, status=429,
              headers={"retry-after-ms": "80"}),
        times=None,
    )
    four_questions(project_dir)
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.rstrip().endswith("cost unknown")
    assert asked(provider) == ["models?detailed=true"] * 3  # 0.16 s waited: 0.24 is past 0.2
    assert (
        "providers.main: the prices (models?detailed=true) are still refused by the rate "
        "limit after 0.2 s (pipeline.max_wait_s = 0.2): costs are unknown"
    ) in result.stderr
