"""Held-out questions of the user's own (``[eval] files``) in ``compare``: asked of the child
(the stand-in llama.cpp server) and of the parent (the loopback provider, paid, kept and
reused), picked with ``--eval NAME``."""

from __future__ import annotations

import json

import pytest
from tests.helpers.compare import JUDGE_PROMPT, use_provider
from tests.helpers.fake_provider import Reply, openai_completion

from overbrainer.after.evalset import eval_sets
from overbrainer.config.model import Settings

HELD_OUT = [
    {"question": "What does the borrow checker check?", "answer": "That references are valid."},
    {"question": "When is a value dropped?"},
    {"question": "Why is Rc not Send?", "answer": "Its count is not atomic."},
]


@pytest.fixture
def run(request):
    """test_compare's finished run: a GGUF, the stand-in server, an eval split of 8."""
    return request.getfixturevalue("comparable")


def with_eval_files(project_dir, sets: dict[str, str]) -> None:
    """``[eval] files = ["evals/*.jsonl"]`` and the files ``sets`` gives, by name."""
    with (project_dir / "overbrainer.toml").open("a", encoding="utf-8") as config:
        config.write('\n[eval]\nfiles = ["evals/*.jsonl"]\n')
    (project_dir / "evals").mkdir(exist_ok=True)
    for name, text in sets.items():
        (project_dir / "evals" / f"{name}.jsonl").write_text(text, encoding="utf-8")


def jsonl(records) -> str:
    return "".join(json.dumps(record) + "\n" for record in records)


def parent_chats(provider):
    return [seen for seen in provider.chats() if JUDGE_PROMPT not in seen.prompt]


def compares(run_dir):
    return sorted(run_dir.glob("compares/compare_*"))


def read_lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def paid_by_execution(spend) -> dict[str, list[dict]]:
    """The journal's paid lines by the stage execution that paid them, in order."""
    paid: dict[str, list[dict]] = {}
    for line in spend:
        if "paid" in line:
            paid.setdefault(line["paid"].split("#")[0], []).append(line)
    return paid


def test_compare_eval_asks_a_set_of_child_and_parent_and_keeps_the_parents_answers(
    run, provider, run_cli, monkeypatch
):
    use_provider(monkeypatch, provider)
    with_eval_files(run.dir, {"rust": jsonl(HELD_OUT)})
    result = run_cli("compare", "--eval", "rust")
    assert result.exit_code == 0, result.stderr
    [directory] = compares(run.run_dir)
    data = json.loads((directory / "compare.json").read_text())
    assert data["eval"] == "rust"
    rows = data["questions"]
    assert [row["id"] for row in rows] == ["rust:1", "rust:2", "rust:3"]
    for row, item in zip(rows, HELD_OUT, strict=True):
        assert row["set"] == "rust"
        assert row["question"] == item["question"]
        assert row["reference"] == item.get("answer")
        assert row["child"] == f"Child answer to: {item['question']}"
        assert row["parent"] == f"The answer to: {item['question']}"  # its reasoning apart
        assert row["verdict"] == "win"
    # The parent was asked each question once, as the child is (no system prompt set).
    asked = parent_chats(provider)
    assert sorted(seen.prompt for seen in asked) == sorted(i["question"] for i in HELD_OUT)
    assert all(seen.model == "parent-model" and seen.system is None for seen in asked)
    # Judged against the parent's answers.
    judged = [seen for seen in provider.chats() if JUDGE_PROMPT in seen.prompt]
    assert len(judged) == 6
    assert all("The answer to: " in seen.prompt for seen in judged)
    # Paid like a stage: the spend journal, the history, the kept answers; the judge's
    # requests are a second execution, after the parent's answers.
    spend = read_lines(run.dir / ".overbrainer" / "spend.jsonl")
    paid = paid_by_execution(spend)
    assert [len(lines) for lines in paid.values()] == [3, 6]
    answered = next(iter(paid.values()))
    assert all(line["cost"] > 0 for line in answered)
    entry, judged_entry = read_lines(run.dir / ".overbrainer" / "history.jsonl")
    assert (entry["stage"], entry["status"], entry["done"]) == ("compare", "ok", 3)
    assert entry["model"] == "parent-model" and entry["cost"] == pytest.approx(
        sum(line["cost"] for line in answered)
    )
    assert (judged_entry["stage"], judged_entry["done"]) == ("compare", 3)
    shown = run_cli("history")
    assert shown.exit_code == 0, shown.stderr
    parent_in, parent_out = entry["input_tokens"], entry["output_tokens"]
    assert (parent_in, parent_out) == (30, 60)
    assert shown.stdout.startswith(
        "compare    2 run(s), 6 done, 0 failed; tokens "
        f"{parent_in + judged_entry['input_tokens']} in, "
        f"{parent_out + judged_entry['output_tokens']} out; $"
    )
    kept = read_lines(run.dir / ".overbrainer" / "eval_answers.jsonl")
    assert sorted(record["question"] for record in kept) == sorted(i["question"] for i in HELD_OUT)
    # The cost per 1,000 requests is the parent's answers' (10 tokens in, 20 out each).
    assert data["summary"]["parent_per_1k"] == round((10 * 3.0 + 20 * 4.0) / 1000, 6)

    # A second compare asks the parent nothing: its answers are kept.
    result = run_cli("compare", "--eval", "rust")
    assert result.exit_code == 0, result.stderr
    assert len(parent_chats(provider)) == 3
    # A question edited is asked again, alone.
    edited = [*HELD_OUT[:2], {"question": "Why is Arc Send?"}]
    (run.dir / "evals" / "rust.jsonl").write_text(jsonl(edited))
    result = run_cli("compare", "--eval", "rust", "--limit", "3")
    assert result.exit_code == 0, result.stderr
    assert [seen.prompt for seen in parent_chats(provider)][3:] == ["Why is Arc Send?"]


