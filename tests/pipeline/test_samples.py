"""Several answers a question: ``[roles.parent] samples = N`` asks N, each its own record
(resumed, priced and made stale on its own); ``[pipeline] select`` says which train."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

from tests.helpers.fake_batch import FakeBatchProvider
from tests.helpers.fake_provider import openai_completion
from tests.helpers.pipeline_data import PIPELINE_CONFIG, lines, seed_questions, write_project

from overbrainer.pipeline.agreement import final_result, majority
from overbrainer.pipeline.samples import sample_id

QUESTIONS = {("ownership", "moves"): ["Why move?", "What is a borrow?"],
             ("lifetimes", "scopes"): ["What is 'a?"]}  # fmt: skip


FULL = (
    PIPELINE_CONFIG.replace("subtopics = 2\nquestions_per_subtopic = 3",
                            "subtopics = 1\nquestions_per_subtopic = 2")
    .replace("subtopics = 1\nquestions_per_subtopic = 2\n\n[providers",
             "subtopics = 1\nquestions_per_subtopic = 1\n\n[providers")
)
"""Every subtopic and question seeded: only answers are left to ask."""


def config(samples: int, select: str = "all") -> str:
    return FULL.replace(
        "reasoning = true\n", f"reasoning = true\nsamples = {samples}\n"
    ).replace("[pipeline]\n", f'[pipeline]\nselect = "{select}"\n')


def project(project_dir, samples: int, select: str = "all") -> list[dict]:
    (project_dir / "overbrainer.toml").write_text(config(samples, select))
    return seed_questions(project_dir, QUESTIONS)


def plan_answers(run_cli) -> dict:
    shown = run_cli("plan", "--json")
    assert shown.exit_code == 0, shown.stderr
    return json.loads(shown.stdout)["stages"]["answers"]


def test_each_question_is_asked_samples_times_each_answer_a_record(
    run_cli, project_dir, provider
):
    questions = project(project_dir, 3)
    assert plan_answers(run_cli)["requests"] == 3 * len(questions)

    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("answers: 9 done, 0 skipped, 0 failed")
    # one request a question, asking for its 3 answers (`n`): its prompt paid once
    asked = Counter((seen.prompt, seen.body["n"]) for seen in provider.chats("parent-model"))
    assert asked == {(question["text"], 3): 1 for question in questions}
    assert "tokens 30 in, 180 out" in result.stdout
    answers = lines(project_dir, "answers.jsonl")
    assert {a["id"] for a in answers} == {
        sample_id(q["id"], k) for q in questions for k in range(3)
    }
    for record in answers:
        meta = record["meta"]
        if record["id"] in {q["id"] for q in questions}:
            assert "sample" not in meta  # the first reads as a project of one answer a question
        else:
            assert meta["sample"] in (1, 2) and sample_id(meta["question"], meta["sample"]) == (
                record["id"]
            )

    assert plan_answers(run_cli)["requests"] == 0
    again = run_cli("answers")
    assert again.stdout.startswith("answers: 0 done, 9 skipped")
    assert len(provider.chats("parent-model")) == len(questions)


def test_without_n_each_sample_is_a_request_of_its_own(run_cli, project_dir, provider):
    questions = project(project_dir, 3)
    config_path = project_dir / "overbrainer.toml"
    config_path.write_text(config_path.read_text().replace("samples = 3\n", "samples = 3\n"
                                                           "samples_n = false\n"))
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    asked = Counter(seen.prompt for seen in provider.chats("parent-model"))
    assert asked == {question["text"]: 3 for question in questions}
    assert all("n" not in seen.body for seen in provider.chats("parent-model"))
    assert "tokens 90 in, 180 out" in result.stdout


def test_a_server_that_ignores_n_is_asked_again_for_the_rest(run_cli, project_dir, provider):
    questions = project(project_dir, 3)
    provider.takes_n = False
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("answers: 9 done, 0 skipped, 0 failed")
    asked = Counter((seen.prompt, seen.body.get("n")) for seen in provider.chats("parent-model"))
    assert asked == {(q["text"], n): 1 for q in questions for n in (3, 2, None)}
    assert len(lines(project_dir, "answers.jsonl")) == 9


def test_the_budget_reserves_every_reply_a_request_asks_for(run_cli, project_dir, provider):
    """One reply at max_tokens fits in $0.1; three do not: the request is cut to fit."""
    project(project_dir, 3)
    with (project_dir / "overbrainer.toml").open("a") as file:
        file.write("\n[budget]\nmax_usd = 0.1\n")
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    first = provider.chats("parent-model")[0]
    assert first.body["n"] == 3
    assert 3 * first.body["max_tokens"] * 4e-6 <= 0.1 < 16384 * 3 * 4e-6
    assert "max_tokens lowered to" in result.stderr


def test_more_samples_later_ask_only_the_missing_ones_and_make_nothing_stale(
    run_cli, project_dir, provider
):
    """What a crash after 2 of 4 samples leaves: the next run asks for the 2 missing."""
    questions = project(project_dir, 2)
    assert run_cli("answers").exit_code == 0
    before = (project_dir / "data" / "answers.jsonl").read_text()
    (project_dir / "overbrainer.toml").write_text(config(4))

    shown = run_cli("plan", "--json")
    found = json.loads(shown.stdout)
    assert found["stages"]["answers"]["requests"] == 2 * len(questions)
    assert found["stale"]["answers"]["stale"] == 0  # how many, not what: no answer redone

    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("answers: 6 done, 6 skipped, 0 failed")
    later = provider.chats("parent-model")[len(questions):]
    assert sorted(seen.body["n"] for seen in later) == [2] * len(questions)
    after = (project_dir / "data" / "answers.jsonl").read_text()
    assert after.startswith(before)
    assert sorted(a["meta"].get("sample", 0) for a in lines(project_dir, "answers.jsonl")) == (
        sorted([0, 1, 2, 3] * len(questions))
    )


def test_a_stale_sample_is_redone_alone(run_cli, project_dir, provider):
    questions = project(project_dir, 2)
    assert run_cli("answers").exit_code == 0
    path = project_dir / "data" / "answers.jsonl"
    records = lines(project_dir, "answers.jsonl")
    # one sample made otherwise: its fingerprint is not the one it would have now
    second = sample_id(questions[0]["id"], 1)
    for record in records:
        if record["id"] == second:
            record["meta"]["fingerprint"] = "0123456789abcdef"
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    assert json.loads(run_cli("plan", "--json").stdout)["stale"]["answers"]["stale"] == 1

    redone = run_cli("answers", "--stale")
    assert redone.exit_code == 0, redone.stderr
    assert redone.stdout.startswith("answers: 1 done, 5 skipped")
    [again] = provider.chats("parent-model")[len(questions):]
    assert again.prompt == questions[0]["text"] and "n" not in again.body
    assert len(lines(project_dir, "answers.jsonl")) == 6


def test_split_trains_on_every_sample_and_keeps_eval_questions_out_of_train(
    run_cli, project_dir, provider
):
    questions = project(project_dir, 3)
    assert run_cli("answers").exit_code == 0
    result = run_cli("split")
    assert result.exit_code == 0, result.stderr
    train, evaluation = lines(project_dir, "train.jsonl"), lines(project_dir, "eval.jsonl")
    # one eval question (3 x 0.1, at least one), one answer of it; its 2 others train nowhere
    assert len(evaluation) == 1
    assert len(train) == 3 * (len(questions) - 1)
    assert "split: 6 train, 1 eval, 0 excluded, 0 orphaned, 2 held out" in result.stdout
    asked = evaluation[0]["messages"][-2]["content"]
    assert all(example["messages"][-2]["content"] != asked for example in train)


def _voting(seen) -> dict:
    """Per question, in the order asked: 42, 42, then 41: the third disagrees."""
    counts = _voting.asked  # type: ignore[attr-defined]
    counts[seen.prompt] += 1
    found = "41" if counts[seen.prompt] == 3 else "42"
    return openai_completion(f"Work it out.\n\nThe answer is {found}.", reasoning="r")


def test_select_agree_keeps_the_majority_and_rejects_the_rest_with_why(
    run_cli, project_dir, provider
):
    questions = project(project_dir, 3, "agree")
    _voting.asked = Counter()  # type: ignore[attr-defined]
    provider.on(lambda seen: seen.model == "parent-model", _voting, times=None)
    assert run_cli("answers").exit_code == 0
    result = run_cli("split")
    assert result.exit_code == 0, result.stderr
    assert "split: 4 train, 1 eval, 0 excluded, 0 orphaned, 3 not selected, 1 held out" in (
        result.stdout
    )
    train = lines(project_dir, "train.jsonl") + lines(project_dir, "eval.jsonl")
    assert all(example["messages"][-1]["content"].endswith("42.") for example in train)
    rejected = [r for r in lines(project_dir, "rejected.jsonl") if r["kind"] == "answer"]
    assert len(rejected) == len(questions)
    assert all(r["text"].endswith("is 41.") for r in rejected)
    reasons = [r for r in lines(project_dir, "rejected.reasons.jsonl") if r["kind"] == "answer"]
    assert {r["id"] for r in reasons} == {r["id"] for r in rejected}
    assert all("'41' is not the majority's '42'" in r["reason"] for r in reasons)

    again = run_cli("split")  # recorded once
    assert "3 not selected" in again.stdout
    assert len(lines(project_dir, "rejected.reasons.jsonl")) == len(reasons)

    shown = run_cli("history")
    [split_line] = [line for line in shown.stdout.splitlines() if line.startswith("split")]
    assert split_line.endswith("; select kept 6 of 9 answers (67%)")
    executions = run_cli("history", "--all").stdout
    assert executions.count("; select kept 6 of 9 answers (67%)") == 2


def test_select_all_keeps_disagreeing_answers(run_cli, project_dir, provider):
    project(project_dir, 3)
    _voting.asked = Counter()  # type: ignore[attr-defined]
    provider.on(lambda seen: seen.model == "parent-model", _voting, times=None)
    assert run_cli("answers").exit_code == 0
    result = run_cli("split")
    assert "not selected" not in result.stdout
    assert lines(project_dir, "rejected.jsonl") == []
    assert "select kept" not in run_cli("history", "--all").stdout
    history = (project_dir / ".overbrainer" / "history.jsonl").read_text().splitlines()
    assert set(json.loads(history[-1])["split"]) == {"train", "eval", "orphaned"}


def test_samples_is_the_parent_s_setting(run_cli, project_dir):
    (project_dir / "overbrainer.toml").write_text(
        PIPELINE_CONFIG.replace('model = "gen-model"\n', 'model = "gen-model"\nsamples = 2\n')
    )
    result = run_cli("plan")
    assert result.exit_code != 0
    assert "samples is the parent's setting, not generator's" in result.stderr
    (project_dir / "overbrainer.toml").write_text(config(1, "best"))
    refused = run_cli("plan")
    assert refused.exit_code != 0 and "pipeline.select" in refused.stderr


def test_the_final_result_of_an_answer():
    assert final_result("so \\boxed{1,000} and later 3") == "1000"
    assert final_result("The answer is (B).") == "B"
    assert final_result("Answer: $12.50") == "12.5"
    assert final_result("x\n```python\nprint(1)\n\n```\nthat's it") == "code:print(1)"
    assert final_result("It depends on the borrow checker.") is None
    assert final_result("The answer is a borrow, see above.") is None
    assert final_result("Answer: I think it moves.") is None
    assert final_result("So the answer is **C**.\nDone.") == "C"
    assert final_result("The final answer is 7.0") == final_result("the answer: 7")


def test_a_majority_is_more_than_any_other_result():
    assert majority(["A", "A", "B", None]) == "A"
    assert majority(["A", "B"]) is None
    assert majority([None, None]) is None
    assert majority(["A"]) == "A"


def test_the_batch_path_asks_each_sample_as_its_own_item(run_cli, tmp_path):
    batches = FakeBatchProvider(process_s=0.05).start()
    try:
        batched = write_project(tmp_path / "batched", batches.url, config(3).replace(
            "samples = 3\n", "samples = 3\nbatch = true\n").replace(
            "[pipeline]\n", "[pipeline]\nbatch_poll_s = 0.02\n"))  # fmt: skip
        questions = seed_questions(batched, QUESTIONS)
        result = run_cli("-C", str(batched), "answers")
        assert result.exit_code == 0, result.stderr
        assert batches.chats() == []
        wanted = sorted(sample_id(q["id"], k) for q in questions for k in range(3))
        assert sorted(batches.batch_items()) == wanted
        answers = lines(batched, "answers.jsonl")
        assert sorted(a["id"] for a in answers) == wanted
        assert all(a["meta"]["batch"] for a in answers)
        assert Counter(a["meta"].get("sample", 0) for a in answers) == {0: 3, 1: 3, 2: 3}
    finally:
        batches.stop()


def test_removing_a_question_or_its_answers_takes_every_sample(run_cli, project_dir, provider):
    first, second, third = project(project_dir, 2)
    assert run_cli("answers").exit_code == 0
    one = sample_id(first["id"], 1)
    result = run_cli("dataset", "rm", one, "--answer-only")
    assert result.exit_code == 0, result.stderr
    assert one not in {a["id"] for a in lines(project_dir, "answers.jsonl")}
    assert run_cli("dataset", "rm", first["id"], "--answer-only").exit_code == 0
    assert {a["meta"].get("question", a["id"]) for a in lines(project_dir, "answers.jsonl")} == (
        {q["id"] for q in (second, third)}
    )
    removed = run_cli("dataset", "rm", second["id"])
    assert removed.exit_code == 0, removed.stderr
    assert "2 answer" in removed.stdout
    assert len(lines(project_dir, "answers.jsonl")) == 2


JUDGE = '\n[roles.judge]\nprovider = "main"\nmodel = "judge-model"\n'


def _numbered(seen) -> dict:
    """The parent's answers to a question, in the order asked: v1, v2, v3."""
    counts = _numbered.asked  # type: ignore[attr-defined]
    counts[seen.prompt] += 1
    return openai_completion(f"Answer v{counts[seen.prompt]} to {seen.prompt}", reasoning="r")


