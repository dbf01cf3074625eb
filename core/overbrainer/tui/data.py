"""What the TUI shows, read from the project's files: no textual here, so it is tested
and reused without a screen."""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from overbrainer import files
from overbrainer.config.describe import describe_settings
from overbrainer.config.env import Environment
from overbrainer.config.load import ConfigError, load_settings
from overbrainer.errors import UserError
from overbrainer.job.layout import RECORD
from overbrainer.lines import read_lines
from overbrainer.pipeline.history import summary_lines
from overbrainer.pipeline.records import (
    ANSWERS,
    DATA_DIR,
    EVAL,
    QUESTIONS,
    REJECTED,
    SUBTOPICS,
    TRAIN,
    DataFiles,
)
from overbrainer.pipeline.spend import project_history
from overbrainer.plugins import load_plugins
from overbrainer.redact import escape_controls
from overbrainer.runs.ids import is_valid_id
from overbrainer.runs.machine import machine_brief, machine_lines, read_machine
from overbrainer.runs.store import RunStore


@dataclass
class ConfigView:
    """The effective configuration as lines, or the problems that make it unusable."""

    lines: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _settings(project_dir: Path) -> Any:
    env = Environment.load(project_dir)
    plugins = load_plugins(env.merged)
    return load_settings(project_dir, env, plugins.kinds, plugins.sections)


def read_config(project_dir: Path) -> ConfigView:
    try:
        settings = _settings(project_dir)
    except ConfigError as error:
        return ConfigView(problems=list(error.problems))
    except UserError as error:
        return ConfigView(problems=[escape_controls(line) for line in str(error).splitlines()])
    return ConfigView(lines=[escape_controls(line) for line in describe_settings(settings)])


def training_line(project_dir: Path) -> str:
    """What ``train`` would start (target, base model, examples), for its confirmation; the
    command itself says what is wrong when the configuration is."""
    try:
        training = _settings(project_dir).training
    except UserError:
        return ""
    if training is None:
        return "no [training] in overbrainer.toml"
    shown = f"{DATA_DIR}/{TRAIN}"
    try:
        file = files.open_read(project_dir / DATA_DIR / TRAIN, shown)  # never a FIFO's wait
    except (OSError, UserError):
        file = None
    if file is None:
        examples = f", no {shown}"
    else:
        with file:
            examples = f", {sum(1 for _ in read_lines(file, shown, cut=True))} train examples"
    return escape_controls(
        f"target `{training.target}`, {training.base_model} ({training.adapter}){examples}"
    )


@dataclass
class QuestionNode:
    id: str
    text: str
    status: str
    """``a`` answered and used, ``x`` excluded, space: unanswered."""
    answer: dict[str, Any] | None = None


@dataclass
class SubtopicNode:
    id: str
    name: str
    questions: list[QuestionNode] = field(default_factory=list)


@dataclass
class TopicNode:
    name: str
    subtopics: list[SubtopicNode] = field(default_factory=list)


@dataclass
class Dataset:
    topics: list[TopicNode] = field(default_factory=list)
    problem: str | None = None
    counts: dict[str, int] = field(default_factory=dict)


def read_dataset(project_dir: Path) -> Dataset:
    """Topics > subtopics > questions, each question marked by its answer."""
    data = DataFiles(project_dir)
    try:
        subtopics = data.read(SUBTOPICS)
        questions = data.read(QUESTIONS)
        answers = {answer["id"]: answer for answer in data.read(ANSWERS)}
        counts = {
            "subtopics": len(subtopics),
            "questions": len(questions),
            "answers": len(answers),
            "excluded": sum(1 for a in answers.values() if a["meta"].get("excluded")),
            "train": len(data.read(TRAIN)),
            "eval": len(data.read(EVAL)),
            "rejected": len(data.read(REJECTED)),
        }
    except UserError as error:
        return Dataset(problem=str(error))
    topics: dict[str, TopicNode] = {}
    by_id: dict[str, SubtopicNode] = {}
    for record in subtopics:
        node = SubtopicNode(record["id"], record["name"])
        by_id[node.id] = node
        topics.setdefault(record["topic"], TopicNode(record["topic"])).subtopics.append(node)
    for record in questions:
        parent = by_id.get(record["subtopic_id"])
        if parent is None:  # a subtopic only questions name: an import's, say
            parent = by_id[record["subtopic_id"]] = SubtopicNode(
                record["subtopic_id"], record["subtopic"]
            )
            topics.setdefault(record["topic"], TopicNode(record["topic"])).subtopics.append(parent)
        answer = answers.get(record["id"])
        status = " " if answer is None else "x" if answer["meta"].get("excluded") else "a"
        parent.questions.append(QuestionNode(record["id"], record["text"], status, answer))
    return Dataset(list(topics.values()), counts=counts)


