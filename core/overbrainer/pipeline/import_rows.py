"""What ``dataset import`` reads: rows of JSON Lines or CSV, each a question, a question
with its answer, or a conversation, in the shapes such data is kept in (docs/your-own-data.md
lists them). Every row is checked before anything is written: a bad one is an error that
names its file and line, and nothing is imported."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from overbrainer import files
from overbrainer.errors import UserError
from overbrainer.pipeline.dedup import bigrams
from overbrainer.pipeline.records import conversation_problem

QUESTION_KEYS = ("question", "prompt", "instruction", "query")
"""The question, by the first of these a row has."""
ANSWER_KEYS = ("answer", "completion", "output", "response")
REASONING_KEYS = ("reasoning", "reasoning_content", "thinking")
CONVERSATION_KEYS = ("messages", "conversations")
"""A conversation: OpenAI's ``[{role, content}]``, or ShareGPT's ``[{from, value}]``."""
CONTEXT_KEY = "input"
"""Alpaca's context, put under the instruction."""
SYSTEM_KEY = "system"
SUBTOPIC_KEY = "subtopic"
TOPIC_KEY = "topic"
KNOWN = frozenset(
    {*QUESTION_KEYS, *ANSWER_KEYS, *REASONING_KEYS, *CONVERSATION_KEYS, CONTEXT_KEY,
     SYSTEM_KEY, SUBTOPIC_KEY, TOPIC_KEY}
)  # fmt: skip

KINDS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".tsv": "tsv"}
"""The file kinds read, by extension."""

_SHAREGPT_ROLES = {
    "system": "system",
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "model": "assistant",
}
_TURN_REASONING = ("reasoning_content", "reasoning", "thinking")


class RowError(UserError):
    """A row that cannot be imported: ``where`` (file:line) and what is wrong with it."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}; nothing was imported")


@dataclass(frozen=True)
class Item:
    """One row, read: its question and, when it has an answer, the conversation to train
    on (ending with the answer)."""

    where: str
    question: str
    topic: str | None = None
    subtopic: str | None = None
    messages: list[dict[str, str]] | None = None


@dataclass
class Read:
    """The rows of a source, read; ``ignored``: keys or columns no row's shape uses."""

    items: list[Item] = field(default_factory=list)
    ignored: set[str] = field(default_factory=set)


def kind_of(name: str) -> str | None:
    """``jsonl``, ``csv`` or ``tsv`` by ``name``'s extension; None for anything else."""
    return KINDS.get(Path(name).suffix.lower())


def read_file(path: Path, shown: str) -> Read:
    """The items of the file at ``path`` (``shown`` names it in messages)."""
    kind = kind_of(path.name)
    if kind is None:
        raise UserError(
            f"{shown}: not a file overbrainer imports: its name must end in "
            f"{', '.join(KINDS)} (JSON Lines or CSV)"
        )
    data = files.read_regular(path, shown)
    if data is None:
        raise UserError(f"{shown}: no such file")
    return read_bytes(data, shown, kind)


def read_bytes(data: bytes, shown: str, kind: str) -> Read:
    """The items of ``data``, a ``kind`` file (see ``KINDS``)."""
    rows = _jsonl_rows(data, shown) if kind == "jsonl" else _csv_rows(data, shown, kind)
    read = Read()
    for where, row in rows:
        read.items.append(item(where, row))
        read.ignored.update(key for key in row if key not in KNOWN)
    return read


def _jsonl_rows(data: bytes, shown: str) -> Iterator[tuple[str, dict[str, Any]]]:
    lines = data.removeprefix(b"\xef\xbb\xbf").split(b"\n")  # a byte-order mark: not a row's
    for number, raw in enumerate(lines, 1):
        where = f"{shown}:{number}"
        if not raw.strip():
            continue
        try:
            row = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError:
            raise RowError(where, "not UTF-8 text") from None
        except ValueError as error:
            raise RowError(where, f"not valid JSON ({getattr(error, 'msg', error)})") from None
        if not isinstance(row, dict):
            raise RowError(where, "not a JSON object")
        yield where, {str(key).strip().lower(): value for key, value in row.items()}


def _csv_rows(data: bytes, shown: str, kind: str) -> Iterator[tuple[str, dict[str, Any]]]:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise RowError(f"{shown}:{line}", "not UTF-8 text") from None
    csv.field_size_limit(files.RECORD_LIMIT)  # an answer is longer than csv's 128 KiB
    reader = csv.reader(io.StringIO(text, newline=""), delimiter="\t" if kind == "tsv" else ",")
    line = 1
    try:
        header = [name.strip().lower() for name in next(reader, [])]
        if not header:
            raise RowError(f"{shown}:1", "no header row (the column names)")
        for name in header:
            if header.count(name) > 1 or not name:
                raise RowError(f"{shown}:1", f"the header has the column {name!r} twice"
                               if name else "the header has a column with no name")
        while True:
            line = reader.line_num + 1
            fields = next(reader, None)
            if fields is None:
                return
            if not any(value.strip() for value in fields):
                continue
            if len(fields) > len(header):
                raise RowError(
                    f"{shown}:{line}", f"{len(fields)} fields, where the header has {len(header)}"
                )
            yield f"{shown}:{line}", {
                name: value for name, value in zip(header, fields, strict=False) if value.strip()
            }
    except csv.Error as error:
        raise RowError(f"{shown}:{line}", f"not valid CSV ({error})") from None