def _prefers_v2(seen) -> dict:
    """A judge that prefers the answer v2 wherever it stands, and else the first."""
    answer_a = seen.prompt.split("Answer A:\n", 1)[1].split("\n\nAnswer B:", 1)[0]
    verdict = "B" if "v2" not in answer_a and "v2" in seen.prompt else "A"
    return openai_completion(f'{{"verdict": "{verdict}", "reason": "r"}}')


def judged_project(run_cli, project_dir, provider, judge=_prefers_v2):
    questions = project(project_dir, 3, "judge")
    with (project_dir / "overbrainer.toml").open("a") as file:
        file.write(JUDGE)
    provider.prices["judge-model"] = ("0.000001", "0.000001")
    _numbered.asked = Counter()  # type: ignore[attr-defined]
    provider.on(lambda seen: seen.model == "parent-model", _numbered, times=None)
    provider.on(lambda seen: seen.model == "judge-model", judge, times=None)
    return questions


def test_select_judge_keeps_the_answer_preferred_in_both_orders(run_cli, project_dir, provider):
    questions = judged_project(run_cli, project_dir, provider)
    shown = run_cli("plan", "--json")
    assert shown.exit_code == 0, shown.stderr
    planned = json.loads(shown.stdout)["stages"]["select"]
    assert planned["requests"] == 2 * 2 * len(questions)  # two pairs, both orders at most
    assert planned["usd"] > 0 and planned["basis"] == "prior"
    table = run_cli("plan").stdout
    assert any(line.split()[:2] == ["select", "12"] for line in table.splitlines())

    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    assert json.loads(run_cli("plan", "--json").stdout)["stages"]["select"]["requests"] == 0
    # v1 against v2: both orders (v2 wins); v2 against v3: one order (v2 holds)
    assert len(provider.chats("judge-model")) == 3 * len(questions)
    kept = lines(project_dir, "preferences.jsonl")
    assert Counter(r["winner"] for r in kept) == {"challenger": 3, "holder": 3}

    again = run_cli("answers")  # every verdict kept: nothing asked again
    assert again.exit_code == 0, again.stderr
    assert len(provider.chats("judge-model")) == 3 * len(questions)
    # the judge's requests measured apart from the answers'
    measured = [json.loads(line) for line in
                (project_dir / ".overbrainer" / "requests.jsonl").read_text().splitlines()]
    assert {(m["stage"], m["model"], m["requests"]) for m in measured} == {
        ("answers", "parent-model", 9), ("select", "judge-model", 9)
    }

    split = run_cli("split")
    assert split.exit_code == 0, split.stderr
    assert "6 not selected" in split.stdout
    examples = lines(project_dir, "train.jsonl") + lines(project_dir, "eval.jsonl")
    assert len(examples) == len(questions)
    assert all(e["messages"][-1]["content"].startswith("Answer v2 ") for e in examples)
    reasons = [r for r in lines(project_dir, "rejected.reasons.jsonl") if r["kind"] == "answer"]
    assert len(reasons) == 6
    winners = {sample_id(q["id"], 1) for q in questions}
    assert all(
        any(f"the judge (judge-model) preferred answer {w}" in r["reason"] for w in winners)
        for r in reasons
    )


