"""Test projects wired to the loopback provider, and their data files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from overbrainer.pipeline.ids import question_id, subtopic_id

API_KEY = "sk-test-0123456789abcdefSECRET"

PIPELINE_CONFIG = """\
[project]
name = "Demo"

[[topics]]
name = "ownership"
subtopics = 2
questions_per_subtopic = 3

[[topics]]
name = "lifetimes"
subtopics = 1
questions_per_subtopic = 2

[providers.main]
protocol = "openai"

[roles.generator]
provider = "main"
model = "gen-model"

[roles.parent]
provider = "main"
model = "parent-model"
reasoning = true

[pipeline]
concurrency = 4
max_retries = 2
question_batch_size = 2
"""

TEST_PROMPTS = {
    "subtopics.txt": "subtopics|{{ topic }}|{{ count }}",
    "questions.txt": "questions|{{ topic }}|{{ subtopic }}|{{ count }}",
    "answer_system.txt": "system|{{ topic }}",
}


def write_project(directory: Path, url: str, config: str = PIPELINE_CONFIG) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "overbrainer.toml").write_text(config, encoding="utf-8")
    (directory / ".env").write_text(
        f"OVERBRAINER_PROVIDERS__MAIN__BASE_URL={url}\n"
        f"OVERBRAINER_PROVIDERS__MAIN__API_KEY={API_KEY}\n",
        encoding="utf-8",
    )
    prompts = directory / "prompts"
    prompts.mkdir(exist_ok=True)
    for name, text in TEST_PROMPTS.items():
        (prompts / name).write_text(text, encoding="utf-8")
    return directory


def lines(project_dir: Path, name: str) -> list[dict[str, Any]]:
    path = project_dir / "data" / name
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def seed_questions(project_dir: Path, questions: dict[tuple[str, str], list[str]]) -> list[dict]:
    """Write subtopics and questions: ``{(topic, subtopic): [question, …]}``."""
    data = project_dir / "data"
    data.mkdir(exist_ok=True)
    subtopics, records = [], []
    for (topic, name), texts in questions.items():
        sid = subtopic_id(topic, name)
        subtopics.append({"id": sid, "topic": topic, "name": name})
        records += [
            {"id": question_id(sid, t), "topic": topic, "subtopic_id": sid, "subtopic": name,
             "text": t}
            for t in texts
        ]
    for name, items in (("subtopics.jsonl", subtopics), ("questions.jsonl", records)):
        with (data / name).open("a", encoding="utf-8") as file:
            file.writelines(json.dumps(item) + "\n" for item in items)
    return records


def answer(question: dict, excluded: str | None = None) -> dict:
    """An answers.jsonl line for ``question``."""
    return {
        "id": question["id"],
        "topic": question["topic"],
        "subtopic": question["subtopic"],
        "messages": [
            {"role": "user", "content": question["text"]},
            {"role": "assistant", "content": "A", "reasoning_content": "R"},
        ],
        "meta": {"model": "parent-model", "input_tokens": 1, "output_tokens": 2,
                 "finish_reason": "stop", "reasoning_kind": "raw", "excluded": excluded},
    }

# Training on this machine's GPU: what `plan` prices a training stage of.
LOCAL_TRAINING = """
[training]
target = "here"
base_model = "Qwen/Qwen3-0.6B"
adapter = "lora"
epochs = 2

[targets.here]
kind = "local"
device = "gpu"
"""
