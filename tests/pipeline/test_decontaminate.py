"""Decontamination in ``split``: a train example sharing ``[split] decontaminate_n`` words in
a row with an eval question is dropped, said, and recorded; the eval split never moves."""

from __future__ import annotations

import json
import random
import re
import string

from tests.helpers.pipeline_data import answer, lines, seed_questions

from overbrainer.pipeline.decontaminate import words

TOPIC = ("ownership", "moves")


def long_question(number: int) -> str:
    """Twenty words no other question shares."""
    return " ".join(f"q{number}w{word}" for word in range(20))


def seed(project_dir, count=10):
    """``count`` answered questions; split once. The questions, an eval one, a train one."""
    questions = seed_questions(project_dir, {TOPIC: [long_question(i) for i in range(count)]})
    write_answers(project_dir, [answer(q) for q in questions])
    return questions


def write_answers(project_dir, records):
    with (project_dir / "data" / "answers.jsonl").open("w") as file:
        file.writelines(json.dumps(r) + "\n" for r in records)


def first_split(run_cli, project_dir, questions):
    """Split the clean answers: an eval question, a train one, and eval.jsonl's bytes."""
    result = run_cli("split")
    assert result.exit_code == 0, result.stderr
    eval_ids = {r["id"] for r in lines(project_dir, "eval.jsonl")}
    evaluated = next(q for q in questions if q["id"] in eval_ids)
    trained = next(q for q in questions if q["id"] not in eval_ids)
    return evaluated, trained, (project_dir / "data" / "eval.jsonl").read_bytes()


def answered_with(questions, target, content):
    """The answers, ``target``'s saying ``content``."""
    records = [answer(q) for q in questions]
    for record in records:
        if record["id"] == target["id"]:
            record["messages"][1]["content"] = content
    return records


def reasons(project_dir):
    return [r for r in lines(project_dir, "rejected.reasons.jsonl")
            if r["reason"].startswith("contaminated")]


def test_an_overlapping_train_example_is_dropped_with_its_reason(run_cli, project_dir):
    questions = seed(project_dir)
    evaluated, trained, eval_before = first_split(run_cli, project_dir, questions)
    shared = evaluated["text"].split()[3:16]  # 13 words of the eval question
    write_answers(project_dir, answered_with(
        questions, trained, f"As the textbook says: {' '.join(shared)}, and so on."
    ))
    result = run_cli("split")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "split: 8 train, 1 eval, 0 excluded, 0 orphaned, 1 contaminated\n"
    assert trained["id"] not in {r["id"] for r in lines(project_dir, "train.jsonl")}
    assert (project_dir / "data" / "eval.jsonl").read_bytes() == eval_before
    rejected = [r for r in lines(project_dir, "rejected.jsonl") if r["id"] == trained["id"]]
    assert rejected == [{"kind": "question", "id": trained["id"], "topic": "ownership",
                         "subtopic_id": trained["subtopic_id"], "text": trained["text"]}]
    assert reasons(project_dir) == [{
        "id": trained["id"], "kind": "question", "topic": "ownership",
        "reason": f"contaminated: shares the 13-gram {' '.join(shared)!r} with eval item "
                  f"{evaluated['id']}",
    }]
    # Split again: the same result, recorded once.
    assert run_cli("split").stdout == result.stdout
    assert len(reasons(project_dir)) == 1
    # `dataset rejected` shows which and why.
    listed = run_cli("dataset", "rejected", "--reason", "contaminated")
    assert listed.exit_code == 0, listed.stderr
    assert listed.stdout.splitlines() == [
        f"question {trained['id']} ownership: contaminated: shares the 13-gram "
        f"{' '.join(shared)!r} with eval item {evaluated['id']} | {trained['text'][:59]}…",
        "dataset: 1 rejected",
    ]
    [item] = json.loads(run_cli("dataset", "rejected", "--json").stdout)
    assert item["id"] == trained["id"] and item["reasons"][0].startswith("contaminated: ")
    assert run_cli("dataset", "rejected", "--reason", "not selected").stdout == (
        "dataset: nothing rejected for 'not selected' (the reasons recorded start with: "
        "contaminated)\n"
    )
    # The history keeps the count, and shows it.
    history = (project_dir / ".overbrainer" / "history.jsonl").read_text().splitlines()
    assert json.loads(history[-1])["split"]["contaminated"] == 1
    shown = run_cli("history", "--all").stdout.splitlines()[-1]
    assert shown.endswith("; 8 train, 1 eval, 0 orphaned, 1 contaminated"), shown
    assert len([r for r in lines(project_dir, "rejected.jsonl") if r["id"] == trained["id"]]) == 1


