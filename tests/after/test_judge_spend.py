"""compare's judge is paid like a stage: each request in ``.overbrainer/spend.jsonl`` before
the next, a ``compare`` line in the history, and ``[budget] max_usd`` refusing what it cannot
pay before it is sent (the loopback provider as the judge, the stand-in llama.cpp server as
the child)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import pytest
from tests.helpers.compare import BOOT, JUDGE_PROMPT, use_provider
from tests.helpers.fake_provider import FakeProvider

from overbrainer.pipeline.spend import read_spending, spent

JUDGE = """
[roles.judge]
provider = "main"
model = "judge-model"
max_tokens = 100

[pipeline]
concurrency = 1
"""
JUDGE_PRICE = ("0.00001", "0.00002")
"""USD a token in and out: $10 and $20 a million."""


@pytest.fixture
def run(request, provider, monkeypatch):
    """test_compare's finished run, judged by ``judge-model`` (priced), one at a time."""
    finished = request.getfixturevalue("comparable")
    with (finished.dir / "overbrainer.toml").open("a", encoding="utf-8") as config:
        config.write(JUDGE)
    provider.prices["judge-model"] = JUDGE_PRICE
    use_provider(monkeypatch, provider)
    return finished


def read_lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def judge_chats(provider):
    return [seen for seen in provider.chats() if JUDGE_PROMPT in seen.prompt]


def verdict_lines(run):
    [verdicts] = run.run_dir.glob("compares/*/verdicts-*.jsonl")
    return read_lines(verdicts)


def test_each_judge_request_is_journalled_before_the_next_and_in_a_history_line(
    run, provider, run_cli
):
    result = run_cli("compare", "--limit", "3", "--against", "parent")
    assert result.exit_code == 0, result.stderr
    assert len(judge_chats(provider)) == 6  # three questions, both orders
    spend = read_lines(run.dir / ".overbrainer" / "spend.jsonl")
    requests = [line for line in spend if "open" in line or "paid" in line]
    # One at a time: each request opened, then paid, before the next is opened.
    kinds = ["open" if "open" in line else "paid" for line in requests]
    assert kinds == ["open", "paid"] * 6
    for opened, paid in zip(requests[::2], requests[1::2], strict=True):
        assert paid["paid"] == opened["open"]
        assert (opened["stage"], opened["provider"], opened["model"]) == (
            "compare",
            "main",
            "judge-model",
        )
        assert opened["bound"] >= paid["cost"] > 0
    paid = requests[1::2]
    [entry] = read_lines(run.dir / ".overbrainer" / "history.jsonl")
    assert (entry["stage"], entry["status"], entry["provider"], entry["model"]) == (
        "compare",
        "ok",
        "main",
        "judge-model",
    )
    assert entry["done"] == 3
    assert entry["input_tokens"] == sum(line["input_tokens"] for line in paid)
    assert entry["output_tokens"] == sum(line["output_tokens"] for line in paid)
    assert entry["cost"] == pytest.approx(sum(line["cost"] for line in paid))
    shown = run_cli("history")
    assert shown.exit_code == 0, shown.stderr
    assert shown.stdout.startswith(
        f"compare    1 run(s), 3 done, 0 failed; tokens {entry['input_tokens']} in, "
        f"{entry['output_tokens']} out; $"
    )
    # Counted apart from the parent's answers: their average would drag the budget's.
    [counted] = read_lines(run.dir / ".overbrainer" / "requests.jsonl")
    assert (counted["stage"], counted["model"], counted["requests"]) == ("judge", "judge-model", 6)
    # A rejudge with every verdict in asks nothing and writes no line.
    compare_id = next(run.run_dir.glob("compares/compare_*")).name
    result = run_cli("compare", "--rejudge", compare_id)
    assert result.exit_code == 0, result.stderr
    assert len(judge_chats(provider)) == 6
    assert len(read_lines(run.dir / ".overbrainer" / "history.jsonl")) == 1


STOP = re.compile(
    r"error: budget: compare stopped before a request \(up to \$(?P<next>[0-9.]+)\) that "
    r"could take the project past max_usd \$(?P<max>[0-9.]+): spent \$(?P<spent>[0-9.]+) "
    r"\(this stage \$[0-9.]+\), \$[0-9.]+ left; (?P<kept>\d+) of (?P<total>\d+) verdicts "
    r"against its parent are kept in verdicts-[0-9a-f]{16}\.jsonl; raise the budget "
    r"\(\[budget\] max_usd in overbrainer\.toml, or OVERBRAINER_BUDGET__MAX_USD\), "
    r"then `overbrainer compare --rejudge (?P<id>compare_[0-9-]+)` judges the rest\n"
)


MAX_USD = 0.007


