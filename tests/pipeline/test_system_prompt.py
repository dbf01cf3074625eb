"""``[pipeline] system_prompt``: the system turn of every training example, whatever the
answers hold; ``answers.jsonl`` itself is left as answered."""

from __future__ import annotations

import json

from tests.helpers.pipeline_data import PIPELINE_CONFIG, answer, lines, seed_questions

PROMPT = "You are a terse Rust tutor."


def seed(project_dir):
    questions = seed_questions(project_dir, {("ownership", "moves"): ["q1", "q2", "q3", "q4"]})
    answers = [answer(q) for q in questions]
    # kept by include_system_prompt: the parent's own system turn
    answers[0]["messages"].insert(0, {"role": "system", "content": "system|ownership"})
    # an imported conversation of several turns, with a system turn of its own
    answers[1]["messages"] = [
        {"role": "system", "content": "its own"},
        {"role": "user", "content": "q2"}, {"role": "assistant", "content": "a"},
        {"role": "user", "content": "more?"}, {"role": "assistant", "content": "b"},
    ]
    answers[1]["meta"] = {"source": "import:chats.jsonl", "excluded": None}
    path = project_dir / "data" / "answers.jsonl"
    path.write_text("".join(json.dumps(a) + "\n" for a in answers), encoding="utf-8")
    return answers


def examples(project_dir):
    return lines(project_dir, "train.jsonl") + lines(project_dir, "eval.jsonl")


def test_every_example_opens_with_the_system_prompt(run_cli, project_dir):
    config = PIPELINE_CONFIG.replace("[pipeline]\n", f'[pipeline]\nsystem_prompt = "{PROMPT}"\n')
    (project_dir / "overbrainer.toml").write_text(config, encoding="utf-8")
    answers = seed(project_dir)
    before = (project_dir / "data" / "answers.jsonl").read_bytes()
    result = run_cli("split")
    assert result.exit_code == 0, result.stderr
    made = {e["id"]: e for e in examples(project_dir)}
    assert len(made) == 4
    for original in answers:
        messages = made[original["id"]]["messages"]
        assert messages[0] == {"role": "system", "content": PROMPT}
        assert [m["role"] for m in messages].count("system") == 1
        rest = [m for m in original["messages"] if m["role"] != "system"]
        assert messages[1:] == rest  # every turn kept, a conversation's too
        assert made[original["id"]]["meta"] == original["meta"]
    assert (project_dir / "data" / "answers.jsonl").read_bytes() == before


def test_unset_the_examples_are_as_answered(run_cli, project_dir):
    answers = seed(project_dir)
    result = run_cli("split")
    assert result.exit_code == 0, result.stderr
    made = {e["id"]: e["messages"] for e in examples(project_dir)}
    assert made == {a["id"]: a["messages"] for a in answers}


def test_a_blank_system_prompt_is_refused(run_cli, project_dir):
    config = PIPELINE_CONFIG.replace("[pipeline]\n", '[pipeline]\nsystem_prompt = "   "\n')
    (project_dir / "overbrainer.toml").write_text(config)
    result = run_cli("config", "check")
    assert result.exit_code != 0
    assert "pipeline.system_prompt: must hold some text (unset it for none)" in result.stderr
