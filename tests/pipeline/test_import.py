"""``dataset import``: your own questions, answers and conversations, from JSON Lines and CSV,
into the project; deduplicated, split, trained on and never asked for again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.helpers.pipeline_data import answer, lines, seed_questions

from overbrainer.errors import UserError
from overbrainer.pipeline.ids import question_id, subtopic_id
from overbrainer.pipeline.import_rows import read_bytes

SOURCE = "import:seed.jsonl"


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def data_bytes(project_dir: Path) -> dict[str, bytes]:
    data = project_dir / "data"
    return {p.name: p.read_bytes() for p in sorted(data.iterdir())} if data.exists() else {}


ROWS = [
    {"question": "Why does a move invalidate the source binding?",
     "answer": "Ownership passes to the new binding.", "reasoning": "A move transfers."},
    {"question": "When is a value dropped at the end of its scope?", "subtopic": "drops"},
    {"prompt": "What does Copy change about assignment semantics?",
     "completion": "The value is duplicated instead of moved."},
]


def test_rows_become_questions_and_marked_answers_and_are_split(run_cli, project_dir, tmp_path):
    seed = write_jsonl(tmp_path / "seed.jsonl", ROWS)
    result = run_cli("dataset", "import", str(seed), "--topic", "ownership")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[0] == (
        "dataset: imported 3 questions, 2 answers from seed.jsonl (0 duplicates skipped)"
    )
    questions = lines(project_dir, "questions.jsonl")
    assert [q["text"] for q in questions] == [
        ROWS[0]["question"], ROWS[1]["question"], ROWS[2]["prompt"]
    ]
    for question in questions:
        assert question["source"] == SOURCE
        assert question["topic"] == "ownership"
        assert question["subtopic_id"] == subtopic_id("ownership", question["subtopic"])
        assert question["id"] == question_id(question["subtopic_id"], question["text"])
    assert [q["subtopic"] for q in questions] == ["imported", "drops", "imported"]
    answers = lines(project_dir, "answers.jsonl")
    assert [a["id"] for a in answers] == [questions[0]["id"], questions[2]["id"]]
    assert answers[0]["messages"] == [
        {"role": "user", "content": ROWS[0]["question"]},
        {"role": "assistant", "content": ROWS[0]["answer"],
         "reasoning_content": ROWS[0]["reasoning"]},
    ]
    assert answers[0]["meta"] == {"source": SOURCE, "excluded": None}
    # split ran: both answers are in train or eval
    assert result.stdout.splitlines()[1].startswith("split: 1 train, 1 eval, 0 excluded")
    split = lines(project_dir, "train.jsonl") + lines(project_dir, "eval.jsonl")
    assert sorted(a["id"] for a in split) == sorted(a["id"] for a in answers)


def test_imported_answers_are_never_asked_for(run_cli, project_dir, provider, tmp_path):
    seed = write_jsonl(tmp_path / "seed.jsonl", ROWS)
    assert run_cli("dataset", "import", str(seed), "--topic", "ownership").exit_code == 0
    result = run_cli("answers", "--topic", "ownership")
    assert result.exit_code == 0, result.stderr
    assert [s.prompt for s in provider.chats("parent-model")] == [ROWS[1]["question"]]
    assert result.stdout.startswith("answers: 1 done, 2 skipped")


def test_answers_force_never_pays_again_for_an_imported_answer(run_cli, project_dir, provider):
    generated, imported = seed_questions(
        project_dir, {("ownership", "moves"): ["made by the generator", "brought by the user"]}
    )
    own = {"id": imported["id"], "topic": "ownership", "subtopic": "moves",
           "messages": [{"role": "user", "content": imported["text"]},
                        {"role": "assistant", "content": "the user's answer"}],
           "meta": {"source": "import:mine.jsonl", "excluded": None}}
    write_jsonl(project_dir / "data" / "answers.jsonl", [own])
    result = run_cli("answers", "--topic", "ownership", "--force")
    assert result.exit_code == 0, result.stderr
    assert [s.prompt for s in provider.chats("parent-model")] == [generated["text"]]
    after = {a["id"]: a for a in lines(project_dir, "answers.jsonl")}
    assert after[imported["id"]] == own
    assert set(after) == {generated["id"], imported["id"]}


def test_questions_force_keeps_imported_questions(run_cli, project_dir, provider, tmp_path):
    seed = write_jsonl(tmp_path / "seed.jsonl", ROWS[1:2])
    assert run_cli("dataset", "import", str(seed), "--topic", "lifetimes").exit_code == 0
    assert run_cli("subtopics").exit_code == 0
    result = run_cli("questions", "--topic", "lifetimes", "--force")
    assert result.exit_code == 0, result.stderr
    texts = [q["text"] for q in lines(project_dir, "questions.jsonl") if q["topic"] == "lifetimes"]
    assert ROWS[1]["question"] in texts


def test_a_reimport_is_idempotent_and_duplicates_are_counted(run_cli, project_dir, tmp_path):
    seed = write_jsonl(tmp_path / "seed.jsonl", [*ROWS, ROWS[0]])
    first = run_cli("dataset", "import", str(seed), "--topic", "ownership")
    assert first.exit_code == 0, first.stderr
    assert "(1 duplicate skipped)" in first.stdout
    before = data_bytes(project_dir)
    again = run_cli("dataset", "import", str(seed), "--topic", "ownership")
    assert again.exit_code == 0, again.stderr
    assert again.stdout == (
        "dataset: imported 0 questions, 0 answers from seed.jsonl (4 duplicates skipped)\n"
    )
    assert data_bytes(project_dir) == before


def test_a_question_the_project_has_is_skipped_or_given_its_answer(run_cli, project_dir,
                                                                   tmp_path):
    [held] = seed_questions(project_dir, {("ownership", "moves"): [ROWS[0]["question"]]})
    near = {"question": ROWS[0]["question"].replace("binding?", "binding ?!"), "answer": "x"}
    seed = write_jsonl(tmp_path / "seed.jsonl", [{"question": held["text"]}, near, ROWS[0]])
    result = run_cli("dataset", "import", str(seed), "--topic", "ownership")
    assert result.exit_code == 0, result.stderr
    # the same text: skipped, or its answer given to the question held; a near-duplicate
    # (the questions stage's lexical rule) is skipped
    assert result.stdout.startswith(
        "dataset: imported 0 questions, 1 answer from seed.jsonl (2 duplicates skipped)"
    )
    assert [q["id"] for q in lines(project_dir, "questions.jsonl")] == [held["id"]]
    [answer] = lines(project_dir, "answers.jsonl")
    assert answer["id"] == held["id"]
    assert answer["meta"]["source"] == SOURCE


def test_a_bad_row_names_its_line_and_nothing_is_imported(run_cli, project_dir, tmp_path):
    seed_questions(project_dir, {("ownership", "moves"): ["held already"]})
    before = data_bytes(project_dir)
    seed = tmp_path / "seed.jsonl"
    seed.write_text(json.dumps(ROWS[0]) + "\n\n{\"answer\": \"no question\"}\n", encoding="utf-8")
    result = run_cli("dataset", "import", str(seed), "--topic", "ownership")
    assert result.exit_code != 0
    assert f"{seed}:3: no question: a row needs one of question" in result.stderr
    assert "nothing was imported" in result.stderr
    assert "Traceback" not in result.stderr
    assert data_bytes(project_dir) == before
    seed.write_text(json.dumps(ROWS[0]) + "\n{not json\n", encoding="utf-8")
    result = run_cli("dataset", "import", str(seed), "--topic", "ownership")
    assert f"{seed}:2: not valid JSON" in result.stderr
    assert data_bytes(project_dir) == before


def test_csv_rows_with_aliases_and_quoted_lines(run_cli, project_dir, tmp_path):
    seed = tmp_path / "pairs.csv"
    seed.write_text(
        'Instruction,input,output,category\n'
        '"Explain the borrow checker","in two lines","It checks\nreferences.",x\n'
        'Why are lifetimes elided in simple signatures?,,,y\n',
        encoding="utf-8",
    )
    result = run_cli("dataset", "import", str(seed), "--topic", "lifetimes")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("dataset: imported 2 questions, 1 answer from pairs.csv")
    assert "columns not read: category" in result.stderr
    first, second = lines(project_dir, "questions.jsonl")
    assert first["text"] == "Explain the borrow checker\n\nin two lines"
    assert second["text"] == "Why are lifetimes elided in simple signatures?"
    [answer] = lines(project_dir, "answers.jsonl")
    assert answer["messages"][-1] == {"role": "assistant", "content": "It checks\nreferences."}
    chat = [{"role": "user", "content": "Can a borrow outlive its owner?"},
            {"role": "assistant", "content": "No."}]
    cell = json.dumps(chat).replace('"', '""')  # CSV's quoting
    seed.write_text(f'messages\n"{cell}"\n', encoding="utf-8")
    result = run_cli("dataset", "import", str(seed), "--topic", "lifetimes")
    assert result.exit_code == 0, result.stderr
    assert lines(project_dir, "answers.jsonl")[-1]["messages"] == chat
    seed.write_text('question,answer\n"ok question here",fine\nq,a,extra\n', encoding="utf-8")
    result = run_cli("dataset", "import", str(seed), "--topic", "lifetimes")
    assert result.exit_code != 0
    assert f"{seed}:3: 3 fields, where the header has 2" in result.stderr


def test_a_conversation_is_kept_and_trained_on_as_several_turns(run_cli, project_dir, tmp_path):
    conversation = [
        {"role": "system", "content": "You teach Rust."},
        {"role": "user", "content": "What is a borrow in Rust?"},
        {"role": "assistant", "content": "A reference.", "reasoning_content": "Simple."},
        {"role": "user", "content": "And a mutable one?"},
        {"role": "assistant", "content": "An exclusive reference."},
    ]
    sharegpt = [{"from": "human", "value": "What does a move do to a String?"},
                {"from": "gpt", "value": "It transfers its buffer."}]
    seed = write_jsonl(tmp_path / "chats.jsonl",
                       [{"messages": conversation}, {"conversations": sharegpt}])
    result = run_cli("dataset", "import", str(seed), "--topic", "ownership")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("dataset: imported 2 questions, 2 answers")
    questions = lines(project_dir, "questions.jsonl")
    assert [q["text"] for q in questions] == [conversation[1]["content"], sharegpt[0]["value"]]
    answers = {a["id"]: a for a in lines(project_dir, "answers.jsonl")}
    assert answers[questions[0]["id"]]["messages"] == conversation
    trained = lines(project_dir, "train.jsonl") + lines(project_dir, "eval.jsonl")
    assert conversation in [example["messages"] for example in trained]
    assert [{"role": "user", "content": sharegpt[0]["value"]},
            {"role": "assistant", "content": sharegpt[1]["value"]}] in [
        example["messages"] for example in trained]


def test_a_conversation_that_cannot_be_trained_on_is_refused(run_cli, project_dir, tmp_path):
    seed = write_jsonl(tmp_path / "chats.jsonl", [
        {"messages": [{"role": "user", "content": "Hi there, what is Rust?"},
                      {"role": "assistant", "content": "A language.", "weight": 0}]},
    ])
    result = run_cli("dataset", "import", str(seed), "--topic", "ownership")
    assert result.exit_code != 0
    assert f"{seed}:1: message 2 has weight, which overbrainer does not train on" in result.stderr
    write_jsonl(seed, [{"messages": [{"role": "user", "content": "Only a question here"}]}])
    result = run_cli("dataset", "import", str(seed), "--topic", "ownership")
    assert f"{seed}:1: messages: no assistant turn at the end" in result.stderr
    assert not (project_dir / "data").exists()


def test_the_topic_is_asked_for_when_the_project_has_several(run_cli, project_dir, tmp_path):
    seed = write_jsonl(tmp_path / "seed.jsonl", [{"question": "A question on moves?"}])
    result = run_cli("dataset", "import", str(seed))
    assert result.exit_code != 0
    assert "which topic? the project has 2 (ownership, lifetimes)" in result.stderr
    write_jsonl(seed, [{"question": "A question on moves?", "topic": "generics"}])
    result = run_cli("dataset", "import", str(seed))
    assert f"{seed}:1: topic 'generics' is not one of the project's" in result.stderr
    write_jsonl(seed, [{"question": "A question on moves?", "topic": "lifetimes"}])
    assert run_cli("dataset", "import", str(seed)).exit_code == 0
    assert [q["topic"] for q in lines(project_dir, "questions.jsonl")] == ["lifetimes"]


def test_a_file_of_another_kind_is_refused(run_cli, project_dir, tmp_path):
    seed = tmp_path / "seed.parquet"
    seed.write_bytes(b"PAR1")
    result = run_cli("dataset", "import", str(seed), "--topic", "ownership")
    assert result.exit_code != 0
    assert "not a file overbrainer imports: its name must end in .jsonl" in result.stderr


def test_the_tui_shows_imported_questions_under_their_subtopics(run_cli, project_dir, tmp_path):
    from overbrainer.tui.data import read_dataset

    seed = write_jsonl(tmp_path / "seed.jsonl", ROWS)
    assert run_cli("dataset", "import", str(seed), "--topic", "ownership").exit_code == 0
    [topic] = read_dataset(project_dir).topics
    shown = {s.name: [(q.text, q.status) for q in s.questions] for s in topic.subtopics}
    assert shown == {
        "imported": [(ROWS[0]["question"], "a"), (ROWS[2]["prompt"], "a")],
        "drops": [(ROWS[1]["question"], " ")],
    }


@pytest.mark.parametrize(("row", "problem"), [
    ({"question": "A question here?", "reasoning": "r"}, "reasoning without an answer"),
    ({"question": ["a", "list"]}, "question is not text"),
    ({"question": "?!"}, "the question has no word"),
    ({"conversations": [{"from": "bot", "value": "x"}]}, "message 1: from 'bot' is not one of"),
    ({"messages": [{"role": "tool", "content": "x"}]}, "message 1: role 'tool' is not system"),
    ({"messages": [{"role": "user", "content": "Why?"},
                   {"role": "assistant", "content": "a", "reasoning": "r", "thinking": "t"}]},
     "message 2 has two reasonings"),
    ({"messages": "hello"}, "messages is not a JSON list of messages"),
    ({"messages": [{"role": "user", "content": "Why?"}, {"role": "user", "content": "And?"},
                   {"role": "assistant", "content": "a"}]},
     "messages: the turns are not user, assistant"),
])
def test_what_is_wrong_with_a_row_is_said(row, problem):
    with pytest.raises(UserError) as raised:
        read_bytes(b'{"question": "fine, a question"}\n' + json.dumps(row).encode(), "f.jsonl",
                   "jsonl")
    assert str(raised.value).startswith(f"f.jsonl:2: {problem}")
    assert str(raised.value).endswith("; nothing was imported")


def test_an_answer_for_an_answered_question_is_said_not_taken_and_an_excluded_one_is_replaced(
    run_cli, project_dir, tmp_path
):
    """Issue 43's probe: a user's answer to a question the parent answered vanished in
    "duplicates"; one whose parent answer was cut short was dropped too."""
    good, cut = seed_questions(
        project_dir, {("ownership", "moves"): ["What is a move?", "What is a borrow?"]}
    )
    answers = project_dir / "data" / "answers.jsonl"
    answers.write_text(
        json.dumps(answer(good)) + "\n" + json.dumps(answer(cut, excluded="truncated")) + "\n"
    )
    seed = write_jsonl(
        tmp_path / "seed.jsonl",
        [{"question": good["text"], "answer": "mine"}, {"question": cut["text"], "answer": "mine"}],
    )
    result = run_cli("dataset", "import", str(seed), "--topic", "ownership")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[0] == (
        "dataset: imported 0 questions, 1 answer from seed.jsonl (1 duplicate skipped); "
        "1 answer not taken: the question has a usable answer already "
        "(`overbrainer dataset rm ID` first to bring yours)"
    )
    by_id = {a["id"]: a for a in lines(project_dir, "answers.jsonl")}
    assert len(lines(project_dir, "answers.jsonl")) == 2
    assert by_id[good["id"]]["meta"]["model"] == "parent-model"
    assert by_id[cut["id"]]["meta"]["source"] == SOURCE
    assert by_id[cut["id"]]["messages"][-1]["content"] == "mine"


def test_an_empty_file_is_said_to_hold_no_row(run_cli, project_dir, tmp_path):
    seed = tmp_path / "seed.jsonl"
    seed.write_text("")
    result = run_cli("dataset", "import", str(seed), "--topic", "ownership")
    assert result.exit_code == 0, result.stderr
    assert "warning: dataset: seed.jsonl holds no row: nothing to import" in result.stderr