def test_twelve_words_in_common_are_not_thirteen(run_cli, project_dir):
    questions = seed(project_dir)
    evaluated, trained, _ = first_split(run_cli, project_dir, questions)
    shared = evaluated["text"].split()[:12]
    write_answers(project_dir, answered_with(questions, trained, f"see {' '.join(shared)} x"))
    result = run_cli("split")
    assert result.stdout == "split: 9 train, 1 eval, 0 excluded, 0 orphaned\n"
    assert trained["id"] in {r["id"] for r in lines(project_dir, "train.jsonl")}
    assert reasons(project_dir) == []


def test_case_and_punctuation_do_not_hide_an_overlap(run_cli, project_dir):
    questions = seed(project_dir)
    evaluated, trained, _ = first_split(run_cli, project_dir, questions)
    shared = [word.upper() for word in evaluated["text"].split()[:13]]
    write_answers(project_dir, answered_with(
        questions, trained, "«" + ", ".join(shared[:6]) + "!\n\n(" + " -- ".join(shared[6:]) + ")?"
    ))
    result = run_cli("split")
    assert result.stdout.endswith(", 1 contaminated\n")
    assert trained["id"] not in {r["id"] for r in lines(project_dir, "train.jsonl")}


def with_benchmarks(project_dir, text, n=None):
    """``[split] decontaminate`` naming benchmarks/*.jsonl, which holds ``text``."""
    setting = f"decontaminate_n = {n}\n" if n else ""
    with (project_dir / "overbrainer.toml").open("a", encoding="utf-8") as config:
        config.write(f'\n[split]\ndecontaminate = ["benchmarks/*.jsonl"]\n{setting}')
    (project_dir / "benchmarks").mkdir()
    (project_dir / "benchmarks" / "gsm.jsonl").write_text(text, encoding="utf-8")


def test_a_decontaminate_files_question_drops_a_train_example(run_cli, project_dir):
    questions = seed(project_dir)
    _, trained, eval_before = first_split(run_cli, project_dir, questions)
    benchmark = "Natalia sold clips to 48 of her friends in April and then half as many in May"
    # A record of this tool's older format, without an id, is read past.
    (project_dir / "data" / "rejected.jsonl").write_text(
        json.dumps({"kind": "subtopic", "topic": "ownership", "text": "old"}) + "\n"
    )
    with_benchmarks(project_dir, json.dumps({"question": "What is 2 + 2?", "answer": "4"})
                    + "\n" + json.dumps({"question": benchmark}) + "\n", n=10)
    write_answers(project_dir, answered_with(
        questions, trained, f"Q: {benchmark.lower()}? How many clips did she sell?"
    ))
    result = run_cli("split")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.endswith(", 1 contaminated\n")
    assert (project_dir / "data" / "eval.jsonl").read_bytes() == eval_before
    [record] = reasons(project_dir)
    assert record["id"] == trained["id"]
    assert record["reason"] == ("contaminated: shares the 10-gram 'natalia sold clips to 48 of "
                                "her friends in april' with benchmarks/gsm.jsonl:2")