def test_a_judge_that_prefers_a_position_keeps_the_first_answer(run_cli, project_dir, provider):
    questions = judged_project(
        run_cli, project_dir, provider, lambda seen: openai_completion('{"verdict": "A"}')
    )
    assert run_cli("answers").exit_code == 0
    # each challenger loses the first order: the second is never asked
    assert len(provider.chats("judge-model")) == 2 * len(questions)
    assert "6 not selected" in run_cli("split").stdout
    examples = lines(project_dir, "train.jsonl") + lines(project_dir, "eval.jsonl")
    assert all(e["messages"][-1]["content"].startswith("Answer v1 ") for e in examples)


def test_answers_not_judged_yet_are_all_kept_until_they_are(run_cli, project_dir, provider):
    questions = judged_project(run_cli, project_dir, provider)
    config_path = project_dir / "overbrainer.toml"
    config_path.write_text(config_path.read_text().replace('select = "judge"', 'select = "all"'))
    assert run_cli("answers").exit_code == 0
    assert provider.chats("judge-model") == []
    config_path.write_text(config_path.read_text().replace('select = "all"', 'select = "judge"'))
    split = run_cli("split")
    assert split.exit_code == 0, split.stderr
    assert "3 question(s) with several answers are not judged yet" in split.stderr
    assert "not selected" not in split.stdout

    judged = run_cli("answers")
    assert judged.exit_code == 0, judged.stderr
    assert judged.stdout.startswith("answers: 0 done, 9 skipped")
    assert len(provider.chats("judge-model")) == 3 * len(questions)
    assert "6 not selected" in run_cli("split").stdout

    # another judge prompt: every pair judged again
    (project_dir / "prompts" / "judge.txt").write_text(
        "Q {{ question }}\nAnswer A:\n{{ answer_a }}\n\nAnswer B:\n{{ answer_b }}\n"
    )
    assert run_cli("answers").exit_code == 0
    assert len(provider.chats("judge-model")) == 2 * 3 * len(questions)


