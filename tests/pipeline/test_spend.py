"""The money, tried as a hostile user would: a ``kill -9``, a parent that changes its ways,
replies without usage, timeouts and poisoned records. The spend never passes ``max_usd``
and every paid request is counted, against the loopback provider."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.helpers.fake_provider import Reply, openai_completion
from tests.helpers.pipeline_data import PIPELINE_CONFIG, lines, seed_questions

from overbrainer.pipeline.spend import read_spending, spent

CLI = str(Path(sys.executable).parent / "overbrainer")
# The loopback prices: $3e-6 a token in, $4e-6 out.
PROMPT, COMPLETION = 3e-6, 4e-6


def configure(project_dir, extra="", *, concurrency=4, max_tokens=None):
    config = PIPELINE_CONFIG.replace("concurrency = 4", f"concurrency = {concurrency}")
    if max_tokens is not None:
        config = config.replace("reasoning = true", f"reasoning = true\nmax_tokens = {max_tokens}")
    (project_dir / "overbrainer.toml").write_text(config + extra, encoding="utf-8")


def questions(project_dir, count):
    return seed_questions(
        project_dir, {("ownership", "moves"): [f"question {n}" for n in range(count)]}
    )


def billed(provider, model="parent-model"):
    """What the loopback provider billed: every chat it answered, at its usage."""
    total = 0.0
    for seen in provider.chats(model):
        if seen.reply_usage is not None:
            total += seen.reply_usage[0] * PROMPT + seen.reply_usage[1] * COMPLETION
    return total


def answering(out_tokens, *, usage=True):
    """A parent whose answers take ``out_tokens`` (cut at the request's max_tokens)."""

    def reply(seen):
        out = min(out_tokens, seen.body["max_tokens"])
        body = openai_completion(
            "an answer " * out, reasoning="thinking", usage=(10, out),
            finish="length" if out < out_tokens else "stop",
        )
        if not usage:
            del body["usage"]
        return body

    return reply


# -- kill -9 -------------------------------------------------------------------------------


def test_a_killed_stage_s_spend_is_on_disk_and_counted_by_history_plan_and_budget(
    run_cli, project_dir, provider
):
    configure(project_dir)
    questions(project_dir, 60)
    provider.latency = 0.1
    process = subprocess.Popen(
        [CLI, "-C", str(project_dir), "answers"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 20
    while len(_answers(project_dir)) < 10:
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.01)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert not (project_dir / ".overbrainer" / "history.jsonl").exists()  # no end recorded

    asked = len(provider.chats("parent-model"))
    answered = len(_answers(project_dir))
    each = 10 * PROMPT + 20 * COMPLETION
    # The replies in are paid at their usage; the requests in flight when it died are
    # counted at their bound: the prompt's bytes as tokens, and max_tokens (16384) out.
    [execution] = read_spending(project_dir).executions.values()
    assert execution.unsure > 0 and execution.requests >= answered
    paid = execution.requests * each
    assert spent(project_dir) >= paid + execution.unsure * 16384 * COMPLETION
    assert spent(project_dir) >= billed(provider)

    shown = run_cli("history", "--all")
    assert shown.exit_code == 0, shown.stderr
    assert "answers    unfinished" in shown.stdout
    assert f"{execution.unsure} request(s) without a reply, counted at their bound" in (
        shown.stdout
    )
    as_json = json.loads(run_cli("history", "--json").stdout)
    assert as_json["total"]["cost"] == pytest.approx(spent(project_dir), abs=1e-6)

    # The next run's budget starts from it: what is left is all it may spend.
    limit = spent(project_dir) + 0.001
    provider.latency = 0.0
    again = run_cli("answers", env={"OVERBRAINER_BUDGET__MAX_USD": f"{limit:.6f}"})
    assert again.exit_code == 1
    assert billed(provider) - (asked * each) <= 0.001 + 1e-9
    assert spent(project_dir) <= limit + 1e-9


def _answers(project_dir):
    path = project_dir / "data" / "answers.jsonl"
    if not path.exists():
        return []
    return [line for line in path.read_text().splitlines() if line.endswith("}")]


# -- a parent that changes its ways ----------------------------------------------------------


@pytest.mark.parametrize("concurrency", [1, 64])
def test_a_parent_that_answers_longer_than_measured_never_passes_the_budget(
    run_cli, project_dir, provider, concurrency
):
    configure(project_dir, concurrency=concurrency, max_tokens=1000)
    seed_questions(project_dir, {
        ("ownership", "moves"): [f"short {n}" for n in range(20)],
        ("lifetimes", "scopes"): [f"long {n}" for n in range(100)],
    })  # fmt: skip
    provider.on(None, answering(1), times=None)
    first = run_cli("answers", "--topic", "ownership")
    assert first.exit_code == 0, first.stderr
    # Now the measured average is 1 token, and the parent writes 1,000.
    provider._rules.clear()
    provider.on(None, answering(1000), times=None)
    limit = spent(project_dir) + 0.05
    result = run_cli("answers", env={"OVERBRAINER_BUDGET__MAX_USD": f"{limit:.6f}"})
    assert result.exit_code == 1
    assert "budget: answers stopped before a request" in result.stderr
    assert billed(provider) <= limit + 1e-9
    assert spent(project_dir) == pytest.approx(billed(provider), abs=1e-6)
    # A budget worth N answers of 1,000 tokens answers at least 0.8 N of them.
    each = 10 * PROMPT + 1000 * COMPLETION
    long_answers = [a for a in lines(project_dir, "answers.jsonl")
                    if a["meta"]["output_tokens"] == 1000]  # fmt: skip
    assert len(long_answers) >= 0.8 * int(0.05 / each)


def test_a_reply_without_usage_is_counted_at_its_bound(run_cli, project_dir, provider):
    configure(project_dir, "\n[budget]\nmax_usd = 0.01\n", max_tokens=100)
    questions(project_dir, 4)
    provider.on(None, answering(50, usage=False), times=None)
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    assert result.stderr.count("a reply gave no usage") == 1
    [entry] = json.loads((project_dir / ".overbrainer" / "history.jsonl").read_text())["cost"],
    chats = provider.chats("parent-model")
    bounds = [_prompt_bound(seen) * PROMPT + 100 * COMPLETION for seen in chats]
    assert entry == pytest.approx(sum(bounds))
    assert entry > 4 * (10 * PROMPT + 50 * COMPLETION)  # never free
    for answer in lines(project_dir, "answers.jsonl"):
        assert answer["meta"]["output_tokens"] == 100


@pytest.mark.parametrize("claimed", [10**10, 10**30, 10**400])
def test_a_reply_claiming_more_tokens_than_any_reply_holds_is_counted_at_its_bound(
    run_cli, project_dir, provider, claimed
):
    configure(project_dir, "\n[budget]\nmax_usd = 0.01\n", max_tokens=100)
    questions(project_dir, 2)

    def reply(seen):
        return openai_completion("an answer", reasoning="thinking", usage=(10, claimed))

    provider.on(None, reply, times=None)
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    assert result.stderr.count("a reply gave no usage") == 1
    [entry] = json.loads((project_dir / ".overbrainer" / "history.jsonl").read_text())["cost"],
    bounds = [_prompt_bound(seen) * PROMPT + 100 * COMPLETION for seen in provider.chats()]
    assert entry == pytest.approx(sum(bounds))


def _prompt_bound(seen):
    return sum(len(m["content"].encode()) + 8 for m in seen.body["messages"]) + 16


# -- timeouts --------------------------------------------------------------------------------


def test_a_request_that_timed_out_counts_as_possibly_billed_at_its_bound(
    run_cli, project_dir, provider
):
    configure(project_dir, "\n[pipeline.request_timeout_secs]\n", max_tokens=100)
    config = (project_dir / "overbrainer.toml").read_text().replace(
        "\n[pipeline.request_timeout_secs]\n", ""
    ).replace("max_retries = 2", "max_retries = 2\nrequest_timeout_secs = 1")
    (project_dir / "overbrainer.toml").write_text(config)
    questions(project_dir, 1)
    provider.on(None, Reply(delay=3), times=1)  # the provider works on, and bills it
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    assert len(provider.chats("parent-model")) == 2
    [seen, _] = provider.chats("parent-model")
    bound = _prompt_bound(seen) * PROMPT + 100 * COMPLETION
    each = 10 * PROMPT + 20 * COMPLETION
    entry = json.loads((project_dir / ".overbrainer" / "history.jsonl").read_text())
    assert entry["cost"] == pytest.approx(bound + each)
    assert "1 request(s) without a reply counted at their bound" in result.stdout
    assert spent(project_dir) == pytest.approx(bound + each)


# -- poisoned records ------------------------------------------------------------------------


@pytest.mark.parametrize("cost", ["NaN", "-1000000", "Infinity"])
def test_a_history_cost_that_is_not_finite_or_negative_is_an_invalid_record(
    run_cli, project_dir, provider, cost
):
    configure(project_dir, "\n[budget]\nmax_usd = 0.01\n")
    questions(project_dir, 2)
    history = project_dir / ".overbrainer" / "history.jsonl"
    history.parent.mkdir()
    history.write_text(
        '{"stage": "answers", "started_at": "2026-01-01T00:00:00Z", "status": "ok", '
        f'"cost": {cost}}}\n'
    )
    for command in (["answers"], ["plan"], ["history"]):
        result = run_cli(*command)
        assert result.exit_code != 0, command
        assert "history.jsonl:1: invalid record" in result.stderr
    assert provider.chats() == []


def test_a_spend_journal_line_with_a_negative_cost_is_an_invalid_record(
    run_cli, project_dir, provider
):
    configure(project_dir, "\n[budget]\nmax_usd = 0.01\n")
    questions(project_dir, 2)
    journal = project_dir / ".overbrainer" / "spend.jsonl"
    journal.parent.mkdir()
    journal.write_text('{"paid": "x", "input_tokens": 1, "output_tokens": 1, "cost": -5}\n')
    result = run_cli("answers")
    assert result.exit_code == 1
    assert "spend.jsonl:1: invalid record" in result.stderr
    assert provider.chats() == []


def test_an_answer_with_negative_tokens_is_an_invalid_record(run_cli, project_dir, provider):
    configure(project_dir)
    [question] = questions(project_dir, 1)
    answer = {"id": question["id"], "topic": "ownership", "subtopic": "moves",
              "messages": [{"role": "user", "content": "q"},
                           {"role": "assistant", "content": "a"}],
              "meta": {"model": "parent-model", "input_tokens": 1,
                       "output_tokens": -1000000000000, "excluded": None}}  # fmt: skip
    (project_dir / "data" / "answers.jsonl").write_text(json.dumps(answer) + "\n")
    result = run_cli("plan")
    assert result.exit_code == 1
    assert "answers.jsonl:1: invalid record" in result.stderr


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0"])
@pytest.mark.parametrize("command", ["run", "plan"])
def test_max_usd_refuses_what_is_not_a_positive_finite_number(
    run_cli, project_dir, provider, command, value
):
    result = run_cli(command, "--max-usd", value)
    assert result.exit_code == 2
    assert "--max-usd" in result.stderr
    assert provider.chats() == []


# -- a full disk -------------------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path):
    """A 256 KiB tmpfs, unmounted at the end (root only: skipped elsewhere, but in CI)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)],
        capture_output=True, check=False,
    )
    if done.returncode != 0:
        if os.environ.get("CI"):
            pytest.fail(f"cannot mount a tmpfs: {done.stderr.decode()}")
        pytest.skip("mounting a tmpfs needs root")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)


def test_a_full_disk_stops_answers_cleanly_keeping_every_paid_answer(small_disk, provider):
    from tests.helpers.pipeline_data import write_project
    from tests.helpers.project import Cli

    project_dir = write_project(small_disk / "project", provider.url)
    questions(project_dir, 40)
    provider.on(None, lambda seen: openai_completion("word " * 2000, reasoning="r"), times=None)
    result = Cli(project_dir)("answers")
    assert result.exit_code == 1
    assert "Traceback" not in result.stderr
    assert "the disk is full; what was written before is kept: free some space" in result.stderr
    saved = _saved(project_dir)  # every line whole, but a torn last one (cut at the next run)
    assert 0 < len(saved) < 40
    paid = read_spending(project_dir)
    [execution] = paid.executions.values()
    assert execution.requests >= len(saved)  # each saved answer's cost is on disk

    (project_dir / ".overbrainer" / "exchanges.jsonl").unlink(missing_ok=True)
    for old in (project_dir / ".overbrainer").glob("exchanges*"):
        old.unlink()
    provider._rules.clear()
    again = Cli(project_dir)("answers")
    assert again.exit_code in (0, 1), again.stderr
    assert "Traceback" not in again.stderr
    assert len(_saved(project_dir)) > len(saved)


def _saved(project_dir):
    from overbrainer.pipeline.jsonl import read_jsonl
    from overbrainer.pipeline.records import is_answer

    return read_jsonl(project_dir / "data" / "answers.jsonl", "answers.jsonl", is_answer)


# -- Ctrl-C --------------------------------------------------------------------------------


def _start(project_dir):
    return subprocess.Popen(
        [CLI, "-C", str(project_dir), "answers"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def _wait_for(project_dir, count, process):
    deadline = time.monotonic() + 20
    while len(_answers(project_dir)) < count:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "no answers came"
        time.sleep(0.01)


def test_ctrl_c_lets_the_replies_in_flight_land_and_sends_nothing_more(
    project_dir, provider
):
    configure(project_dir)
    questions(project_dir, 40)
    provider.latency = 0.5
    process = _start(project_dir)
    _wait_for(project_dir, 4, process)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=20)
    assert process.returncode == 130, stderr
    assert "interrupted: nothing more is sent; waiting for the replies on their way" in stderr
    saved = _answers(project_dir)
    assert len(provider.chats("parent-model")) == len(saved) < 40  # each paid reply kept
    assert "without a reply" not in stdout
    assert read_spending(project_dir).executions  # its spend is on disk


def test_a_second_ctrl_c_leaves_at_once_counting_what_may_be_billed(project_dir, provider):
    configure(project_dir)
    questions(project_dir, 40)
    provider.latency = 0.2
    process = _start(project_dir)
    _wait_for(project_dir, 4, process)
    provider.latency = 30  # the next replies would take long
    time.sleep(0.5)
    process.send_signal(signal.SIGINT)
    time.sleep(0.3)
    process.send_signal(signal.SIGINT)
    started = time.monotonic()
    stdout, stderr = process.communicate(timeout=20)
    assert time.monotonic() - started < 10
    assert process.returncode == 130, stderr
    assert "Ctrl-C again to leave now (those replies are then lost, and may be billed)" in stderr
    assert "request(s) without a reply counted at their bound" in stdout
    [execution] = read_spending(project_dir).executions.values()
    assert execution.unsure >= 1


def test_a_full_disk_stops_split_cleanly_keeping_the_old_pair(small_disk, provider):
    from tests.helpers.pipeline_data import answer, write_project
    from tests.helpers.project import Cli

    project_dir = write_project(small_disk / "project", provider.url)
    chosen = questions(project_dir, 30)
    with (project_dir / "data" / "answers.jsonl").open("w") as file:
        file.writelines(json.dumps(answer(q)) + "\n" for q in chosen)
    assert Cli(project_dir)("split").exit_code == 0
    before = {n: (project_dir / "data" / n).read_bytes() for n in ("train.jsonl", "eval.jsonl")}
    filler = small_disk / "filler"
    with filler.open("wb") as file, contextlib.suppress(OSError):
        file.write(b"\0" * (1 << 20))  # what is left of the disk: less than a new pair
    result = Cli(project_dir)("split")
    assert result.exit_code == 1
    assert "Traceback" not in result.stderr
    assert "the disk is full; the file is as it was: free some space" in result.stderr
    for name, data in before.items():
        assert (project_dir / "data" / name).read_bytes() == data
    filler.unlink()
    assert Cli(project_dir)("split").exit_code == 0