def test_a_malformed_decontaminate_line_is_named_and_nothing_written(run_cli, project_dir):
    questions = seed(project_dir)
    first_split(run_cli, project_dir, questions)
    train_before = (project_dir / "data" / "train.jsonl").read_bytes()
    with_benchmarks(project_dir, json.dumps({"question": "fine"}) + "\n\n"
                    + json.dumps({"prompt": "not the shape"}) + "\n")
    write_answers(project_dir, [answer(q) for q in questions[:5]])
    result = run_cli("split")
    assert result.exit_code != 0
    assert "benchmarks/gsm.jsonl:3: not {\"question\"" in result.stderr
    assert "Traceback" not in result.stderr
    assert (project_dir / "data" / "train.jsonl").read_bytes() == train_before


def test_the_eval_split_is_never_changed_by_decontamination(run_cli, project_dir):
    # Every question shares 13 words with every other: all of train overlaps the eval
    # split, and eval items overlap each other; eval stays as chosen, train goes.
    common = " ".join(f"common{word}" for word in range(13))
    texts = [f"{long_question(i)} {common}" for i in range(10)]
    questions = seed_questions(project_dir, {TOPIC: texts})
    write_answers(project_dir, [answer(q) for q in questions])
    with (project_dir / "overbrainer.toml").open("a", encoding="utf-8") as config:
        config.write("\n[split]\ndecontaminate_n = 50\n")  # longer than any question: off
    assert run_cli("split").stdout == "split: 9 train, 1 eval, 0 excluded, 0 orphaned\n"
    eval_before = (project_dir / "data" / "eval.jsonl").read_bytes()
    (project_dir / "overbrainer.toml").write_text(
        (project_dir / "overbrainer.toml").read_text().replace("decontaminate_n = 50", "")
    )
    result = run_cli("split")
    assert result.stdout == "split: 0 train, 1 eval, 0 excluded, 0 orphaned, 9 contaminated\n"
    assert (project_dir / "data" / "eval.jsonl").read_bytes() == eval_before


def test_an_imported_answer_that_overlaps_is_dropped_too(run_cli, project_dir, tmp_path):
    questions = seed(project_dir)
    evaluated, _, eval_before = first_split(run_cli, project_dir, questions)
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({
        "question": "Explain moves, please, in a few words.",
        "answer": f"Consider: {evaluated['text']}.",
    }) + "\n", encoding="utf-8")
    result = run_cli("dataset", "import", str(pairs), "--topic", "ownership")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[-1].endswith(", 1 contaminated")
    imported = [r for r in lines(project_dir, "answers.jsonl")
                if r["messages"][0]["content"].startswith("Explain moves")]
    assert len(imported) == 1
    assert imported[0]["id"] not in {r["id"] for r in lines(project_dir, "train.jsonl")}
    assert (project_dir / "data" / "eval.jsonl").read_bytes() == eval_before
    [record] = reasons(project_dir)
    assert record["id"] == imported[0]["id"]
    assert f"with eval item {evaluated['id']}" in record["reason"]


def test_a_pattern_reaching_outside_the_project_is_refused(run_cli, project_dir):
    with (project_dir / "overbrainer.toml").open("a", encoding="utf-8") as config:
        config.write('\n[split]\ndecontaminate = ["../elsewhere/*.jsonl"]\n')
    result = run_cli("split")
    assert result.exit_code != 0
    assert "split.decontaminate" in result.stderr
    assert "must be a glob relative to the project, without .." in result.stderr


def test_a_link_out_of_the_project_is_refused(run_cli, project_dir, tmp_path):
    seed(project_dir)
    outside = tmp_path / "outside.jsonl"
    outside.write_text(json.dumps({"question": "secret"}) + "\n", encoding="utf-8")
    with_benchmarks(project_dir, "")
    (project_dir / "benchmarks" / "gsm.jsonl").unlink()
    (project_dir / "benchmarks" / "linked.jsonl").symlink_to(outside)
    result = run_cli("split")
    assert result.exit_code != 0
    assert "benchmarks/linked.jsonl" in result.stderr and "is not inside" in result.stderr


