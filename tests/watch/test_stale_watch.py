"""`watch` and stale answers: each cycle says how many an edit made stale and what redoing
them costs; with `[watch] redo_stale = true` it redoes them, else it only says so."""

from __future__ import annotations

import json

from tests.helpers.watching import CYCLE, edit_answer_prompt, save

STALE = (
    r"^watch: stale: answers: 8 made with another prompt, model or setting than now; "
    r"redoing them: 8 requests, \$[\d.]+ "
)
NOT_REDONE = "watch: stale records are not redone: set [watch] redo_stale = true"


def test_stale_answers_are_said_and_left_by_default(watch, provider):
    watching = watch()
    watching.line(CYCLE.format(n=1))
    asked = len(provider.chats("parent-model"))
    edit_answer_prompt(watching.project_dir)
    watching.line(STALE)
    assert watching.line(r"^watch: stale records").string == NOT_REDONE
    second = watching.line(CYCLE.format(n=2))
    assert second["changed"] == "prompts/answer_system.txt"
    assert "answers" not in second["ran"]
    assert len(provider.chats("parent-model")) == asked


def test_redo_stale_answers_them_again_in_the_cycle(watch, project_dir, provider):
    config = project_dir / "overbrainer.toml"
    save(config, config.read_text() + "\n[watch]\nredo_stale = true\n")
    watching = watch()
    watching.line(CYCLE.format(n=1))
    asked = len(provider.chats("parent-model"))
    edit_answer_prompt(project_dir)
    said = watching.line(STALE)
    assert said.string.endswith(": redone now")  # not the command the user need not type
    second = watching.line(CYCLE.format(n=2))
    assert "answers 8 done" in second["ran"]
    assert NOT_REDONE not in watching.seen
    new = provider.chats("parent-model")[asked:]
    assert len(new) == 8 and {seen.system.split("|")[0] for seen in new} == {"new"}
    answers = (project_dir / "data" / "answers.jsonl").read_text().splitlines()
    assert len({json.loads(line)["id"] for line in answers}) == len(answers) == 8
    assert watching.quiet(1.0) == []  # its own writes start no third cycle, nothing stale


def test_records_of_unknown_making_are_said_at_the_first_cycle_only(watch, project_dir):
    # A project made before fingerprints were kept: its records hold none.
    first = watch()
    first.line(CYCLE.format(n=1))
    first.interrupt()
    for name in ("subtopics.jsonl", "questions.jsonl", "answers.jsonl"):
        path = project_dir / "data" / name
        records = [json.loads(line) for line in path.read_text().splitlines()]
        for record in records:
            record.pop("fingerprint", None)
            record.get("meta", {}).pop("fingerprint", None)
        save(path, "".join(json.dumps(r) + "\n" for r in records))
    watching = watch()
    line = watching.line(r"^watch: stale: answers: 8 made before")
    assert line.string == (
        "watch: stale: answers: 8 made before overbrainer kept what made them: unknown, not "
        "counted stale (`overbrainer answers --force` redoes them all)"
    )
    cycle = watching.line(CYCLE.format(n=1))
    assert "answers" not in cycle["ran"]  # not redone on a guess
    shown = len(watching.seen)
    config = project_dir / "overbrainer.toml"
    save(config, config.read_text().replace("learning_rate = 0.0002", "learning_rate = 0.001"))
    watching.line(CYCLE.format(n=2))
    assert not [seen for seen in watching.seen[shown:] if "unknown" in seen]  # said once