def answer_text(answer: dict[str, Any]) -> tuple[str, str]:
    """The (reasoning, answer) of an answer record's last assistant turn."""
    for turn in reversed(answer.get("messages", [])):
        if isinstance(turn, dict) and turn.get("role") == "assistant":
            return str(turn.get("reasoning_content") or ""), str(turn.get("content") or "")
    return "", ""


def stage_lines(project_dir: Path) -> list[str]:
    """Cost and tokens per stage, from the history."""
    try:
        return summary_lines(project_history(project_dir))
    except UserError as error:
        return [str(error)]


def runs_by_state(records: list[Any]) -> str:
    counts = Counter(record.state.value for record in records)
    return ", ".join(f"{count} {state}" for state, count in sorted(counts.items())) or "no run"


class RecordCache:
    """The run records, read again only when their ``run.json`` changed: the Training view
    looks every 2 s, and a project may hold a thousand runs."""

    def __init__(self, project_dir: Path) -> None:
        self.project_dir = project_dir
        self._seen: dict[str, tuple[tuple[int, int], Any]] = {}

    def records(self) -> list[Any]:
        store = RunStore(self.project_dir)
        if not store.root.is_dir():
            return []
        fresh: dict[str, tuple[tuple[int, int], Any]] = {}
        for entry in os.scandir(store.root):
            if not is_valid_id(entry.name) or not entry.is_dir(follow_symlinks=False):
                continue
            try:
                stat = os.stat(os.path.join(entry.path, RECORD), follow_symlinks=False)
            except OSError:
                continue
            key = (stat.st_mtime_ns, stat.st_size)
            known = self._seen.get(entry.name)
            if known is not None and known[0] == key:
                fresh[entry.name] = known
                continue
            try:
                fresh[entry.name] = (key, store.load(entry.name))
            except UserError:
                continue
        self._seen = fresh
        return sorted((record for _, record in fresh.values()), key=lambda r: (r.created, r.id))


EXCLUDED_WHY = {
    "truncated": "the parent's answer hit its output token limit (finish_reason length)",
    "refused": "the parent refused, or its content filter stopped the answer",
    "empty": "the parent's answer is empty",
    "no_raw_reasoning": "the parent returned no raw reasoning, and roles.parent.reasoning wants it",
    "no_logprobs": "the parent's logprobs are missing or name tokens the child does not have "
    "(training.distill = logits)",
}


def excluded_reason(answer: dict[str, Any]) -> str:
    """Why ``split`` leaves this answer out, from its ``meta.excluded``, for the detail."""
    reason = escape_controls(str(answer.get("meta", {}).get("excluded") or "unknown"))
    why = EXCLUDED_WHY.get(reason)
    return f"{reason}: {why}" if why else reason


def fit_label(text: str, width: int) -> str:
    """``text`` in ``width`` cells, its middle elided (``…``): questions of a subtopic often
    share their start, so cutting the end would leave identical labels."""
    if len(text) <= width:
        return text
    if width < 8:
        return text[: max(width - 1, 0)] + "…"
    head = (width - 1) // 2
    tail = width - 1 - head
    return f"{text[:head].rstrip()}…{text[-tail:].lstrip()}"


def data_key(project_dir: Path) -> tuple[tuple[int, int] | None, ...]:
    """The size and time of the dataset's files: the Dataset view reads them again only when
    this changes, whoever wrote them (the TUI, another shell)."""
    key: list[tuple[int, int] | None] = []
    for name in (SUBTOPICS, QUESTIONS, ANSWERS):
        try:
            stat = (project_dir / DATA_DIR / name).stat()
        except OSError:
            key.append(None)
        else:
            key.append((stat.st_mtime_ns, stat.st_size))
    return tuple(key)


def machine_block(run_dir: Path, rows: int | None = None) -> str:
    """The gauges of the run's machine under its chart: its latest sample (``runs show``'s
    block, headed by the time it was taken, UTC), "" without one. In fewer than ``rows``
    rows, when it is not given them: two lines (:func:`machine_brief`)."""
    sample = read_machine(run_dir)
    if sample is None:
        return ""
    at = ""
    if sample.time is not None:
        at = " at " + datetime.fromtimestamp(sample.time, UTC).strftime("%H:%M:%S UTC")
    full = ["", f"machine{at}", *machine_lines(sample)[1:]]
    if rows is None or len(full) <= rows:
        return "\n".join(full)
    brief = machine_brief(sample)
    return "\n".join(["", f"machine{at}: {brief[0]}" if brief else f"machine{at}", *brief[1:]])