def test_words_are_the_runs_of_word_characters_casefolded():
    rng = random.Random(7)
    alphabet = string.printable + "éÉßẞ«»—’ﬁΣς日本_"
    for _ in range(2000):
        text = "".join(rng.choices(alphabet, k=rng.randint(0, 60)))
        assert words(text) == re.findall(r"\w+", text.casefold()), text
    assert words("Don't STOP--me, NOW!") == ["don", "t", "stop", "me", "now"]


def test_decontaminate_n_0_turns_it_off_and_1_or_2_is_refused(run_cli, project_dir):
    questions = seed(project_dir)
    evaluated, trained, _ = first_split(run_cli, project_dir, questions)
    write_answers(project_dir, answered_with(questions, trained, evaluated["text"]))
    with (project_dir / "overbrainer.toml").open("a", encoding="utf-8") as config:
        config.write("\n[split]\ndecontaminate_n = 0\n")
    assert run_cli("split").stdout == "split: 9 train, 1 eval, 0 excluded, 0 orphaned\n"
    assert trained["id"] in {r["id"] for r in lines(project_dir, "train.jsonl")}
    (project_dir / "overbrainer.toml").write_text(
        (project_dir / "overbrainer.toml").read_text().replace("decontaminate_n = 0",
                                                               "decontaminate_n = 2")
    )
    result = run_cli("split")
    assert result.exit_code != 0
    assert "decontaminate_n must be 0 (off) or at least 3" in result.stderr


def with_eval_files(project_dir, text, name="mine.jsonl"):
    """``[eval] files`` naming evals/*.jsonl; ``name`` holds ``text``."""
    with (project_dir / "overbrainer.toml").open("a", encoding="utf-8") as config:
        config.write('\n[eval]\nfiles = ["evals/*.jsonl"]\n')
    (project_dir / "evals").mkdir(exist_ok=True)
    (project_dir / "evals" / name).write_text(text, encoding="utf-8")


def test_an_eval_files_question_is_never_trained_on(run_cli, project_dir):
    """The user's held-out questions ([eval] files) clean train as the eval split does."""
    questions = seed(project_dir)
    _, trained, eval_before = first_split(run_cli, project_dir, questions)
    held_out = "Why does a borrowed reference outlive the value it points to in this function"
    with_eval_files(project_dir, json.dumps({"question": "Short?"}) + "\n"
                    + json.dumps({"question": held_out, "answer": "It cannot."}) + "\n")
    write_answers(project_dir, answered_with(questions, trained, f"Asked: {held_out}."))
    result = run_cli("split")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.endswith(", 1 contaminated\n")
    assert trained["id"] not in {r["id"] for r in lines(project_dir, "train.jsonl")}
    assert (project_dir / "data" / "eval.jsonl").read_bytes() == eval_before
    [record] = reasons(project_dir)
    assert record["reason"].startswith("contaminated: shares the 13-gram 'why does a borrowed")
    assert record["reason"].endswith("' with evals/mine.jsonl:2")


def test_a_malformed_eval_files_line_is_named_by_split(run_cli, project_dir):
    questions = seed(project_dir)
    first_split(run_cli, project_dir, questions)
    train_before = (project_dir / "data" / "train.jsonl").read_bytes()
    with_eval_files(project_dir, json.dumps({"question": "fine"}) + "\n{not json\n")
    result = run_cli("split")
    assert result.exit_code != 0
    assert "evals/mine.jsonl:2: not a JSON line" in result.stderr
    assert "Traceback" not in result.stderr
    assert (project_dir / "data" / "train.jsonl").read_bytes() == train_before


