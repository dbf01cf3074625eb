"""Staleness, make-like: a record keeps the fingerprint of what made it; an edit of a
prompt, the parent's model or its settings makes the answers it touches stale; `plan` and
`run` count them and price redoing them; `answers --stale` redoes those and nothing else."""

from __future__ import annotations

import json
import re

from tests.helpers.fake_provider import Reply, openai_completion
from tests.helpers.pipeline_data import PIPELINE_CONFIG, answer, lines, seed_questions

FULL = (
    PIPELINE_CONFIG.replace("subtopics = 2\nquestions_per_subtopic = 3",
                            "subtopics = 1\nquestions_per_subtopic = 2")
    .replace("subtopics = 1\nquestions_per_subtopic = 2\n\n[providers",
             "subtopics = 1\nquestions_per_subtopic = 1\n\n[providers")
)
"""Every subtopic and question seeded: `run` has only the answers' edits to act on."""

OWNERSHIP_ONLY = '{% if topic == "ownership" %}new|{% endif %}system|{{ topic }}'
"""The answer prompt edited for one topic: its rendered text changes for that topic only."""

STALE_LINE = re.compile(
    r"^stale: answers: (\d+) made with another prompt, model or setting than now; "
    r"redoing them: (\d+) requests, \$(\d+\.\d+) \(up to \$[\d.]+, measured\): "
    r"`overbrainer answers --stale`$",
    re.M,
)


def answered(run_cli, project_dir, provider):
    """A project of 3 questions (2 ownership, 1 lifetimes), each answered."""
    (project_dir / "overbrainer.toml").write_text(FULL)
    seed_questions(project_dir, {("ownership", "moves"): ["Why move?", "What is a borrow?"],
                                 ("lifetimes", "scopes"): ["What is 'a?"]})  # fmt: skip
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    assert len(provider.chats("parent-model")) == 3


