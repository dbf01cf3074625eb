"""A served parent's money: ``plan`` projects its hours from the serve throughput table
(or ``[plan] serve_throughput``) at its target's price; the budget refuses a serve whose
projected hours would pass ``max_usd`` and ends one when the spend, its hours so far
included, reaches it. The stand-in vLLM on the local target."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from tests.helpers.pipeline_data import seed_questions
from tests.helpers.serving import running, watchdog_pids

from overbrainer.cli import cli
from overbrainer.cli.context import App

QUESTIONS = {("ownership", "borrowing"): ["What is a borrow?", "Why move?"]}


def invoke(project: Path, *args: str):
    return CliRunner().invoke(cli, ["-C", str(project), *args], catch_exceptions=False)


def configure(project: Path, *, price: float, extra: str = "", serve_more: str = "") -> None:
    config = project / "overbrainer.toml"
    text = config.read_text().replace('kind = "local"', f'kind = "local"\nprice_per_hour = {price}')
    if serve_more:
        text = text.replace(
            'model = "Qwen/Qwen3-0.6B" }', f'model = "Qwen/Qwen3-0.6B"{serve_more} }}'
        )
    config.write_text(text + extra)


def plan_json(project: Path) -> dict:
    result = invoke(project, "plan", "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_plan_projects_a_served_parent_s_hours_at_its_price_and_says_its_basis(served_dir):
    seed_questions(served_dir, QUESTIONS)
    configure(served_dir, price=2.5, serve_more=', gpu_type = "H100"')

    found = plan_json(served_dir)
    served = found["served"]["big"]
    assert served["tokens_out"] > 0
    assert served["hours"] > 0
    assert served["usd"] == round(served["hours"] * 2.5, 6)
    assert "serve throughput table (vllm, 1 GPU)" in served["basis"]
    assert found["total_usd"] >= served["usd"], "the serve's dollars are in the plan's total"

    text = invoke(served_dir, "plan").stdout
    assert "served: providers.big (vllm Qwen/Qwen3-0.6B on `box`) is paid by the hour" in text
    assert "tokens out" in text and "assumed: the serve throughput table" in text
    assert watchdog_pids(served_dir) == [], "plan starts no engine"


def test_plan_serve_throughput_replaces_the_table_s_figure(served_dir):
    seed_questions(served_dir, QUESTIONS)
    configure(served_dir, price=2.5)
    table = plan_json(served_dir)["served"]["big"]
    config = served_dir / "overbrainer.toml"
    config.write_text(config.read_text() + "\n[plan]\nserve_throughput = { big = 7 }\n")

    measured = plan_json(served_dir)["served"]["big"]

    assert measured["tokens_per_second"] == 7
    assert measured["basis"] == "[plan] serve_throughput.big"
    assert measured["hours"] > table["hours"], "a slower engine takes longer"


def test_a_serve_whose_projected_hours_pass_the_budget_is_not_started(served_dir):
    seed_questions(served_dir, QUESTIONS)
    configure(served_dir, price=1000, extra="\n[budget]\nmax_usd = 0.01\n")

    result = invoke(served_dir, "answers")

    assert result.exit_code != 0
    assert "budget: providers.big is not served: its projected" in result.output
    assert "would pass max_usd $0.0100" in result.output
    assert "raise the budget" in result.output
    assert watchdog_pids(served_dir) == [], "no engine was started"
    assert not (served_dir / ".overbrainer" / "serve").is_dir() or not any(
        (served_dir / ".overbrainer" / "serve").iterdir()
    )


def test_a_serve_is_ended_when_the_spend_with_its_hours_so_far_reaches_the_budget(served_dir):
    # $3600 an hour is a dollar a second: $2 is reached in two seconds of serving; the
    # projected hours are nothing at the engine's (stated) speed, so the serve starts.
    configure(
        served_dir, price=3600,
        extra="\n[budget]\nmax_usd = 2\n\n[plan]\nserve_throughput = { big = 1e9 }\n",
    )  # fmt: skip
    app = App(served_dir)
    assert app.settings.budget.max_usd == 2
    serving = app.serving()
    serving.budget_check_s = 0.1
    try:
        assert serving.url("big").startswith("http://127.0.0.1:")
        (pid,) = watchdog_pids(served_dir)
        deadline = time.monotonic() + 30
        while serving.records.load("big") is not None:
            assert time.monotonic() < deadline, "the budget did not end the serve"
            time.sleep(0.1)
        assert not running(pid)
    finally:
        serving.close()
    history = (served_dir / ".overbrainer" / "history.jsonl").read_text().splitlines()
    (line,) = [json.loads(text) for text in history if '"serve"' in text]
    assert line["status"] == "ended"
    assert line["cost"] >= 2, "it was ended once its hours had cost the budget"


def test_a_serve_s_hours_so_far_count_as_spent_while_it_is_up(served_dir):
    configure(served_dir, price=3600)  # a dollar a second
    assert invoke(served_dir, "serve", "up").exit_code == 0
    try:
        time.sleep(0.5)
        spent_up = plan_json(served_dir)["spent_usd"]
        time.sleep(0.5)
        later = plan_json(served_dir)["spent_usd"]
    finally:
        assert invoke(served_dir, "serve", "down").exit_code == 0
    assert spent_up >= 0.5, "its half a second so far, at $3600 an hour"
    assert later > spent_up, "it goes on counting while it is up"
    history = (served_dir / ".overbrainer" / "history.jsonl").read_text().splitlines()
    (line,) = [json.loads(text) for text in history if '"serve"' in text]
    assert plan_json(served_dir)["spent_usd"] == pytest.approx(line["cost"], abs=1e-5), (
        "once it is down, its history line alone counts it"
    )
