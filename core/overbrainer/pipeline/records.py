"""The files of ``data/`` and what makes a valid record of each."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from overbrainer.pipeline.jsonl import Check, JsonlWriter, read_jsonl, rewrite_jsonl
from overbrainer.providers.completion import FinishReason, ReasoningKind

DATA_DIR = "data"
SUBTOPICS = "subtopics.jsonl"
QUESTIONS = "questions.jsonl"
ANSWERS = "answers.jsonl"
TRAIN = "train.jsonl"
EVAL = "eval.jsonl"
REJECTED = "rejected.jsonl"
REJECTED_REASONS = "rejected.reasons.jsonl"
"""Why each text of ``rejected.jsonl`` was set aside: kept apart, since the reference tool
reads ``rejected.jsonl`` and wants its records with no other field."""

EXCLUSIONS = ("truncated", "refused", "empty", "no_raw_reasoning", "no_logprobs")
"""Why an answer is set aside, in the order the rules apply."""

MALFORMED = "malformed"
"""Why ``split`` sets aside an answer whose conversation cannot be trained on."""

_TURN_KEYS = {"role", "content", "reasoning_content"}

SOURCE = "source"
"""Where a record came from when no stage made it: a question's top-level ``source``, an
answer's ``meta.source``; ``import:<file>`` for what ``dataset import`` brought in."""
IMPORTED = "import:"


class Subtopic(TypedDict):
    """A line of ``subtopics.jsonl``, its keys in the order they are written."""

    id: str
    topic: str
    name: str
    fingerprint: NotRequired[str]
    """What the subtopic was made from (``pipeline.fingerprint``)."""


class Question(TypedDict):
    """A line of ``questions.jsonl``, its keys in the order they are written."""

    id: str
    topic: str
    subtopic_id: str
    subtopic: str
    text: str
    fingerprint: NotRequired[str]
    """What the question was made from (``pipeline.fingerprint``); none when imported."""
    source: NotRequired[str]
    """``import:<file>`` for a question ``dataset import`` brought in."""


class Turn(TypedDict):
    """One message of an answer's conversation."""

    role: str
    content: str
    reasoning_content: NotRequired[str]


class AnswerMeta(TypedDict):
    """An answer's ``meta``, its keys in the order they are written."""

    model: str
    input_tokens: int
    output_tokens: int
    finish_reason: FinishReason
    reasoning_kind: ReasoningKind
    excluded: str | None
    fingerprint: NotRequired[str]
    question: NotRequired[str]
    """The question a sample answers (``pipeline.samples``): none for the first sample."""
    sample: NotRequired[int]
    batch: NotRequired[str | None]
    """The provider's batch that answered it, when one did."""
    logprobs_problem: NotRequired[str]
    """Why its top-k logprobs could not be kept (``excluded`` is ``no_logprobs``)."""


class Answer(TypedDict):
    """A line of ``answers.jsonl``, as the reference tool writes it (``meta`` aside)."""

    id: str
    topic: str
    subtopic: str
    messages: list[Turn]
    meta: AnswerMeta


class RejectedQuestion(TypedDict):
    """A question's line in ``rejected.jsonl``, as the reference tool writes it."""

    kind: str
    id: str
    topic: str
    subtopic_id: str
    text: str


def _strings(record: dict[str, Any], *keys: str) -> bool:
    get = record.get
    for key in keys:  # noqa: SIM110 - a loop, not all(): called for every line read
        if not isinstance(get(key), str):
            return False
    return True


def is_subtopic(record: dict[str, Any]) -> bool:
    return _strings(record, "id", "topic", "name")


def is_question(record: dict[str, Any]) -> bool:
    return _strings(record, "id", "topic", "subtopic_id", "subtopic", "text")


def _tokens(value: object) -> bool:
    """A token count as a record may hold it: absent, or whole and never negative."""
    return value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0)


def is_answer(record: dict[str, Any]) -> bool:
    """A valid answer line; its token counts, when given, whole and never negative (they
    are what ``plan`` and the budget average: a negative one would be a discount)."""
    meta = record.get("meta")
    return (
        _strings(record, "id", "topic", "subtopic")
        and isinstance(record.get("messages"), list)
        and isinstance(meta, dict)
        and (meta.get("excluded") is None or isinstance(meta.get("excluded"), str))
        and _tokens(meta.get("input_tokens"))
        and _tokens(meta.get("output_tokens"))
    )


