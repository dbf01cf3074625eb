"""overbrainer compare: the child served by a stand-in llama.cpp server on the local target,
the pipeline's loopback provider as the judge."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.helpers.compare import BOOT, JUDGE_PROMPT, eval_record, use_provider
from tests.helpers.fake_provider import FakeProvider, openai_completion

from overbrainer.after.judge import child_first, parse_verdict, strip_reasoning
from overbrainer.after.metrics import nearest_rank


def judged_question(seen) -> str:
    return seen.prompt.split("Question:\n", 1)[1].split("\n", 1)[0]


def test_compare_answers_judges_and_reports(comparable, provider, run_cli, monkeypatch):
    use_provider(monkeypatch, provider)
    result = run_cli("compare", "--limit", "5")
    assert result.exit_code == 0, result.stderr
    [directory] = comparable.run_dir.glob("compares/compare_*")
    lines = result.stdout.strip().splitlines()
    assert lines[-1] == str(directory.relative_to(comparable.dir) / "compare.md")
    assert lines[0] == (
        "compare: against its parent: win-or-tie 100.0% (95% interval 56.6%-100.0%; "
        "length-controlled -) over 5 questions: 5 wins, 0 ties (0 flipped with the order), "
        "0 losses, 0 unparsed"
    )
    # The base model `models/tiny` is neither a directory nor in the (offline) Hub cache:
    # said, and the compare goes on against the parent.
    assert lines[1] == (
        "compare: not against the base model: the base model models/tiny cannot be served: "
        "making its GGUF failed: models/tiny is not a directory, and as a Hugging Face id: it "
        "is not in the Hub cache and HF_HUB_OFFLINE is set"
    )
    assert "; comparing against the parent only" in result.stderr
    assert lines[2].startswith("compare: child latency p50 ") and ", p95 " in lines[2]
    # No [compare] prices: the parent's comes from the provider's price list ($3/$4 a
    # million tokens; 100 in and 300 out an eval question), the child's is asked for.
    assert lines[3:6] == [
        "compare: cost per 1,000 requests: parent $1.500000, child - (upper bound)",
        "compare: the parent's price: $3.00 in, $4.00 out per million tokens, from the price "
        "list of provider `main` ([compare] parent_price_in/parent_price_out override it)",
        "compare: no price per hour for the child: set [compare] child_price_per_hour",
    ]
    assert (
        "warning: compare: the judge main/parent-model is the parent's model: a judge prefers "
        "its own answers"
    ) in result.stderr
    data = json.loads((directory / "compare.json").read_text())
    assert data["run"] == comparable.run_id
    assert data["judge"] == "main/parent-model" and data["judge_is_parent"] is True
    assert data["hardware"]["build"] == "cpu"
    assert [q["id"] for q in data["questions"]] == [f"q{i:04d}" for i in range(5)]
    for question in data["questions"]:
        assert question["child"] == f"Child answer to: {question['question']}"
        assert question["parent"] == f"Parent answer {int(question['id'][1:])}."
        assert question["verdict"] == "win"
        first, second = question["orders"]
        assert first["child_first"] == child_first(42, question["id"])
        assert second["child_first"] == (not first["child_first"])
        assert [o["verdict"] for o in question["orders"]] == (
            ["A", "B"] if first["child_first"] else ["B", "A"]
        )
        assert first["replies"] == [
            f'{{"verdict": "{first["verdict"]}", "reason": "It is clearer."}}'
        ]
        assert question["tokens"] == len(question["child"].split(" "))
        assert question["seconds"] > 0 and question["first_token_seconds"] is not None
    summary = data["summary"]
    assert summary["questions"] == 5
    assert summary["wins"] == 5 and summary["win_or_tie"] == 1.0
    assert summary["intervals"]["win_or_tie"] == [0.565518, 1.0]
    assert summary["parent_per_1k"] == round((100 * 3.0 + 300 * 4.0) / 1000, 6)
    assert data["parent_price"] == {
        "in": 3.0, "out": 4.0, "source": "the price list of provider `main`",
    }
    judged = [s for s in provider.chats() if JUDGE_PROMPT in s.prompt]
    assert len(judged) == 10  # each question in both orders
    for seen in judged:
        assert "<think>" not in seen.prompt and "reasoning" not in seen.prompt
    report = (directory / "compare.md").read_text()
    assert report.startswith(f"# Compare of run {comparable.run_id}\n")
    assert "## Summary" in report and "## Against its parent" in report
    assert "### Losses against its parent (first 0 of 0)" in report
    assert "### Wins against its parent (first 5 of 5)" in report
    assert "- Win-or-tie rate: 100.0% (95% interval 56.6%-100.0%)" in report
    assert "each question judged in both orders, 0 verdicts flipped with the order" in report

    assert (
        "- The parent's price: $3.00 in, $4.00 out per million tokens, from the price list of "
        "provider `main`"
    ) in report
    assert "- No price per hour for the child: set [compare] child_price_per_hour" in report
    assert "The child ran on a CPU." in report
    assert "serving ../../output/gguf/" in (directory / "server.log").read_text()


def test_a_verdict_that_flips_with_the_order_is_a_tie(comparable, provider, run_cli, monkeypatch):
    use_provider(monkeypatch, provider, verdict="A")  # a judge that always picks the first
    result = run_cli("compare", "--limit", "4")
    assert result.exit_code == 0, result.stderr
    [directory] = comparable.run_dir.glob("compares/compare_*")
    data = json.loads((directory / "compare.json").read_text())
    assert [q["verdict"] for q in data["questions"]] == ["tie"] * 4
    assert all(q["flipped"] for q in data["questions"])
    assert {tuple(o["outcome"] for o in q["orders"]) for q in data["questions"]} <= {
        ("win", "loss"), ("loss", "win"),
    }  # fmt: skip
    assert data["summary"]["flipped"] == 4 and data["summary"]["ties"] == 4
    assert data["questions"][0]["reason"].startswith(
        "the verdict flipped with the order, so a tie: child "
    )
    assert "(It is clearer.)" in data["questions"][0]["reason"]
    assert "4 ties (4 flipped with the order)" in result.stdout


def test_costs_per_thousand_requests(comparable, provider, run_cli, monkeypatch, write_config):
    use_provider(monkeypatch, provider, verdict="tie")
    config = comparable.dir / "overbrainer.toml"
    config.write_text(
        config.read_text()
        + "\n[compare]\nparent_price_in = 3.0\nparent_price_out = 15.0\n"
        + "child_price_per_hour = 0.5\n"
    )
    result = run_cli("compare", "--limit", "2")
    assert result.exit_code == 0, result.stderr
    [directory] = comparable.run_dir.glob("compares/compare_*")
    summary = json.loads((directory / "compare.json").read_text())["summary"]
    assert summary["ties"] == 2 and summary["win_or_tie"] == 1.0
    assert summary["parent_per_1k"] == round((100 * 3.0 + 300 * 15.0) / 1000, 6)
    assert summary["child_per_1k"] == round(0.5 * summary["mean_seconds"] / 3.6, 6)
    # [compare] wins over the provider's price list ($3/$4), and says so.
    assert (
        "compare: the parent's price: $3.00 in, $15.00 out per million tokens, from [compare] "
        "parent_price_in/parent_price_out\n"
    ) in result.stdout


def test_a_parent_without_any_known_price_asks_for_compare_prices(
    comparable, provider, run_cli, monkeypatch
):
    use_provider(monkeypatch, provider)
    provider.prices = {}  # the provider lists no price
    result = run_cli("compare", "--limit", "2")
    assert result.exit_code == 0, result.stderr
    assert (
        "compare: cost per 1,000 requests not computed: no price known for the parent: set "
        "[compare] parent_price_in and parent_price_out (USD per million tokens); no price per "
        "hour for the child: set [compare] child_price_per_hour\n"
    ) in result.stdout


def test_the_providers_table_prices_the_parent_without_asking(
    comparable, provider, run_cli, monkeypatch
):
    use_provider(monkeypatch, provider)
    config = comparable.dir / "overbrainer.toml"
    config.write_text(config.read_text().replace(
        "[roles.parent]", "[providers.main.prices]\nparent-model = { input = 2.0, output = 8.0 }"
        "\n\n[roles.parent]", 1,
    ) + "\n[compare]\nchild_price_per_hour = 0.5\n")
    result = run_cli("compare", "--limit", "2")
    assert result.exit_code == 0, result.stderr
    assert (
        "compare: the parent's price: $2.00 in, $8.00 out per million tokens, from "
        "[providers.main.prices] ([compare] parent_price_in/parent_price_out override it)\n"
    ) in result.stdout


def test_an_unparsed_verdict_is_asked_twice_and_a_failed_answer_is_not_judged(
    comparable, provider, run_cli, monkeypatch
):
    monkeypatch.setenv("OVERBRAINER_PROVIDERS__MAIN__BASE_URL", provider.url)
    provider.on(lambda seen: JUDGE_PROMPT in seen.prompt, openai_completion("I cannot say."), None)
    records = [eval_record(0), eval_record(1, "Please FAIL here")]
    (comparable.run_dir / "data" / "eval.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in records)
    )
    result = run_cli("compare")
    [directory] = comparable.run_dir.glob("compares/compare_*")
    shown = f"runs/{comparable.run_id}/compares/{directory.name}"
    assert result.exit_code == 1
    assert (
        f"error: 1 of 2 verdicts could not be read, more than a tenth: the judge's replies are "
        f"in {shown}/compare.json (questions[].orders[].replies); change roles.judge or "
        f"prompts/judge.txt, then `overbrainer compare --rejudge {directory.name}` asks those "
        "again"
    ) in result.stderr
    data = json.loads((directory / "compare.json").read_text())
    assert [q["verdict"] for q in data["questions"]] == ["unparsed", "error"]
    assert data["questions"][0]["orders"][0]["replies"] == ["I cannot say."] * 2
    judged = [s for s in provider.chats() if JUDGE_PROMPT in s.prompt]
    assert len(judged) == 2  # asked again, stricter; the other order is not asked
    assert all(judged_question(s) == "Question 0: what is ownership?" for s in judged)
    assert "could not be read. Reply with the JSON object alone" not in judged[0].prompt
    assert "could not be read. Reply with the JSON object alone" in judged[1].prompt
    assert data["summary"]["win_or_tie"] == 0.0
    [question] = [q["id"] for q in data["questions"] if q["verdict"] == "unparsed"]
    assert (
        f"warning: compare: {question} (against its parent): the judge's verdict cannot be "
        "read (it began "
        "'I cannot say.'): kept as unparsed" in result.stderr
    )
    logged = run_cli("log", "--failed", "--stage", "compare")
    assert logged.stdout.count("failed: the judge's verdict cannot be read") == 2
    assert "< I cannot say." in logged.stdout


def test_compare_resumed_after_kill_9_does_not_ask_the_judge_twice(
    comparable, run_cli, monkeypatch
):
    provider = FakeProvider(latency=0.4).start()
    try:
        use_provider(monkeypatch, provider)
        config = comparable.dir / "overbrainer.toml"
        config.write_text(config.read_text() + "\n[pipeline]\nconcurrency = 1\n")
        process = subprocess.Popen(
            [sys.executable, "-c", BOOT, "-C", str(comparable.dir), "compare", "--limit", "6"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(os.environ),
        )
        try:
            deadline = time.monotonic() + 60
            verdicts: list[Path] = []
            while time.monotonic() < deadline:
                verdicts = list(comparable.run_dir.glob("compares/*/verdicts-*.jsonl"))
                if verdicts and len(verdicts[0].read_text().splitlines()) >= 2:
                    break
                time.sleep(0.02)
            else:
                pytest.fail("the compare judged nothing")
        finally:
            process.kill()
            process.communicate()
        before = [json.loads(line)["id"] for line in verdicts[0].read_text().splitlines()]
        assert 2 <= len(before) < 6
        compare_id = verdicts[0].parent.name
        result = run_cli("compare", "--rejudge", compare_id)
        assert result.exit_code == 0, result.stderr
        after = [json.loads(line)["id"] for line in verdicts[0].read_text().splitlines()]
        assert sorted(after) == [f"q{i:04d}" for i in range(6)]
        asked: dict[str, int] = {}
        for seen in provider.chats():
            if JUDGE_PROMPT in seen.prompt:
                qid = f"q{int(judged_question(seen).split(':')[0].split()[1]):04d}"
                asked[qid] = asked.get(qid, 0) + 1
        assert all(asked[qid] == 2 for qid in before)  # both orders, once each
        assert sum(1 for count in asked.values() if count > 2) <= 1  # the one in flight
    finally:
        provider.stop()


def test_refusals(comparable, provider, run_cli, monkeypatch):
    use_provider(monkeypatch, provider)
    result = run_cli("compare", "--rejudge", "compare_nope")
    assert "error: no compare compare_nope in runs/" in result.stderr
    result = run_cli("compare", "--rejudge", "c" * 300)  # longer than a file name may be
    assert result.exit_code == 1
    assert result.stderr.endswith(f"error: no compare {'c' * 59}… in runs/\n")
    (comparable.run_dir / "data" / "eval.jsonl").write_text('{"id": "x", "messages": []}\n')
    result = run_cli("compare")
    assert (
        f"error: runs/{comparable.run_id}/data/eval.jsonl has no question with an answer: run "
        "`overbrainer split` first"
    ) in result.stderr
    for path in comparable.run_dir.glob("exports/*/export.json"):
        path.unlink()
    result = run_cli("compare")
    assert (
        "error: no run has a GGUF: export one with `overbrainer export <run-id>`, then compare"
    ) in result.stderr
    result = run_cli("compare", "--run", comparable.run_id)
    assert (
        f"error: run {comparable.run_id} has no GGUF; run `overbrainer export "
        f"{comparable.run_id}` first"
    ) in result.stderr


@pytest.mark.parametrize("flag", ["--keep-machine", "--keep-pod"])
def test_keep_machine_is_refused_on_a_target_that_makes_no_machine(
    comparable, provider, run_cli, monkeypatch, flag
):
    use_provider(monkeypatch, provider)
    result = run_cli("compare", flag)
    assert result.exit_code == 1
    assert result.stderr.endswith(
        "error: --keep-machine applies only to a target that makes a machine for the run "
        "(target `local` does not)\n"
    )
    assert provider.requests == []  # refused before anything was served or judged


@pytest.mark.parametrize("flag", ["--keep-machine", "--keep-pod"])
def test_rejudge_takes_no_keep_machine(run_cli, flag):
    result = run_cli("compare", "--rejudge", "compare_20260101-000000", flag)
    assert result.exit_code == 2
    assert "--rejudge makes no machine: --keep-machine does not apply" in result.stderr


def test_strip_reasoning():
    assert strip_reasoning("<think>a</think> answer ") == "answer"
    assert strip_reasoning("answer <think>cut") == "answer"
    assert strip_reasoning("leaked</think>answer") == "answer"
    assert strip_reasoning("one</think>two</think> answer") == "answer"
    assert strip_reasoning("<think>a</think>b</think>answer") == "answer"
    assert strip_reasoning("a<think>x</think>b<think>y</think>c") == "abc"


def test_parse_verdict():
    assert parse_verdict('Sure: {"verdict": " b ", "reason": " ok "} done') == ("B", "ok")
    assert parse_verdict('{"verdict": "TIE"}') == ("tie", "")
    assert parse_verdict('{"verdict": "C"}') is None
    assert parse_verdict("A") == ("A", "")
    assert parse_verdict("Tie.") == ("tie", "")
    assert parse_verdict("A is better") is None


def test_nearest_rank_and_order():
    assert nearest_rank([5, 1, 3, 2, 4], 50) == 3
    assert nearest_rank([5, 1, 3, 2, 4], 95) == 5
    assert nearest_rank([], 50) is None
    assert child_first(42, "q0001") == child_first(42, "q0001")
    assert len({child_first(7, f"q{i}") for i in range(20)}) == 2


def test_a_judge_set_to_the_parents_model_is_warned_of(comparable, provider, run_cli, monkeypatch):
    use_provider(monkeypatch, provider)
    config = comparable.dir / "overbrainer.toml"
    config.write_text(
        config.read_text() + '\n[roles.judge]\nprovider = "main"\nmodel = "parent-model"\n'
    )
    result = run_cli("compare", "--limit", "1")
    assert result.exit_code == 0, result.stderr
    assert (
        "warning: compare: the judge main/parent-model is the parent's model: a judge prefers "
        "its own answers, so the child's rate may be low; set roles.judge to another model"
    ) in result.stderr
    [directory] = comparable.run_dir.glob("compares/compare_*")
    assert json.loads((directory / "compare.json").read_text())["judge_is_parent"] is True
    config.write_text(config.read_text().replace(
        '[roles.judge]\nprovider = "main"\nmodel = "parent-model"',
        '[roles.judge]\nprovider = "main"\nmodel = "judge-model"',
    ))  # fmt: skip
    result = run_cli("compare", "--limit", "1")
    assert result.exit_code == 0, result.stderr
    assert "is the parent's model" not in result.stderr


def test_the_report_shows_answers_without_reasoning_tags_or_runs_of_blank_lines():
    from overbrainer.after.report import shown_answer

    assert shown_answer("<think>plan</think>\n\nFirst.\n\n\n\n  \nSecond.  \n") == (
        "First.\n\nSecond."
    )
    assert shown_answer("leaked</think>Answer</think>") == "Answer"
    assert shown_answer(None) == ""


def test_a_question_holding_a_line_separator_is_asked(tmp_path):
    """U+2028 is a line end to str.splitlines, not to JSON Lines: such a question was
    skipped (its record cut in two), and compare asked another in its place."""
    from overbrainer.after.evalset import eval_questions
    from overbrainer.project import Project

    run_dir = tmp_path / "runs" / "demo_20260101-000000"
    (run_dir / "data").mkdir(parents=True)
    records = [eval_record(0, "Why\u2028this?"), eval_record(1), eval_record(2)]
    (run_dir / "data" / "eval.jsonl").write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    )
    project = Project(tmp_path, None, {})  # type: ignore[arg-type]  # only its directory is read
    asked = eval_questions(project, run_dir, 2)
    assert [q["id"] for q in asked] == ["q0000", "q0001"]
    assert asked[0]["question"] == "Why\u2028this?"


def test_two_compares_in_one_second_get_two_directories(
    comparable, provider, run_cli, monkeypatch
):
    from overbrainer.after import compare as compare_module

    use_provider(monkeypatch, provider)
    monkeypatch.setattr(compare_module, "compare_id", lambda: "compare_20260101-000000")
    first = run_cli("compare", "--limit", "2")
    assert first.exit_code == 0, first.stderr
    judged = len(provider.chats())
    second = run_cli("compare", "--limit", "2")
    assert second.exit_code == 0, second.stderr
    names = sorted(p.name for p in comparable.run_dir.glob("compares/compare_*"))
    assert names == ["compare_20260101-000000", "compare_20260101-000000-2"]
    assert second.stdout.strip().splitlines()[-1].endswith("compare_20260101-000000-2/compare.md")
    assert len(provider.chats()) == 2 * judged  # judged again, not read from the first's file


def test_counts_read_as_english():
    from overbrainer.after.report import _counts

    one = {"wins": 1, "ties": 1, "losses": 0, "errors": 1, "unparsed": 0, "flipped": 1}
    assert _counts(one, "its parent") == (
        "1 win, 1 tie (1 flipped with the order), 1 loss, 0 unparsed"
    )
    many = {"wins": 2, "ties": 0, "losses": 3, "errors": 0, "unparsed": 1, "skipped": 2}
    assert _counts(many, "its base model") == (
        "2 wins, 0 ties (0 flipped with the order), 3 losses, 1 unparsed, 2 not judged (its "
        "base model gave no answer)"
    )
