"""compare --against: the child against its untrained base model (a GGUF made from it as
export makes the child's, by the stand-in toolchain, served by the stand-in llama.cpp server,
kept with its answers for later compares), against its parent, against another run's child;
the judge (the loopback provider) scripted."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from tests.helpers.compare import JUDGE_PROMPT, eval_record
from tests.helpers.fake_provider import FakeProvider, openai_completion

from overbrainer.after.metrics import length_controlled, wilson
from overbrainer.after.report import interval

QUESTIONS = 12


def answer_a(seen) -> str:
    return seen.prompt.split("Answer A:\n", 1)[1]


def prefer_child(monkeypatch, provider: FakeProvider) -> None:
    """A judge that prefers the child's answer to any other."""
    monkeypatch.setenv("OVERBRAINER_PROVIDERS__MAIN__BASE_URL", provider.url)

    def reply(seen):
        chosen = "A" if answer_a(seen).startswith("Child answer") else "B"
        return openai_completion(f'{{"verdict": "{chosen}", "reason": "It is right."}}')

    provider.on(lambda seen: JUDGE_PROMPT in seen.prompt, reply, times=None)


def write_eval(run_dir: Path, records: list[dict]) -> None:
    (run_dir / "data" / "eval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


@pytest.fixture
def based(comparable, tmp_path):
    """The finished run, its axolotl.yaml naming a base model directory as training saw it."""
    base = tmp_path / "base-model"
    base.mkdir()
    (base / "config.json").write_text("{}")
    (comparable.run_dir / "axolotl.yaml").write_text(f"base_model: {base}\nsequence_len: 384\n")
    write_eval(comparable.run_dir, [eval_record(i) for i in range(QUESTIONS)])
    return comparable


def percent_interval(successes: int, trials: int) -> str:
    return interval(list(wilson(successes, trials) or ()))


def test_compare_judges_the_child_against_its_base_and_its_parent(
    based, provider, run_cli, monkeypatch
):
    prefer_child(monkeypatch, provider)
    result = run_cli("compare")
    assert result.exit_code == 0, result.stderr
    [directory] = based.run_dir.glob("compares/compare_*")
    lines = result.stdout.splitlines()
    both = percent_interval(QUESTIONS, QUESTIONS)
    assert lines[:3] == [
        f"compare: against its base model: win-or-tie 100.0% (95% interval {both}; "
        f"length-controlled 100.0%) over {QUESTIONS} questions: {QUESTIONS} wins, 0 ties "
        "(0 flipped with the order), 0 losses, 0 unparsed",
        f"compare: against its parent: win-or-tie 100.0% (95% interval {both}; "
        f"length-controlled 100.0%) over {QUESTIONS} questions: {QUESTIONS} wins, 0 ties "
        "(0 flipped with the order), 0 losses, 0 unparsed",
        f"compare: distillation helped: the child wins or ties 100.0% against its base model "
        f"(95% interval {both}, above 50%)",
    ]
    # The base's GGUF: made from the base model's directory on the target (the converter
    # saw it), quantized as the child was, kept per base model for later compares.
    [kept] = (based.dir / ".overbrainer" / "bases").glob("base-model-*")
    record = json.loads((kept / "base.json").read_text())
    assert record["quantize"] == "Q4_K_M" and record["base_model"].endswith("base-model")
    assert (kept / record["file"]).read_bytes().startswith(b"GGUF converted auto from ")
    assert b"quantized 15" in (kept / record["file"]).read_bytes()  # Q4_K_M, as the child's
    assert not list(directory.glob("*.gguf"))  # the served copy is removed
    data = json.loads((directory / "compare.json").read_text())
    assert [entry["name"] for entry in data["against"]] == ["base", "parent"]
    assert data["summary"] == data["against"][1]["summary"]  # the parent's, as before
    assert data["opponents"]["base"]["gguf_sha256"] == record["sha256"]
    for question in data["questions"]:
        base = question["against"]["base"]
        assert base["answer"] == f"Base answer to: {question['question']}"
        assert base["verdict"] == "win" and question["verdict"] == "win"
    judged = [seen for seen in provider.chats() if JUDGE_PROMPT in seen.prompt]
    against_base = [seen for seen in judged if "Base answer to:" in seen.prompt]
    assert len(judged) == 4 * QUESTIONS and len(against_base) == 2 * QUESTIONS
    assert not any("Reference answer" in seen.prompt for seen in judged)  # not asked for
    report = (directory / "compare.md").read_text()
    assert "- Against: its base model, its parent" in report
    assert "## Against its base model" in report and "## Against its parent" in report
    assert "- Distillation helped: the child wins or ties 100.0% against its base model" in report
    assert "**Base model:**" in report
    assert "logistic regression of each question's win-or-tie on tanh(d / sd(d))" in report


def test_a_later_compare_reuses_the_base_gguf_and_its_answers(
    based, provider, run_cli, monkeypatch
):
    prefer_child(monkeypatch, provider)
    assert run_cli("compare", "--limit", "4").exit_code == 0
    [kept] = (based.dir / ".overbrainer" / "bases").glob("*/base.json")
    made = kept.stat().st_mtime_ns
    result = run_cli("compare", "--limit", "6")
    assert result.exit_code == 0, result.stderr
    assert "making a GGUF" not in result.stderr  # made once
    assert kept.stat().st_mtime_ns == made
    assert (
        "compare: the base model answered 2 questions; 4 answers kept from earlier compares "
        "reused"
    ) in result.stderr
    newest = max(based.run_dir.glob("compares/compare_*"))
    lines = (newest / "base_answers.jsonl").read_text().splitlines()
    answers = [json.loads(line) for line in lines]
    assert [answer["id"] for answer in answers] == [f"q{i:04d}" for i in range(6)]
    assert result.stdout.startswith("compare: against its base model: win-or-tie 100.0%")


def test_against_base_alone_fails_clearly_when_the_base_cannot_be_served(
    comparable,  # its base model is no directory
    provider,
    run_cli,
    monkeypatch,
):
    prefer_child(monkeypatch, provider)
    result = run_cli("compare", "--against", "base")
    assert result.exit_code == 1
    [directory] = comparable.run_dir.glob("compares/compare_*")
    assert result.stderr.endswith(
        f"error: compare {directory.name}: the base model models/tiny cannot be served: making "
        "its GGUF failed: models/tiny is not a directory, and as a Hugging Face id: it is not in "
        "the Hub cache and HF_HUB_OFFLINE is set\n"
    )
    assert not any(JUDGE_PROMPT in seen.prompt for seen in provider.chats())


def test_against_parent_makes_no_base(based, provider, run_cli, monkeypatch):
    prefer_child(monkeypatch, provider)
    result = run_cli("compare", "--against", "parent", "--limit", "3")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("compare: against its parent: win-or-tie 100.0%")
    assert "base model" not in result.stdout
    assert not (based.dir / ".overbrainer" / "bases").exists()


def test_against_another_runs_child(based, provider, run_cli, monkeypatch):
    prefer_child(monkeypatch, provider)
    other = "demo-project-20260102-000000"
    other_dir = based.dir / "runs" / other
    shutil.copytree(based.run_dir, other_dir)
    record = json.loads((other_dir / "run.json").read_text())
    record.update(id=other, remote_dir=str(other_dir.resolve()))
    (other_dir / "run.json").write_text(json.dumps(record))
    result = run_cli("compare", "--run", based.run_id, "--against", other, "--limit", "3")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith(f"compare: against run {other}'s child: win-or-tie 100.0%")
    [directory] = based.run_dir.glob("compares/compare_*")
    data = json.loads((directory / "compare.json").read_text())
    assert "summary" not in data  # not against the parent: push and the card read none
    name = f"run:{other}"
    assert [q["against"][name]["answer"] for q in data["questions"]] == [
        f"Other answer to: {q['question']}" for q in data["questions"]
    ]
    result = run_cli("compare", "--against", based.run_id, "--run", based.run_id)
    assert result.exit_code == 1
    assert f"--against {based.run_id}: that is the run compared; name another run" in (
        result.stderr
    )


def test_reference_shows_the_judge_the_parents_answer_against_the_base(
    based, provider, run_cli, monkeypatch
):
    prefer_child(monkeypatch, provider)
    config = based.dir / "overbrainer.toml"
    config.write_text(config.read_text() + "\n[compare]\nreference = true\n")
    result = run_cli("compare", "--limit", "2")
    assert result.exit_code == 0, result.stderr
    judged = [seen for seen in provider.chats() if JUDGE_PROMPT in seen.prompt]
    against_base = [seen for seen in judged if "Base answer to:" in seen.prompt]
    assert len(against_base) == 4
    for seen in against_base:
        asked = seen.prompt.split("Question:\n", 1)[1].split("\n", 1)[0]
        index = int(asked.split(":")[0].split()[1])
        assert "Reference answer (for checking facts and results" in seen.prompt
        assert f"\nParent answer {index}.\n" in seen.prompt
        assert "reasoning" not in seen.prompt  # the parent's reasoning is left out
    assert not any("Reference answer" in s.prompt for s in judged if s not in against_base)
    [directory] = based.run_dir.glob("compares/compare_*")
    report = (directory / "compare.md").read_text()
    assert "- The judge was shown the parent's answer as a reference." in report


def test_a_question_the_base_does_not_answer_is_not_judged_against_it(
    based, provider, run_cli, monkeypatch
):
    prefer_child(monkeypatch, provider)
    records = [eval_record(0), eval_record(1, "Please BASEFAIL here"), eval_record(2)]
    write_eval(based.run_dir, records)
    result = run_cli("compare")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[0].endswith(
        "over 3 questions: 2 wins, 0 ties (0 flipped with the order), 0 losses, 0 unparsed, "
        "1 not judged (its base model gave no answer)"
    )
    [directory] = based.run_dir.glob("compares/compare_*")
    data = json.loads((directory / "compare.json").read_text())
    assert data["against"][0]["summary"]["win_or_tie"] == 1.0  # of the 2 judged
    assert data["questions"][1]["against"]["base"]["verdict"] == "skipped"


def test_every_eval_question_is_compared_by_default_so_100_or_more_when_there_are(
    based, provider, run_cli, monkeypatch
):
    prefer_child(monkeypatch, provider)
    write_eval(based.run_dir, [eval_record(i) for i in range(105)])
    result = run_cli("compare", "--against", "parent")
    assert result.exit_code == 0, result.stderr
    assert "over 105 questions" in result.stdout.splitlines()[0]


def test_the_length_controlled_rate_removes_a_preference_for_length():
    """A judge that prefers the longer answer: the child, longer on 30 of 40 questions,
    wins those; at equal length it is back near even."""
    outcomes = [(True, 200.0 + 10 * i) for i in range(30)]
    outcomes += [(False, -150.0 - 10 * i) for i in range(10)]
    found = length_controlled(outcomes)
    assert found is not None
    assert found["win_or_tie"] < 0.75 - 0.1  # below the raw rate
    assert abs(found["win_or_tie"] - 0.5) < 0.2
    assert found["slope"] > 0
    # No length preference (each verdict as often longer as shorter): the raw rate.
    mixed = [(i % 4 != 0, sign * 100.0 * (1 + i % 3)) for i in range(20) for sign in (1, -1)]
    raw = sum(won for won, _ in mixed) / len(mixed)
    unbiased = length_controlled(mixed)
    assert unbiased is not None and abs(unbiased["win_or_tie"] - raw) < 0.01
    # Every verdict the same, or too few questions: the raw rate, or none.
    assert (length_controlled([(True, float(i)) for i in range(12)]) or {}).get("win_or_tie") == 1.0
    assert length_controlled([(True, 1.0)] * 9) is None


def test_rejudge_judges_again_against_each_other(based, provider, run_cli, monkeypatch):
    prefer_child(monkeypatch, provider)
    assert run_cli("compare", "--limit", "3").exit_code == 0
    [directory] = based.run_dir.glob("compares/compare_*")
    [verdicts] = directory.glob("verdicts-base-*.jsonl")
    verdicts.unlink()  # as if another judge: the base's verdicts are asked again, no others
    before = len(provider.chats())
    result = run_cli("compare", "--rejudge", directory.name)
    assert result.exit_code == 0, result.stderr
    asked = provider.chats()[before:]
    assert len(asked) == 6 and all("Base answer to:" in seen.prompt for seen in asked)
    lines = result.stdout.splitlines()
    assert lines[0].startswith("compare: against its base model: win-or-tie 100.0%")
    assert lines[1].startswith("compare: against its parent: win-or-tie 100.0%")
    # A compare stopped before the base was served: judged against the parent, and said.
    setup = json.loads((directory / "setup.json").read_text())
    del setup["opponents"]["base"]
    (directory / "setup.json").write_text(json.dumps(setup))
    result = run_cli("compare", "--rejudge", directory.name)
    assert result.exit_code == 0, result.stderr
    assert "compare: base not served (the compare stopped first): not judged" in result.stderr
    assert result.stdout.startswith("compare: against its parent: win-or-tie 100.0%")


def test_a_base_that_cannot_be_served_is_said_and_the_parent_still_judged(
    based, provider, run_cli, monkeypatch
):
    prefer_child(monkeypatch, provider)
    unloadable = based.dir.parent / "unloadable-base"  # the server cannot load its GGUF
    (based.dir.parent / "base-model").rename(unloadable)
    (based.run_dir / "axolotl.yaml").write_text(f"base_model: {unloadable}\n")
    result = run_cli("compare", "--limit", "2")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("compare: against its parent: win-or-tie 100.0%")
    assert lines[1].startswith(
        f"compare: not against the base model: the base model {unloadable} cannot be served: "
        "serving it failed: compare "
    )
    assert "llama-server exited before it was ready" in lines[1]
    assert "; comparing against the parent only" in result.stderr
    result = run_cli("compare", "--limit", "2", "--against", "base")
    assert result.exit_code == 1
    assert "cannot be served: serving it failed: " in result.stderr


def test_rejudge_takes_no_against(run_cli):
    result = run_cli("compare", "--rejudge", "compare_20260101-000000", "--against", "base")
    assert result.exit_code == 2
    assert "--rejudge takes none of --run, --limit, --eval and --against" in result.stderr


def test_an_eval_file_s_own_answer_is_the_reference(based, provider, run_cli, monkeypatch):
    prefer_child(monkeypatch, provider)
    (based.dir / "evals").mkdir()
    (based.dir / "evals" / "own.jsonl").write_text(
        json.dumps({"question": "Question 7: why own?", "answer": "The file's own answer."}) + "\n"
    )
    config = based.dir / "overbrainer.toml"
    config.write_text(
        config.read_text() + '\n[compare]\nreference = true\n\n[eval]\nfiles = ["evals/*.jsonl"]\n'
    )
    result = run_cli("compare", "--eval", "own")
    assert result.exit_code == 0, result.stderr
    judged = [seen for seen in provider.chats() if JUDGE_PROMPT in seen.prompt]
    against_base = [seen for seen in judged if "Base answer to:" in seen.prompt]
    assert against_base
    for seen in against_base:
        assert "The file's own answer." in seen.prompt
        assert "Parent answer" not in seen.prompt.split("Reference answer", 1)[1]


def test_unread_verdicts_against_each_are_said_in_one_error(based, provider, run_cli, monkeypatch):
    monkeypatch.setenv("OVERBRAINER_PROVIDERS__MAIN__BASE_URL", provider.url)
    provider.on(
        lambda seen: JUDGE_PROMPT in seen.prompt,
        lambda seen: openai_completion("I cannot decide."),
        times=None,
    )
    result = run_cli("compare", "--limit", "2")
    assert result.exit_code == 1
    assert (
        "error: against its base model, 2 of 2; against its parent, 2 of 2 verdicts could not "
        "be read"
    ) in (
        result.stderr
    ), result.stderr