def test_the_quickstart_s_shipped_answers_are_still_current(run_cli, tmp_path):
    """``samples`` and ``samples_n`` are how many and how, not what: an answer made
    before they existed keeps its fingerprint."""
    root = Path(__file__).resolve().parents[2] / "examples" / "quickstart"
    copy = tmp_path / "quickstart"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns(".overbrainer", "runs", ".venv"))
    shown = run_cli("-C", str(copy), "plan", "--json")
    assert shown.exit_code == 0, shown.stderr
    assert json.loads(shown.stdout)["stale"]["answers"] == {
        "stale": 0, "unknown": 0, "redo": None
    }


def test_a_question_with_an_imported_answer_gets_no_samples_beside_it(
    run_cli, project_dir, provider, tmp_path
):
    (project_dir / "overbrainer.toml").write_text(config(3))
    rows = [{"question": "Why does a move invalidate the source?", "answer": "Ownership moved."},
            {"question": "When is a value dropped at the end of its scope?"}]  # fmt: skip
    seed = tmp_path / "seed.jsonl"
    seed.write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert run_cli("dataset", "import", str(seed), "--topic", "ownership").exit_code == 0
    planned = plan_answers(run_cli)
    result = run_cli("answers", "--topic", "ownership")
    assert result.exit_code == 0, result.stderr
    assert [(s.prompt, s.body["n"]) for s in provider.chats("parent-model")] == [
        (rows[1]["question"], 3)
    ]
    assert result.stdout.startswith("answers: 3 done, 1 skipped")
    assert planned["requests"] - plan_answers(run_cli)["requests"] == 3


def test_config_check_shows_the_samples_and_the_selection(run_cli, project_dir):
    (project_dir / "overbrainer.toml").write_text(
        config(4, "agree").replace("samples = 4\n", "samples = 4\nsamples_n = false\n")
    )
    shown = run_cli("config", "check")
    assert shown.exit_code == 0, shown.stderr
    assert "samples: 4, samples_n: false)" in shown.stdout
    assert "pipeline.select = agree" in shown.stdout