def test_the_budget_stops_the_judge_before_a_request_it_cannot_pay(
    run, provider, run_cli, monkeypatch
):
    # A request's bound is about $0.006 (its prompt's bytes, 100 tokens out), a reply costs
    # $0.0005: a few are paid before one is refused.
    monkeypatch.setenv("OVERBRAINER_BUDGET__MAX_USD", str(MAX_USD))
    result = run_cli("compare", "--limit", "5", "--against", "parent")
    assert result.exit_code == 1
    assert "Traceback" not in result.stderr
    stop = STOP.search(result.stderr)
    assert stop is not None, result.stderr
    kept = int(stop["kept"])
    assert 0 < kept < int(stop["total"]) == 5
    assert len(verdict_lines(run)) == kept  # the verdicts so far stay
    # Nothing past the budget was sent: every request sent is paid in the journal, the
    # spend is within max_usd, and the one refused would have passed it.
    spend = read_lines(run.dir / ".overbrainer" / "spend.jsonl")
    paid = [line for line in spend if "paid" in line]
    sent = judge_chats(provider)
    assert len(sent) == len(paid) and len(sent) >= 2 * kept
    spent = sum(line["cost"] for line in paid)
    assert spent <= MAX_USD
    assert float(stop["spent"]) == pytest.approx(spent, abs=1e-4)
    assert float(stop["spent"]) + float(stop["next"]) > float(stop["max"]) == MAX_USD
    [entry] = read_lines(run.dir / ".overbrainer" / "history.jsonl")
    assert (entry["stage"], entry["status"], entry["done"]) == ("compare", "failed", kept)
    assert entry["cost"] == pytest.approx(spent)

    # Raised, the rejudge judges the rest: the questions with a verdict are not asked again.
    monkeypatch.setenv("OVERBRAINER_BUDGET__MAX_USD", "1")
    result = run_cli("compare", "--rejudge", stop["id"])
    assert result.exit_code == 0, result.stderr
    assert sorted(line["id"] for line in verdict_lines(run)) == [f"q{i:04d}" for i in range(5)]
    asked_again = len(judge_chats(provider)) - len(sent)
    assert 2 * (5 - kept) <= asked_again <= 2 * (5 - kept) + 1  # the half-judged one's order
    entries = read_lines(run.dir / ".overbrainer" / "history.jsonl")
    assert [(e["status"], e["done"]) for e in entries] == [("failed", kept), ("ok", 5 - kept)]


def test_a_spent_budget_sends_the_judge_nothing(run, provider, run_cli, monkeypatch):
    monkeypatch.setenv("OVERBRAINER_BUDGET__MAX_USD", "0.000001")
    result = run_cli("compare", "--limit", "2", "--against", "parent")
    assert result.exit_code == 1
    stop = STOP.search(result.stderr)
    assert stop is not None, result.stderr
    assert (stop["kept"], stop["total"]) == ("0", "2")
    assert judge_chats(provider) == []
    assert list(run.run_dir.glob("compares/*/verdicts-*.jsonl")) == []
    assert not [line for line in read_lines(run.dir / ".overbrainer" / "spend.jsonl")
                if "open" in line]  # fmt: skip
    [entry] = read_lines(run.dir / ".overbrainer" / "history.jsonl")
    assert (entry["stage"], entry["status"], entry["done"], entry["cost"]) == (
        "compare",
        "failed",
        0,
        0,
    )


def test_a_compare_killed_while_judging_loses_none_of_the_judges_spend(
    request, run_cli, monkeypatch
):
    provider = FakeProvider(latency=0.3).start()
    try:
        provider.prices["judge-model"] = JUDGE_PRICE
        finished = request.getfixturevalue("comparable")
        with (finished.dir / "overbrainer.toml").open("a", encoding="utf-8") as config:
            config.write(JUDGE)
        use_provider(monkeypatch, provider)
        process = subprocess.Popen(
            [sys.executable, "-c", BOOT, "-C", str(finished.dir), "compare", "--limit", "6",
             "--against", "parent"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(os.environ),
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                found = list(finished.run_dir.glob("compares/*/verdicts-*.jsonl"))
                if found and len(found[0].read_text().splitlines()) >= 2:
                    break
                time.sleep(0.02)
            else:
                pytest.fail("the compare judged nothing")
        finally:
            process.kill()
            process.communicate()
        assert not (finished.dir / ".overbrainer" / "history.jsonl").exists()  # no end
        sent = len(judge_chats(provider))
        [execution] = read_spending(finished.dir).executions.values()
        # Every reply in is paid in the journal; the one in flight counts at its bound.
        assert execution.stage == "compare" and execution.model == "judge-model"
        assert execution.requests >= 2 * len(verdict_lines(finished))
        assert execution.requests + execution.unsure >= sent
        assert spent(finished.dir) >= execution.requests * 0.0005
        shown = run_cli("history", "--all")
        assert shown.exit_code == 0, shown.stderr
        assert "compare    unfinished" in shown.stdout
    finally:
        provider.stop()


def test_a_budget_with_a_judge_of_unknown_price_is_refused_before_it_asks(
    run, provider, run_cli, monkeypatch
):
    del provider.prices["judge-model"]
    monkeypatch.setenv("OVERBRAINER_BUDGET__MAX_USD", "1")
    result = run_cli("compare", "--limit", "2", "--against", "parent")
    assert result.exit_code == 1
    assert (
        "error: the verdicts so far are kept; resume with `overbrainer compare --rejudge compare_"
    ) in result.stderr
    assert result.stderr.endswith(
        "budget: the price of main/judge-model is unknown, so max_usd cannot be kept: set "
        "[providers.main.prices]\n"
    )
    assert judge_chats(provider) == []