def item(where: str, row: dict[str, Any]) -> Item:
    """The item of ``row``, read at ``where``; a ``RowError`` saying what is wrong."""
    topic = _text(row, TOPIC_KEY, where)
    subtopic = _text(row, SUBTOPIC_KEY, where)
    conversation = _first(row, CONVERSATION_KEYS)
    if conversation is not None:
        messages = _conversation(row[conversation], conversation, where)
        question = next(turn["content"] for turn in messages if turn["role"] == "user").strip()
        _check_question(question, where)
        return Item(where, question, topic, subtopic, messages)
    key = _first(row, QUESTION_KEYS)
    if key is None:
        raise RowError(
            where, f"no question: a row needs one of {', '.join(QUESTION_KEYS)}, or "
            f"{' or '.join(CONVERSATION_KEYS)}"
        )
    question = _text(row, key, where) or ""
    context = _text(row, CONTEXT_KEY, where)
    if context:
        question = f"{question}\n\n{context}"
    _check_question(question, where)
    answer_key = _first(row, ANSWER_KEYS)
    answer = _text(row, answer_key, where) if answer_key else None
    reasoning_key = _first(row, REASONING_KEYS)
    reasoning = _text(row, reasoning_key, where) if reasoning_key else None
    if answer is None:
        if reasoning is not None:
            raise RowError(where, f"{reasoning_key} without an answer")
        return Item(where, question, topic, subtopic)
    messages = []
    system = _text(row, SYSTEM_KEY, where)
    if system is not None:
        messages.append({"role": "system", "content": system})
    messages.append({"role": "user", "content": question})
    reply = {"role": "assistant", "content": answer}
    if reasoning is not None:
        reply["reasoning_content"] = reasoning
    messages.append(reply)
    return Item(where, question, topic, subtopic, messages)


def _first(row: dict[str, Any], keys: tuple[str, ...]) -> str | None:
    """The first of ``keys`` that ``row`` has a value for (blank text is none)."""
    for key in keys:
        value = row.get(key)
        if value is not None and not (isinstance(value, str) and not value.strip()):
            return key
    return None


def _text(row: dict[str, Any], key: str, where: str) -> str | None:
    """``row[key]`` stripped, None when absent or blank; a ``RowError`` when not text."""
    value = row.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise RowError(where, f"{key} is not text")
    return value.strip() or None


def _check_question(question: str, where: str) -> None:
    if not bigrams(question):
        raise RowError(where, "the question has no word")


def _conversation(turns: Any, key: str, where: str) -> list[dict[str, str]]:
    if isinstance(turns, str):  # a CSV cell holds the list as JSON
        try:
            turns = json.loads(turns)
        except ValueError:
            raise RowError(where, f"{key} is not a JSON list of messages") from None
    if not isinstance(turns, list):
        raise RowError(where, f"{key} is not a list of messages")
    messages = [_turn(turn, number, where) for number, turn in enumerate(turns, 1)]
    problem = conversation_problem(messages)
    if problem is not None:
        raise RowError(where, f"{key}: {problem}")
    return messages


def _turn(turn: Any, number: int, where: str) -> dict[str, str]:
    """A message of a conversation as ``answers.jsonl`` keeps it."""
    if not isinstance(turn, dict):
        raise RowError(where, f"message {number} is not an object")
    if "from" in turn:  # ShareGPT's
        said = turn["from"]
        role = _SHAREGPT_ROLES.get(said) if isinstance(said, str) else None
        content = turn.get("value")
        keys = {"from", "value"}
        if role is None:
            raise RowError(
                where, f"message {number}: from {turn['from']!r} is not one of "
                f"{', '.join(_SHAREGPT_ROLES)}"
            )
    else:
        role, content, keys = turn.get("role"), turn.get("content"), {"role", "content"}
        if role not in ("system", "user", "assistant"):
            raise RowError(
                where, f"message {number}: role {role!r} is not system, user or assistant"
            )
    if not isinstance(content, str):
        raise RowError(where, f"message {number} has no text")
    message = {"role": str(role), "content": content}
    for name in _TURN_REASONING:
        if name in turn:
            if "reasoning_content" in message:
                raise RowError(where, f"message {number} has two reasonings")
            if not isinstance(turn[name], str):
                raise RowError(where, f"message {number}: {name} is not text")
            message["reasoning_content"] = turn[name]
            keys.add(name)
    unknown = sorted(set(turn) - keys)
    if unknown:
        raise RowError(
            where, f"message {number} has {', '.join(unknown)}, which overbrainer does not "
            "train on (role, content and reasoning_content)"
        )
    return message