def plan_json(run_cli):
    result = run_cli("plan", "--json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)["stale"]


def test_fresh_answers_are_not_stale(run_cli, project_dir, provider):
    answered(run_cli, project_dir, provider)
    for answer_line in lines(project_dir, "answers.jsonl"):
        assert re.fullmatch("[0-9a-f]{16}", answer_line["meta"]["fingerprint"])
    result = run_cli("plan")
    assert "stale: answers" not in result.stdout
    assert plan_json(run_cli)["answers"] == {"stale": 0, "unknown": 0, "redo": None}


def test_a_prompt_edit_is_counted_priced_and_redone_alone(run_cli, project_dir, provider):
    answered(run_cli, project_dir, provider)
    (project_dir / "prompts" / "answer_system.txt").write_text(OWNERSHIP_ONLY)

    shown = run_cli("plan")
    assert shown.exit_code == 0, shown.stderr
    found = STALE_LINE.search(shown.stdout)
    assert found, shown.stdout
    assert found.group(1) == found.group(2) == "2"
    assert float(found.group(3)) > 0
    stale = plan_json(run_cli)["answers"]
    assert stale["stale"] == 2
    assert stale["redo"]["requests"] == 2 and stale["redo"]["usd"] > 0
    assert provider.chats("parent-model")[3:] == []  # planning asked nothing

    ran = run_cli("run")  # no [training]: the stages and split; the edit is said, not redone
    assert ran.exit_code == 0, ran.stderr
    assert STALE_LINE.search(ran.stdout), ran.stdout
    assert len(provider.chats("parent-model")) == 3

    path = project_dir / "data" / "answers.jsonl"
    before = path.read_text().splitlines()
    redone = run_cli("answers", "--stale")
    assert redone.exit_code == 0, redone.stderr
    assert redone.stdout.startswith("answers: 2 done, 1 skipped, 0 failed")
    new = provider.chats("parent-model")[3:]
    assert sorted(seen.system for seen in new) == ["new|system|ownership"] * 2
    after = path.read_text().splitlines()
    assert len(after) == 3
    # The lifetimes answer's line is the same bytes at the same place; the others replaced.
    [kept] = [n for n, line in enumerate(before) if '"lifetimes"' in line]
    assert after[kept] == before[kept]
    assert [json.loads(line)["id"] for line in after] == [json.loads(line)["id"] for line in before]
    assert sum(a != b for a, b in zip(before, after, strict=True)) == 2
    assert plan_json(run_cli)["answers"]["stale"] == 0
    again = run_cli("answers", "--stale")
    assert again.stdout.startswith("answers: 0 done, 3 skipped")
    assert len(provider.chats("parent-model")) == 5


def test_a_changed_parent_setting_makes_every_answer_stale(run_cli, project_dir, provider):
    answered(run_cli, project_dir, provider)
    config = project_dir / "overbrainer.toml"
    config.write_text(config.read_text().replace("reasoning = true", "reasoning = true\n"
                                                 "temperature = 0.3"))
    assert plan_json(run_cli)["answers"]["stale"] == 3
    config.write_text(FULL.replace('model = "parent-model"', 'model = "parent-model-2"'))
    assert plan_json(run_cli)["answers"]["stale"] == 3
    config.write_text(FULL.replace("[pipeline]", "[pipeline]\ninclude_system_prompt = true"))
    assert plan_json(run_cli)["answers"]["stale"] == 0  # what is kept, not what is asked


def test_a_question_made_again_makes_its_answer_stale(run_cli, project_dir, provider):
    answered(run_cli, project_dir, provider)
    path = project_dir / "data" / "questions.jsonl"
    questions = lines(project_dir, "questions.jsonl")
    questions[0]["fingerprint"] = "0123456789abcdef"  # made again, by another prompt
    path.write_text("".join(json.dumps(q) + "\n" for q in questions))
    assert plan_json(run_cli)["answers"]["stale"] == 1


def test_answers_made_before_fingerprints_are_unknown_not_stale(run_cli, project_dir, provider):
    (project_dir / "overbrainer.toml").write_text(FULL)
    questions = seed_questions(project_dir, {("ownership", "moves"): ["Why move?", "Why?"],
                                             ("lifetimes", "scopes"): ["What is 'a?"]})  # fmt: skip
    path = project_dir / "data" / "answers.jsonl"
    path.write_text("".join(json.dumps(answer(q)) + "\n" for q in questions))
    shown = run_cli("plan")
    assert (
        "stale: answers: 3 made before overbrainer kept what made them: unknown, not counted "
        "stale (`overbrainer answers --force` redoes them all)"
    ) in shown.stdout.splitlines()
    before = path.read_bytes()
    result = run_cli("answers", "--stale")
    assert result.exit_code == 0, result.stderr
    assert provider.chats() == []
    assert path.read_bytes() == before


def test_stale_and_force_go_apart(run_cli, project_dir, provider):
    result = run_cli("answers", "--stale", "--force")
    assert result.exit_code == 2
    assert "--stale or --force: --force redoes every answer already" in result.stderr


def test_redoing_stale_answers_keeps_the_budget(run_cli, project_dir, provider):
    answered(run_cli, project_dir, provider)
    (project_dir / "prompts" / "answer_system.txt").write_text(OWNERSHIP_ONLY)
    config = project_dir / "overbrainer.toml"
    config.write_text(config.read_text() + "\n[budget]\nmax_usd = 0.0004\n")
    path = project_dir / "data" / "answers.jsonl"
    before = path.read_bytes()
    result = run_cli("answers", "--stale")
    assert result.exit_code == 1
    assert "error: budget: answers stopped before a request" in result.stderr, result.stderr
    assert len(provider.chats("parent-model")) == 3  # nothing sent past it
    assert path.read_bytes() == before  # the stale answers stay until redone


LIFETIMES = '[[topics]]\nname = "lifetimes"\n'


def test_questions_stale_makes_only_the_stale_ones_again(run_cli, project_dir, provider):
    for stage in ("subtopics", "questions", "answers"):
        assert run_cli(stage).exit_code == 0
    path = project_dir / "data" / "questions.jsonl"
    before = path.read_text().splitlines()
    assert len(before) == 8
    config = project_dir / "overbrainer.toml"
    # The topic's description is part of its prompts (the test template shows none).
    config.write_text(config.read_text().replace(LIFETIMES, LIFETIMES + 'description = "Scopes"\n'))
    stale = plan_json(run_cli)
    assert [stale[s]["stale"] for s in ("subtopics", "questions", "answers")] == [1, 2, 0]
    shown = run_cli("plan").stdout
    found = re.search(
        r"^stale: questions: 2 made with another prompt, model or setting than now; redoing "
        r"them: 1 requests, \$(\d+\.\d+) \(up to \$[\d.]+, measured\), then answering them "
        r"again: 2 requests, \$(\d+\.\d+) \(up to \$[\d.]+, measured\): "
        r"`overbrainer questions --stale`$", shown, re.M,
    )
    assert found, shown
    assert stale["questions"]["redo"]["usd"] > 0  # the line rounds it to $0.0000 here
    # Their answers are asked again (new questions, new ids): counted before, not after.
    assert stale["questions"]["answers_after"]["requests"] == 2
    assert stale["questions"]["answers_after"]["usd"] > 0
    assert (
        "stale: subtopics: 1 made with another prompt, model or setting than now "
        "(`overbrainer subtopics --force --topic NAME` makes a topic's again)"
    ) in shown.splitlines()

    asked = len(provider.chats("gen-model"))
    result = run_cli("questions", "--stale")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("questions: 1 done, 2 skipped, 0 failed")
    [again] = provider.chats("gen-model")[asked:]
    assert again.prompt.startswith("questions|lifetimes|")
    after = path.read_text().splitlines()
    kept = [line for line in before if '"ownership"' in line]
    assert [line for line in after if '"ownership"' in line] == kept  # byte-identical
    assert len(after) == 8
    assert plan_json(run_cli)["questions"]["stale"] == 0
    # The new questions are new ids: answered as any missing one.
    assert json.loads(run_cli("plan", "--json").stdout)["stages"]["answers"]["requests"] == 2


def test_stale_with_a_topic_redoes_that_topic_s_only(run_cli, project_dir, provider):
    answered(run_cli, project_dir, provider)
    (project_dir / "prompts" / "answer_system.txt").write_text("new|system|{{ topic }}")
    result = run_cli("answers", "--stale", "--topic", "lifetimes")
    assert result.exit_code == 0, result.stderr
    assert [seen.system for seen in provider.chats("parent-model")[3:]] == ["new|system|lifetimes"]
    assert plan_json(run_cli)["answers"]["stale"] == 2


def test_imported_answers_are_neither_stale_nor_unknown_nor_redone(
    run_cli, project_dir, provider, tmp_path
):
    """The user's own answers were made by no prompt of ours: an edit leaves them alone."""
    answered(run_cli, project_dir, provider)
    own = tmp_path / "own.jsonl"
    own.write_text(
        json.dumps({"topic": "ownership", "question": "Is Box a pointer?", "answer": "Yes."})
        + "\n"
    )
    imported = run_cli("dataset", "import", str(own))
    assert imported.exit_code == 0, imported.stderr
    (project_dir / "prompts" / "answer_system.txt").write_text(OWNERSHIP_ONLY)
    assert plan_json(run_cli)["answers"]["stale"] == 2
    assert plan_json(run_cli)["answers"]["unknown"] == 0
    redone = run_cli("answers", "--stale")
    assert redone.exit_code == 0, redone.stderr
    assert len(provider.chats("parent-model")) == 3 + 2
    assert not any("Is Box a pointer?" in chat.prompt for chat in provider.chats())
    mine = [a for a in lines(project_dir, "answers.jsonl") if a.get("meta", {}).get("source")]
    assert [a["meta"]["source"] for a in mine] == ["import:own.jsonl"]


def test_a_stale_answer_redone_into_an_excluded_one_is_kept(run_cli, project_dir, provider):
    """A redo cut short (a budget's lowered max_tokens, a refusal) would swap a usable
    answer for an excluded one: the stale one stays, said so, and is tried again later."""
    answered(run_cli, project_dir, provider)
    (project_dir / "prompts" / "answer_system.txt").write_text(OWNERSHIP_ONLY)
    path = project_dir / "data" / "answers.jsonl"
    before = path.read_text().splitlines()
    provider.on(None, Reply(openai_completion("cut", finish="length", reasoning="r")), times=2)
    result = run_cli("answers", "--stale")
    assert result.exit_code == 0, result.stderr
    assert (
        "warning: answers: 2 stale answer(s) redone came back excluded (cut short or refused): "
        "the old ones are kept, still stale; `answers --stale` tries again"
    ) in result.stderr
    assert path.read_text().splitlines() == before
    assert plan_json(run_cli)["answers"]["stale"] == 2
    again = run_cli("answers", "--stale")
    assert again.exit_code == 0, again.stderr
    after = lines(project_dir, "answers.jsonl")
    assert all(a["meta"]["excluded"] is None for a in after)
    assert plan_json(run_cli)["answers"]["stale"] == 0