def test_compare_without_eval_asks_the_split_then_every_set(
    run, provider, run_cli, monkeypatch
):
    use_provider(monkeypatch, provider)
    with_eval_files(run.dir, {"rust": jsonl(HELD_OUT), "extra": jsonl(HELD_OUT[:1])})
    result = run_cli("compare", "--limit", "2")
    assert result.exit_code == 0, result.stderr
    [directory] = compares(run.run_dir)
    data = json.loads((directory / "compare.json").read_text())
    assert data["eval"] is None
    assert [(row["set"], row["id"]) for row in data["questions"]] == [
        ("split", "q0000"), ("split", "q0001"), ("extra", "extra:1"), ("rust", "rust:1"),
        ("rust", "rust:2"),
    ]
    # The split's questions are judged against the parent's answers in eval.jsonl: only
    # the two distinct file questions were asked of the parent (one is in both sets).
    assert len(parent_chats(provider)) == 2
    assert data["questions"][0]["parent"] == "Parent answer 0."
    # `--eval split` is the eval split alone, as compare was before [eval] files.
    result = run_cli("compare", "--eval", "split", "--limit", "2")
    assert result.exit_code == 0, result.stderr
    data = json.loads((compares(run.run_dir)[-1] / "compare.json").read_text())
    assert [row["id"] for row in data["questions"]] == ["q0000", "q0001"]


def test_an_unknown_set_is_refused_naming_the_sets_before_anything_runs(
    run, provider, run_cli, monkeypatch
):
    use_provider(monkeypatch, provider)
    with_eval_files(run.dir, {"rust": jsonl(HELD_OUT)})
    result = run_cli("compare", "--eval", "python")
    assert result.exit_code == 1
    assert result.stderr.strip().endswith(
        "error: no eval set `python`: the sets are `split`, `rust` (the files of [eval] files "
        "in overbrainer.toml, each named by its file)"
    )
    assert compares(run.run_dir) == [] and provider.chats() == []
    result = run_cli("compare", "--rejudge", "compare_x", "--eval", "rust")
    assert result.exit_code == 2
    assert "--rejudge takes none of --run, --limit, --eval and --against" in result.stderr


def test_a_malformed_line_is_named_and_nothing_is_asked(
    run, provider, run_cli, monkeypatch
):
    use_provider(monkeypatch, provider)
    with_eval_files(run.dir, {"rust": jsonl(HELD_OUT[:1]) + '{"prompt": "no"}\n'})
    result = run_cli("compare", "--eval", "rust")
    assert result.exit_code == 1
    assert "error: evals/rust.jsonl:2: not {\"question\": \"...\", \"answer\": \"...\"}" in (
        result.stderr
    )
    assert "Traceback" not in result.stderr
    assert compares(run.run_dir) == [] and provider.chats() == []