def conversation_problem(messages: list[Any]) -> str | None:
    """What makes ``messages`` no conversation to train on, or None: an optional system
    message first, then user and assistant turns by turns, ending with the assistant's;
    string contents, and reasoning only on an assistant turn."""
    if not messages:
        return "no messages"
    for number, turn in enumerate(messages, 1):
        problem = _turn_problem(turn)
        if problem is not None:
            return f"message {number} {problem}"
    roles = [turn["role"] for turn in messages]
    if roles[0] == "system":
        roles = roles[1:]
    if not roles or roles[-1] != "assistant":
        return "no assistant turn at the end"
    if roles != ["user", "assistant"] * (len(roles) // 2):
        return "the turns are not user, assistant, user, …"
    return None


def _turn_problem(turn: Any) -> str | None:
    if not isinstance(turn, dict) or not isinstance(turn.get("role"), str):
        return "has no role"
    if not isinstance(turn.get("content"), str):
        return "has no text"
    if not _TURN_KEYS.issuperset(turn):
        return "has unknown fields"
    if "reasoning_content" in turn and (
        turn["role"] != "assistant" or not isinstance(turn["reasoning_content"], str)
    ):
        return "has reasoning that is not an assistant's text"
    return None


def is_rejected(record: dict[str, Any]) -> bool:
    """A text set aside for good: ``kind`` is the stage; a subtopic's text is its ``name``
    (the reference tool's shape) or ``text`` (records written before it was followed)."""
    return _strings(record, "kind", "topic") and rejected_text(record) is not None


def is_imported(record: dict[str, Any]) -> bool:
    """Whether ``record`` (a question or an answer) came from ``dataset import``: it is
    the user's own, never asked for nor answered again, ``--force`` included."""
    source = record.get(SOURCE)
    if source is None:
        meta = record.get("meta")
        source = meta.get(SOURCE) if isinstance(meta, dict) else None
    return isinstance(source, str) and source.startswith(IMPORTED)


def rejected_text(record: dict[str, Any]) -> str | None:
    """The text a ``rejected.jsonl`` record sets aside."""
    for key in ("text", "name"):
        if isinstance(record.get(key), str):
            return str(record[key])
    return None


def rejected_question(question: Mapping[str, Any]) -> RejectedQuestion:
    """A question's record in ``rejected.jsonl``, as the reference tool writes it."""
    return {
        "kind": "question",
        "id": question["id"],
        "topic": question["topic"],
        "subtopic_id": question["subtopic_id"],
        "text": question["text"],
    }


def is_rejection_reason(record: dict[str, Any]) -> bool:
    return _strings(record, "id", "kind", "topic", "reason")


CHECKS: dict[str, Check] = {
    SUBTOPICS: is_subtopic,
    QUESTIONS: is_question,
    ANSWERS: is_answer,
    TRAIN: is_answer,
    EVAL: is_answer,
    REJECTED: is_rejected,
    REJECTED_REASONS: is_rejection_reason,
}


class DataFiles:
    """``data/`` of the project at ``project_dir``."""

    def __init__(self, project_dir: Path) -> None:
        self.dir = project_dir / DATA_DIR

    def path(self, name: str) -> Path:
        return self.dir / name

    def read(self, name: str) -> list[dict[str, Any]]:
        return read_jsonl(self.path(name), f"{DATA_DIR}/{name}", CHECKS[name])

    def writer(self, name: str) -> JsonlWriter:
        # An answer holds ints and strings, no float: orjson writes it as json would.
        return JsonlWriter(
            self.path(name), CHECKS[name], f"{DATA_DIR}/{name}", finite=name == ANSWERS
        )

    def rewrite(self, name: str, records: Iterable[dict[str, Any]]) -> None:
        rewrite_jsonl(self.path(name), records)

    def drop_topic(
        self, name: str, topic: str, kind: str | None = None, writer: JsonlWriter | None = None
    ) -> None:
        """Rewrite ``name`` without the records of ``topic`` (and of ``kind``, for
        ``rejected.jsonl``; imported ones stay), read afresh: what was appended since the
        stage began stays.
        ``writer``, appending to that file, is closed first so it reopens the new file."""
        if writer is not None:
            writer.close()
        records = self.read(name)
        self.rewrite(name, [r for r in records if not _of(r, {topic}, kind)])

    def latest(self, name: str, in_place: bool = False, keep_usable: bool = False) -> int:
        """Rewrite ``name`` keeping only the last record of each id, where it is, when an
        id appears twice (an answer and the one that replaced it); ``in_place``: where
        the first was (a stale answer redone keeps its line's place). ``keep_usable``: a
        usable first record stays when its replacement came back excluded (a stale answer
        redone under a budget that cut it short is worse than the stale one). The number of
        first records so kept."""
        records = self.read(name)
        last = {record["id"]: index for index, record in enumerate(records)}
        if len(last) == len(records):
            return 0
        if not in_place:
            self.rewrite(name, [r for i, r in enumerate(records) if last[r["id"]] == i])
            return 0
        seen: set[str] = set()
        kept = []
        stayed = 0
        for record in records:
            if record["id"] not in seen:
                seen.add(record["id"])
                newest = records[last[record["id"]]]
                if keep_usable and newest is not record and _excluded(newest) and not _excluded(
                    record
                ):
                    kept.append(record)
                    stayed += 1
                else:
                    kept.append(newest)
        self.rewrite(name, kept)
        return stayed


def _excluded(record: dict[str, Any]) -> bool:
    meta = record.get("meta")
    return isinstance(meta, dict) and meta.get("excluded") is not None


def without(
    records: list[dict[str, Any]], topics: set[str], kind: str | None = None
) -> list[dict[str, Any]]:
    """``records`` less those of ``topics`` (and of ``kind``, for ``rejected.jsonl``): what
    ``--force`` starts from; imported records stay (no stage can make them again).
    Nothing is written: see ``Forgetting``."""
    return [r for r in records if not _of(r, topics, kind)]


def _of(record: dict[str, Any], topics: set[str], kind: str | None) -> bool:
    return (
        record["topic"] in topics
        and (kind is None or record["kind"] == kind)
        and not is_imported(record)
    )


class Forgetting:
    """What ``--force`` removes from disk, removed only once the provider has answered for
    the topic: a run that fails before that (an expired key, no credit left) leaves every
    old record where it was, and the run after it starts from the same place.

    ``files``: the files and, for ``rejected.jsonl``, the kind of record to forget.
    """

    def __init__(self, data: DataFiles, force: bool, files: list[tuple[str, str | None]]) -> None:
        self._data = data
        self._force = force
        self._files = files
        self._done: set[str] = set()

    def answered(self, topic: str, writers: dict[str, JsonlWriter]) -> None:
        """The provider answered for ``topic``: forget its old records now (once), before
        the first new one is appended. ``writers``: the open writers, by file name."""
        if not self._force or topic in self._done:
            return
        self._done.add(topic)
        for name, kind in self._files:
            self._data.drop_topic(name, topic, kind, writers.get(name))
