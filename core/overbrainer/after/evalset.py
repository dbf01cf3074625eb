"""Where the questions of a compare (and of export's verification) come from: the run's eval
split, or the held-out sets of the user's own (``[eval] files``, one set a file, named by
its stem).

A question is a dict: ``id``, ``set``, ``topic``, ``messages`` (what a model is asked: the
system prompt, if any, and the turns before the answer), ``question`` (the last user turn),
``reference`` (a file's answer, if it gives one), and the parent's answer ``parent`` with its
tokens (None for a file's question until :func:`~overbrainer.after.parent_answers.
fill_parent_answers` gives it). Any side of a compare is asked ``messages``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loguru import logger

from overbrainer import files
from overbrainer.after.judge import strip_reasoning
from overbrainer.config.model import Settings
from overbrainer.errors import UserError
from overbrainer.job.layout import EVAL_FILE
from overbrainer.pipeline.decontaminate import (
    EVAL_FILES,
    SPLIT_SET,
    EvalItem,
    named_files,
    read_items,
)
from overbrainer.project import Project

SPLIT = SPLIT_SET
"""The eval split's name as an eval set (``compare --eval split``)."""
SETTING = EVAL_FILES


class NoEvalQuestions(UserError):
    """The eval split holds no question with an answer; ``shown`` is its file."""

    def __init__(self, shown: str) -> None:
        super().__init__(f"{shown} has no question with an answer: run `overbrainer split` first")
        self.shown = shown


def eval_questions(project: Project, run_dir: Path, limit: int | None) -> list[dict[str, Any]]:
    """The first ``limit`` eval records with a user and an assistant message, in file order:
    what the child is asked, and the parent's answer without its reasoning."""
    path = run_dir / EVAL_FILE
    if not path.is_file():
        path = project.dir / EVAL_FILE
    shown = path.relative_to(project.dir) if path.is_relative_to(project.dir) else path
    try:
        # Lines end with \n only: a question may hold U+2028, which str.splitlines cuts at.
        lines = (files.read_text(path, str(shown), files.READ_LIMIT) or "").split("\n")
    except UserError:
        lines = []
    questions: list[dict[str, Any]] = []
    for line in lines:
        if limit is not None and len(questions) >= limit:
            break
        try:
            record = json.loads(line)
        except ValueError:
            continue
        question = _question(record)
        if question is not None:
            questions.append(question)
    if not questions:
        raise NoEvalQuestions(str(shown))
    return questions


def _question(record: Any) -> dict[str, Any] | None:
    if not isinstance(record, dict) or not isinstance(record.get("messages"), list):
        return None
    messages = record["messages"]
    index = next(
        (i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "assistant"),
        None,
    )
    if index is None:
        return None
    before = [
        {"role": m["role"], "content": m["content"]}
        for m in messages[:index]
        if isinstance(m, dict) and isinstance(m.get("content"), str)
    ]
    users = [m["content"] for m in before if m["role"] == "user"]
    if not users or not isinstance(messages[index].get("content"), str):
        return None
    meta = record["meta"] if isinstance(record.get("meta"), dict) else {}
    return {
        "id": str(record.get("id", "")),
        "set": SPLIT,
        "topic": record.get("topic"),
        "messages": before,
        "question": users[-1],
        "reference": None,
        "parent": strip_reasoning(messages[index]["content"]),
        "parent_input_tokens": int(meta.get("input_tokens") or 0),
        "parent_output_tokens": int(meta.get("output_tokens") or 0),
    }


@dataclass(frozen=True)
class EvalSet:
    """A held-out set of the user's: its name (the file's stem), its file as shown, and its
    items (``where`` is ``FILE:LINE``)."""

    name: str
    file: str
    items: tuple[EvalItem, ...]


def eval_sets(project_dir: Path, settings: Settings) -> dict[str, EvalSet]:
    """The sets of ``[eval] files``, in the patterns' order; a malformed line is an error
    naming its file and line, and so are two files of one name."""
    return {
        name: EvalSet(name, shown, tuple(read_items(path, shown)))
        for name, path, shown in named_files(project_dir, settings.eval.files, SETTING)
    }


def file_questions(
    eval_set: EvalSet, system: str | None, limit: int | None
) -> list[dict[str, Any]]:
    """The first ``limit`` questions of ``eval_set``, asked as the child was trained (with
    ``pipeline.system_prompt``, if set); ``parent`` None, to be asked. The id is
    ``NAME:LINE``."""
    prefix = [{"role": "system", "content": system}] if system else []
    return [
        {
            "id": f"{eval_set.name}:{item.where.rsplit(':', 1)[1]}",
            "set": eval_set.name,
            "topic": None,
            "messages": [*prefix, {"role": "user", "content": item.text}],
            "question": item.text,
            "reference": item.answer,
            "parent": None,
            "parent_input_tokens": 0,
            "parent_output_tokens": 0,
        }
        for item in eval_set.items[:limit]
    ]


def select_questions(
    project: Project, run_dir: Path, name: str | None, limit: int | None
) -> list[dict[str, Any]]:
    """The questions of a compare: the eval set ``name`` (``split``, or a set of ``[eval]
    files``), or, with no name, the eval split and then every set; the first ``limit`` of
    each. A file's questions have no parent's answer yet."""
    sets = eval_sets(project.dir, project.settings)
    if name is not None and name != SPLIT and name not in sets:
        known = ", ".join(f"`{known}`" for known in [SPLIT, *sets])
        raise UserError(
            f"no eval set `{name}`: the sets are {known} (the files of {SETTING} in "
            "overbrainer.toml, each named by its file)"
        )
    questions = eval_questions(project, run_dir, limit) if name in (None, SPLIT) else []
    system = project.settings.pipeline.system_prompt
    for eval_set in sets.values():
        if name is not None and eval_set.name != name:
            continue
        if not eval_set.items:
            if name is not None:
                raise UserError(f"{eval_set.file} has no question (the set `{name}`)")
            logger.warning(f"compare: {eval_set.file} has no question: the set is left out")
        questions.extend(file_questions(eval_set, system, limit))
    return questions