def test_the_budget_refuses_the_parents_answers_before_a_machine_is_made(
    run, provider, run_cli, monkeypatch
):
    use_provider(monkeypatch, provider)
    with_eval_files(run.dir, {"rust": jsonl(HELD_OUT)})
    with (run.dir / "overbrainer.toml").open("a", encoding="utf-8") as config:
        config.write("\n[budget]\nmax_usd = 0.000001\n")
    result = run_cli("compare", "--eval", "rust")
    assert result.exit_code == 1
    assert "error: compare: " in result.stderr and "raise the budget" in result.stderr
    assert provider.chats() == [] and compares(run.run_dir) == []
    [entry] = read_lines(run.dir / ".overbrainer" / "history.jsonl")
    assert (entry["stage"], entry["status"], entry["done"]) == ("compare", "failed", 0)


def test_a_question_the_parent_fails_is_said_and_asked_again_next_time(
    run, provider, run_cli, monkeypatch
):
    use_provider(monkeypatch, provider)
    monkeypatch.setenv("OVERBRAINER_PIPELINE__MAX_RETRIES", "0")
    with_eval_files(run.dir, {"rust": jsonl(HELD_OUT)})
    failing = HELD_OUT[1]["question"]
    refused = Reply({"error": {"message": "the model refused the request"}}, status=400)
    provider.on(lambda seen: seen.prompt == failing, refused, times=1)
    result = run_cli("compare", "--eval", "rust")
    assert result.exit_code == 1
    assert "compare: rust:2 failed: " in result.stderr
    assert (
        "error: compare: the parent failed on 1 held-out question(s) (the warnings above say "
        "why); the answers it gave are kept: compare again asks the rest"
    ) in result.stderr
    assert compares(run.run_dir) == []
    assert len(read_lines(run.dir / ".overbrainer" / "eval_answers.jsonl")) == 2
    [entry] = read_lines(run.dir / ".overbrainer" / "history.jsonl")
    assert (entry["status"], entry["done"], entry["failed"]) == ("failed", 2, 1)
    asked_before = len(parent_chats(provider))
    result = run_cli("compare", "--eval", "rust")
    assert result.exit_code == 0, result.stderr
    assert [seen.prompt for seen in parent_chats(provider)][asked_before:] == [failing]


def settings_with(files: list[str]) -> Settings:
    return Settings.model_validate({
        "project": {"name": "demo"},
        "roles": {"generator": {"provider": "p", "model": "m"},
                  "parent": {"provider": "p", "model": "m"}},
        "eval": {"files": files},
    })  # fmt: skip


def test_a_set_is_named_by_its_file_once(tmp_path):
    for folder in ("evals", "more"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "rust.jsonl").write_text(jsonl(HELD_OUT[:1]))
    (tmp_path / "evals" / "go.jsonl").write_text("")
    found = eval_sets(tmp_path, settings_with(["evals/*.jsonl"]))
    assert {name: len(s.items) for name, s in found.items()} == {"go": 0, "rust": 1}
    assert found["rust"].items[0].answer == HELD_OUT[0]["answer"]
    with pytest.raises(Exception, match=r"evals/rust.jsonl and more/rust.jsonl are both the set "
                       "`rust`"):
        eval_sets(tmp_path, settings_with(["evals/*.jsonl", "more/*.jsonl"]))
    (tmp_path / "more" / "split.jsonl").write_text("")
    with pytest.raises(Exception, match=r"more/split.jsonl: a set cannot be named `split`"):
        eval_sets(tmp_path, settings_with(["more/split.jsonl"]))


def test_a_parents_answer_cut_short_is_judged_and_said_and_asked_again_with_more_tokens(
    run, provider, run_cli, monkeypatch
):
    use_provider(monkeypatch, provider)
    with_eval_files(run.dir, {"rust": jsonl(HELD_OUT)})
    cut = HELD_OUT[0]["question"]
    provider.on(
        lambda seen: seen.prompt == cut,
        openai_completion("The borrow checker checks that", finish="length"),
        times=1,
    )
    result = run_cli("compare", "--eval", "rust")
    assert result.exit_code == 0, result.stderr
    assert (
        "warning: compare: the parent's answer to rust:1 is truncated (cut at "
        "roles.parent.max_tokens: raised, compare asks it again): judged as it is"
    ) in result.stderr
    [directory] = compares(run.run_dir)
    rows = json.loads((directory / "compare.json").read_text())["questions"]
    assert rows[0]["parent"] == "The borrow checker checks that"
    # The parent's settings are part of what an answer is kept by: raised, asked again.
    monkeypatch.setenv("OVERBRAINER_ROLES__PARENT__MAX_TOKENS", "32000")
    result = run_cli("compare", "--eval", "rust")
    assert result.exit_code == 0, result.stderr
    assert "is truncated" not in result.stderr
    assert len(parent_chats(provider)) == 6