def test_a_question_shorter_than_n_words_is_matched_whole(run_cli, project_dir):
    """Most hand-written questions are shorter than decontaminate_n (13) words: one is
    found whole in a train answer, punctuation and case aside."""
    questions = seed(project_dir)
    _, trained, eval_before = first_split(run_cli, project_dir, questions)
    with_eval_files(project_dir, json.dumps({"question": "What is 15% of 240?"}) + "\n")
    write_answers(project_dir, answered_with(
        questions, trained, "Worked example. WHAT is 15 % of 240 -- it is 36."
    ))
    result = run_cli("split")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.endswith(", 1 contaminated\n")
    assert trained["id"] not in {r["id"] for r in lines(project_dir, "train.jsonl")}
    assert (project_dir / "data" / "eval.jsonl").read_bytes() == eval_before
    [record] = reasons(project_dir)
    assert record["reason"] == ("contaminated: holds the whole of evals/mine.jsonl:1, "
                                "'what is 15 of 240'")


def test_a_short_question_in_part_or_out_of_order_is_no_copy(run_cli, project_dir):
    questions = seed(project_dir)
    _, trained, _ = first_split(run_cli, project_dir, questions)
    with_eval_files(project_dir, json.dumps({"question": "What is 15% of 240 apples?"}) + "\n")
    write_answers(project_dir, answered_with(
        questions, trained, "what is 15 of 240 pears; apples what is 15 of 240"
    ))
    result = run_cli("split")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "split: 9 train, 1 eval, 0 excluded, 0 orphaned\n"
    assert reasons(project_dir) == []


def test_questions_under_five_words_are_skipped_with_one_warning(run_cli, project_dir):
    questions = seed(project_dir)
    _, trained, _ = first_split(run_cli, project_dir, questions)
    with_eval_files(project_dir, "".join(
        json.dumps({"question": text}) + "\n" for text in ("What is 2 + 2?", "Short?")
    ))
    write_answers(project_dir, answered_with(questions, trained, "what is 2 2? Short."))
    result = run_cli("split")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "split: 9 train, 1 eval, 0 excluded, 0 orphaned\n"
    warnings = [line for line in result.stderr.splitlines() if "not checked" in line]
    assert len(warnings) == 1, result.stderr
    assert ("decontamination: 2 question(s) of [eval] files or [split] decontaminate of "
            "fewer than 5 words not checked (too short to tell a copy from a common phrase)"
            in warnings[0])


def eval_files_of(project_dir, shown):
    """``[eval] files`` matching the files ``shown`` (paths in the project), each holding
    one question."""
    with (project_dir / "overbrainer.toml").open("a", encoding="utf-8") as config:
        config.write('\n[eval]\nfiles = ["evals/*.jsonl", "more/*.jsonl"]\n')
    for path in shown:
        (project_dir / path).parent.mkdir(exist_ok=True)
        (project_dir / path).write_text(json.dumps({"question": "Why?"}) + "\n")


def test_eval_files_compare_would_refuse_are_refused_by_split(run_cli, project_dir):
    questions = seed(project_dir)
    first_split(run_cli, project_dir, questions)
    train_before = (project_dir / "data" / "train.jsonl").read_bytes()
    eval_files_of(project_dir, ["evals/rust.jsonl", "more/rust.jsonl"])
    for decontaminate_n in (13, 0):  # refused even when nothing is decontaminated
        if decontaminate_n == 0:
            with (project_dir / "overbrainer.toml").open("a", encoding="utf-8") as config:
                config.write("\n[split]\ndecontaminate_n = 0\n")
        result = run_cli("split")
        assert result.exit_code != 0
        assert "Traceback" not in result.stderr
        assert ("[eval] files: evals/rust.jsonl and more/rust.jsonl are both the set `rust` "
                "(a set is named by its file's name): rename one") in result.stderr
        assert (project_dir / "data" / "train.jsonl").read_bytes() == train_before
    (project_dir / "more" / "rust.jsonl").rename(project_dir / "more" / "split.jsonl")
    result = run_cli("split")
    assert result.exit_code != 0
    assert ("[eval] files: more/split.jsonl: a set cannot be named `split`, the eval split's "
            "name (`compare --eval split`): rename the file") in result.stderr
