"""``split``: the usable answers into ``train.jsonl`` and ``eval.jsonl``, the same way every time.

The eval set gets ``round(n x eval_ratio)`` examples (at least one, never all), shared over
topics, then subtopics, by largest remainder; within a subtopic, the first by a seeded XXH3-64
order go to eval. Nothing depends on the order of ``answers.jsonl``. Then, and only then,
train is cleaned: an example sharing ``[split] decontaminate_n`` words in a row with an eval
question (the eval split's, ``[eval] files``', ``[split] decontaminate``'s) is dropped
(:mod:`overbrainer.pipeline.decontaminate`).
"""

from __future__ import annotations

import gc
import math
import os
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, BinaryIO, TypeVar

from loguru import logger

from overbrainer import files, splitpair
from overbrainer.config.model import Settings, Topic
from overbrainer.pipeline import jsonl
from overbrainer.pipeline.agreement import disagreeing, final_result
from overbrainer.pipeline.decontaminate import (
    EVAL_FILES,
    MIN_WORDS,
    Contamination,
    EvalItem,
    Index,
    load_files,
    named_files,
    read_items,
)
from overbrainer.pipeline.ids import seeded_order
from overbrainer.pipeline.jsonl import encode, loads
from overbrainer.pipeline.preference import Pairing, preferred, read_preferences
from overbrainer.pipeline.records import (
    ANSWERS,
    CHECKS,
    DATA_DIR,
    EVAL,
    EXCLUSIONS,
    MALFORMED,
    QUESTIONS,
    REJECTED,
    REJECTED_REASONS,
    TRAIN,
    DataFiles,
    conversation_problem,
    rejected_question,
)
from overbrainer.pipeline.samples import question_of, sample_of
from overbrainer.pipeline.verdict import strip_reasoning
from overbrainer.redact import escape_controls

REASONS = (*EXCLUSIONS, MALFORMED)


@dataclass
class SplitResult:
    train: int = 0
    eval: int = 0
    orphaned: int = 0
    contaminated: int = 0
    """Train examples dropped for sharing an n-gram with an eval item (``[split]``)."""
    unkept: int = 0
    """A question's answers ``[pipeline] select`` did not keep (``samples`` > 1)."""
    selected: int = 0
    """The usable answers ``[pipeline] select`` chose from (the kept and the unkept; 0
    with ``select = "all"``)."""
    held_out: int = 0
    """The other answers of an eval question: the eval split has one an eval question,
    and none of them trains (they would teach the eval set)."""
    excluded: Counter[str] = field(default_factory=Counter)
    written: bool = True

    def summary(self) -> str:
        reasons = ", ".join(
            f"{reason} {self.excluded[reason]}"
            for reason in [*REASONS, *sorted(set(self.excluded) - set(REASONS))]
            if self.excluded[reason]
        )
        # A reason is read from answers.jsonl: whatever it holds is shown escaped.
        reasons = escape_controls(reasons)
        excluded = f"{self.excluded.total()} excluded" + (f" ({reasons})" if reasons else "")
        # Said only when there are some: the line stays the reference tool's otherwise.
        dropped = f", {self.contaminated} contaminated" if self.contaminated else ""
        if self.unkept:
            dropped += f", {self.unkept} not selected"
        if self.held_out:
            dropped += f", {self.held_out} held out (other answers of eval questions)"
        return (
            f"split: {self.train} train, {self.eval} eval, {excluded}, {self.orphaned} orphaned"
            f"{dropped}"
        )


def eval_size(n: int, ratio: float) -> int:
    """``n x ratio`` rounded half away from zero, kept within [1, n - 1]; 0 below 2."""
    if n < 2:
        return 0
    return min(max(math.floor(n * ratio + 0.5), 1), n - 1)


def allocate(total: int, sizes: Mapping[str, int], seed: int) -> dict[str, int]:
    """``total`` shared over the groups of ``sizes`` by largest remainder; equal remainders
    go by XXH3-64(seed, name), then name."""
    count = sum(sizes.values())
    if count == 0:
        return dict.fromkeys(sizes, 0)
    quotas = {name: total * size // count for name, size in sizes.items()}
    left = total - sum(quotas.values())
    order = sorted(
        sizes, key=lambda name: (-(total * sizes[name] % count), seeded_order(seed, name), name)
    )
    for name in order[:left]:
        quotas[name] += 1
    return quotas


def unusable(answer: dict[str, Any]) -> str | None:
    """Why an answer not excluded by ``answers`` still cannot be trained on (a file edited
    by hand, another tool's), said once on stderr, or None."""
    problem = _problem(answer)
    if problem is not None and problem[1]:
        logger.warning(problem[1])
    return None if problem is None else problem[0]


def _problem(answer: dict[str, Any]) -> tuple[str, str] | None:
    """Why, and the warning to give (or ""), as ``unusable`` says. A conversation of one
    question and its answer, as ``answers`` writes them, is checked here without
    ``conversation_problem``'s general walk (it gives None for it)."""
    messages = answer["messages"]
    if len(messages) == 2:
        user, assistant = messages
        if (
            type(user) is dict
            and len(user) == 2
            and user.get("role") == "user"
            and type(user.get("content")) is str
            and type(assistant) is dict
            and assistant.get("role") == "assistant"
            and type(assistant.get("content")) is str
            and (
                len(assistant) == 2
                or (len(assistant) == 3 and type(assistant.get("reasoning_content")) is str)
            )
        ):
            return None if assistant["content"].strip() else ("empty", "")
    problem = conversation_problem(answer["messages"])
    if problem is not None:
        return MALFORMED, f"split: answer {answer['id']}: malformed conversation ({problem})"
    if not answer["messages"][-1]["content"].strip():
        return "empty", ""
    return None


@dataclass(slots=True)
class _Answer:
    """What ``split`` keeps of an answer while it reads them: where its line is, never
    the record itself (100,000 answers are tens of MiB)."""

    id: str
    offset: int
    length: int
    topic: str
    subtopic: str
    question: str
    """The id of the question it answers (``pipeline.samples``)."""
    sample: int
    excluded: str | None
    problem: tuple[str, str] | None
    verbatim: bool
    """The line is exactly what ``dumps`` writes of its record: copied as is."""


def _answers(source: BinaryIO | None) -> dict[str, _Answer]:
    """The latest answer of each id, in the order ids first appear (as a dict of the
    records would hold them)."""
    latest: dict[str, _Answer] = {}
    if source is None:
        return latest
    intern = sys.intern
    codec = jsonl.fast_codec()  # None: no line is read fast, so it is never called
    dumps_fast = codec.dumps if codec is not None else None
    for offset, length, body, answer, fast, small in jsonl.scan_records(
        source, f"{DATA_DIR}/{ANSWERS}", CHECKS[ANSWERS]
    ):
        excluded = answer["meta"]["excluded"]
        if fast:
            verbatim = not small and dumps_fast(answer) == body  # type: ignore[misc]
        else:
            verbatim = jsonl.dumps(answer).encode() == body
        latest[answer["id"]] = _Answer(
            answer["id"],
            offset,
            length,
            intern(answer["topic"]),
            intern(answer["subtopic"]),
            question_of(answer),
            sample_of(answer),
            excluded,
            None if excluded is not None else _problem(answer),
            verbatim,
        )
    return latest


def run(data: DataFiles, settings: Settings, topics: list[Topic]) -> SplitResult:
    """Rewrite train and eval from every topic's answers, and count what ``topics`` hold
    (``--topic`` narrows the counts printed, as in the reference tool, never the split).
    When no example would be left in either, nothing is written (``written`` is false).

    Streams: answers are read once to classify them, and the lines kept are read again
    by offset, from the same open file, as they are written: memory holds an index,
    never the records.
    """
    stale = splitpair.remove_stale(data.dir)
    if stale:
        logger.info(f"split: removed {stale} temporary file(s) an interrupted split left")
    source = files.open_read(data.path(ANSWERS), f"{DATA_DIR}/{ANSWERS}")
    collecting = gc.isenabled()
    gc.disable()  # 100,000 index entries survive: each full collection would walk them all
    try:
        return _split(data, settings, topics, source)
    finally:
        if collecting:
            gc.enable()
        if source is not None:
            source.close()


def _split(
    data: DataFiles, settings: Settings, topics: list[Topic], source: BinaryIO | None
) -> SplitResult:
    # Read first: a malformed file is reported before anything is written.
    decontaminating = settings.split.decontaminate_n > 0
    benchmarks = _held_out(data, settings, read=decontaminating)
    counted = {topic.name for topic in topics}
    configured = {topic.name for topic in settings.topics}
    questions = jsonl.ids_of(data.path(QUESTIONS), f"{DATA_DIR}/{QUESTIONS}", CHECKS[QUESTIONS])
    result = SplitResult()
    usable: Usable = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    # The later answer to a question is the one that counts (`answers --force` appends
    # the new answer after the old one).
    latest = _answers(source)
    whole = counted == configured
    for answer in latest.values():
        counts = answer.topic in counted or (whole and answer.topic not in configured)
        if answer.topic not in configured or answer.question not in questions:
            result.orphaned += counts
        elif answer.excluded is not None:
            if counts:
                result.excluded[answer.excluded] += 1
        elif answer.problem is not None:
            reason, warning = answer.problem
            if warning:
                logger.warning(warning)
            if counts:
                result.excluded[reason] += 1
        else:
            usable[answer.topic][answer.subtopic][answer.question].append(answer)
    del questions

    unkept = _selecting(data, source, usable, settings, counted, result)
    train, evaluation, held = _divided(usable, settings)
    result.held_out = sum(1 for answer in held if answer.topic in counted)
    if train and source is not None and decontaminating:
        # The eval split is chosen first, and never changed: only train is cleaned.
        train, dropped = _decontaminated(source, train, evaluation, benchmarks, settings)
        result.contaminated = sum(1 for answer, _ in dropped if answer.topic in counted)
        _record(data, dropped, settings.split.decontaminate_n)
    _record_unkept(data, source, unkept)
    result.train = sum(1 for answer in train if answer.topic in counted)
    result.eval = sum(1 for answer in evaluation if answer.topic in counted)
    if not train and not evaluation:
        result.written = False  # nothing to train on: the files stay as they are
        return result
    assert source is not None  # there are answers
    splitpair.begin(data.dir)  # the pair is not to be used until both are written
    system = settings.pipeline.system_prompt
    _write(data, TRAIN, source, train, system)
    try:
        _write(data, EVAL, source, evaluation, system)
    except files.DiskFull as error:
        raise _stopped(error, "{train} is new and {eval} as it was") from None
    try:
        splitpair.commit(data.dir)
    except files.DiskFull as error:
        raise _stopped(error, "{train} and {eval} are new, but not recorded") from None
    return result


def _held_out(data: DataFiles, settings: Settings, read: bool) -> list[EvalItem]:
    """The eval items of files train must not overlap: the user's held-out questions
    (``[eval] files``), then the benchmarks ``[split] decontaminate`` lists (none unless
    ``read``). ``[eval] files`` that ``compare`` would refuse (two of one name) are refused
    here either way, before anything is written, not at compare time."""
    project_dir = data.dir.parent
    held = named_files(project_dir, settings.eval.files, EVAL_FILES)
    if not read:
        return []
    return [
        *(item for _, path, shown in held for item in read_items(path, shown)),
        *load_files(project_dir, settings.split.decontaminate),
    ]


def _turns(source: BinaryIO, answer: _Answer, roles: tuple[str, ...]) -> list[str]:
    """The texts of ``answer``'s turns of ``roles`` (an assistant's reasoning included)."""
    raw = os.pread(source.fileno(), answer.length, answer.offset)
    record, _ = loads(raw[:-1] if raw.endswith(b"\n") else raw)
    texts = []
    for turn in record["messages"]:
        if turn["role"] in roles:
            texts.append(turn["content"])
            if "reasoning_content" in turn:
                texts.append(turn["reasoning_content"])
    return texts


def _decontaminated(
    source: BinaryIO,
    train: list[_Answer],
    evaluation: list[_Answer],
    benchmarks: list[EvalItem],
    settings: Settings,
) -> tuple[list[_Answer], list[tuple[_Answer, Contamination]]]:
    """``train`` less the examples whose question or answer shares a
    ``decontaminate_n``-gram with an eval question (the eval split's, then the files':
    ``[eval] files``, ``[split] decontaminate``),
    and those dropped with why; in the same order, so the result is the same every time."""
    items = [
        EvalItem(f"eval item {answer.id}", "\n".join(_turns(source, answer, ("user",))))
        for answer in evaluation
    ]
    index = Index([*items, *benchmarks], settings.split.decontaminate_n)
    # Said of the files' questions, which the user wrote; an eval split question (the
    # parent's) under MIN_WORDS words is as unchecked, but no run of real size has one.
    unchecked = sum(place >= len(items) for place in index.unchecked)
    if unchecked:
        least = min(MIN_WORDS, settings.split.decontaminate_n)
        logger.warning(
            f"decontamination: {unchecked} question(s) of [eval] files or [split] "
            f"decontaminate of fewer than {least} words not checked (too short to tell a "
            "copy from a common phrase)"
        )
    if not index:
        return train, []  # no eval question is that long
    kept: list[_Answer] = []
    dropped: list[tuple[_Answer, Contamination]] = []
    for answer in train:
        found = index.match(_turns(source, answer, ("user", "assistant")))
        if found is None:
            kept.append(answer)
        else:
            dropped.append((answer, found))
    return kept, dropped


def _record(data: DataFiles, dropped: list[tuple[_Answer, Contamination]], n: int) -> None:
    """Each dropped example's question in ``rejected.jsonl`` (the reference's shape) and
    why in ``rejected.reasons.jsonl``, once: a split run again adds only what is new."""
    if not dropped:
        return
    ids = {answer.question for answer, _ in dropped}

    def scan(name: str) -> Iterator[dict[str, Any]]:  # one line at a time: 100,000 questions
        for line in jsonl.scan_jsonl(data.path(name), f"{DATA_DIR}/{name}", CHECKS[name]):
            if line.record.get("id") in ids:
                yield line.record

    questions = {q["id"]: q for q in scan(QUESTIONS)}
    rejected = {r["id"] for r in scan(REJECTED) if r["kind"] == "question"}
    reasons = {(r["id"], r["reason"]) for r in scan(REJECTED_REASONS)}
    with data.writer(REJECTED) as rejects, data.writer(REJECTED_REASONS) as why:
        for answer, found in dropped:
            question = questions.get(answer.question)
            if question is None:
                continue  # never: an answer without its question is orphaned, not split
            if answer.question not in rejected:
                rejected.add(answer.question)  # its other answers may be dropped too
                rejects.append(rejected_question(question))
            reason = found.reason(n)
            if (answer.question, reason) not in reasons:
                reasons.add((answer.question, reason))
                why.append({"id": answer.question, "kind": "question", "topic": answer.topic,
                            "reason": reason})  # fmt: skip


def _stopped(error: files.DiskFull, kept: str) -> files.DiskFull:
    """A full disk after the first file: what is on disk (``kept``, with ``{train}`` and
    ``{eval}``), and how to go on."""
    kept = kept.format(train=f"{DATA_DIR}/{TRAIN}", eval=f"{DATA_DIR}/{EVAL}")
    return files.DiskFull(
        error.shown,
        f"split stopped: the disk is full ({error.shown} could not be written); {kept}: "
        "a pair `train` refuses; free some space, then run `overbrainer split` again",
    )


Usable = dict[str, dict[str, dict[str, list[_Answer]]]]
"""The usable answers by topic, subtopic and question: a question's answers (its
samples) in the order of their sample."""


def _divided(
    usable: Usable, settings: Settings
) -> tuple[list[_Answer], list[_Answer], list[_Answer]]:
    """Train and eval, each in the seeded order, and the answers held out: the eval size
    shared over topics, then subtopics, in questions; each subtopic's first questions in
    that order taken for eval, with one answer each (its first sample kept). The other
    answers of an eval question are held out: trained on, they would teach the eval set."""
    seed = settings.pipeline.seed
    everyone = {
        question: answers
        for subtopics in usable.values()
        for group in subtopics.values()
        for question, answers in group.items()
        if answers
    }
    # One sort of them all: the same order within each subtopic as a sort of its own.
    order = ranked(everyone, partial(seeded_order, seed))
    sizes = {
        name: sum(1 for group in usable[name].values() for answers in group.values() if answers)
        for name in sorted(usable)
    }
    topic_quotas = allocate(eval_size(len(order), settings.pipeline.eval_ratio), sizes, seed)
    shares: dict[tuple[str, str], int] = {}
    for topic_name, quota in topic_quotas.items():
        subtopics = usable[topic_name]
        counts = {name: sum(map(bool, subtopics[name].values())) for name in sorted(subtopics)}
        for subtopic, share in allocate(quota, counts, seed).items():
            shares[topic_name, subtopic] = share
    # The order restricted to a subtopic is its ranking: its first `share` go to eval.
    train: list[_Answer] = []
    evaluation: list[_Answer] = []
    held: list[_Answer] = []
    for first, *others in order:
        group = first.topic, first.subtopic
        if shares[group]:
            shares[group] -= 1
            evaluation.append(first)
            held += others
        else:
            train.append(first)
            train += others
    return train, evaluation, held


T = TypeVar("T")


def ranked(answers: dict[str, T], rank: Callable[[str], int]) -> list[T]:
    """``answers`` by (``rank(id)``, id): sorted by the rank alone, then by both only
    when two ranks tie (XXH3-64 collisions: possible, never seen)."""
    ranks = {answer_id: rank(answer_id) for answer_id in answers}
    ids = sorted(ranks, key=ranks.__getitem__)
    if len(set(ranks.values())) < len(ranks):
        ids.sort(key=lambda answer_id: (ranks[answer_id], answer_id))
    return list(map(answers.__getitem__, ids))


def _content(source: BinaryIO, answer: _Answer) -> str:
    """The text of ``answer``'s last turn: the answer itself, its reasoning aside."""
    raw = os.pread(source.fileno(), answer.length, answer.offset)
    record, _ = loads(raw[:-1] if raw.endswith(b"\n") else raw)
    return str(record["messages"][-1]["content"])


def _select(
    data: DataFiles, source: BinaryIO, usable: Usable, settings: Settings
) -> list[tuple[_Answer, str]]:
    """The answers ``[pipeline] select`` does not keep, with why; taken out of ``usable``.
    ``agree``: of a question's answers, those whose final result is not the majority's
    (``pipeline.agreement``); ``judge``: all but the one the judge prefers
    (``pipeline.preference``; a question not judged yet keeps them all)."""
    unkept: list[tuple[_Answer, str]] = []
    how = settings.pipeline.select
    if how == "all":
        return unkept
    project_dir = data.dir.parent
    pairing = Pairing.of(project_dir, settings) if how == "judge" else None
    known = read_preferences(project_dir) if how == "judge" else {}
    unjudged = 0
    for subtopics in usable.values():
        for group in subtopics.values():
            for question, answers in group.items():
                if len(answers) < 2:
                    continue
                texts = [_content(source, answer) for answer in answers]
                if pairing is None:
                    others, why = _disagreeing(texts)
                else:
                    texts = [strip_reasoning(text) for text in texts]
                    best = preferred(pairing, known, question, texts)
                    if best is None:
                        unjudged += 1
                        continue
                    others = [i for i in range(len(answers)) if i != best]
                    why = [
                        f"not selected: the judge ({pairing.judge.model}) preferred answer "
                        f"{answers[best].id} (pipeline.select = \"judge\")"
                    ] * len(answers)
                unkept += [(answers[index], why[index]) for index in others]
                group[question] = [a for i, a in enumerate(answers) if i not in others]
    if unjudged:
        logger.warning(
            f"split: {unjudged} question(s) with several answers are not judged yet: all "
            "their answers are kept (`overbrainer answers` asks the judge)"
        )
    return unkept


def _disagreeing(texts: list[str]) -> tuple[list[int], list[str]]:
    """The positions of the answers whose result is not the majority's, and why of each."""
    results = [final_result(text) for text in texts]
    found, others = disagreeing(results)
    why = [
        f"not selected: its result {result!r} is not the majority's {found!r} "
        '(pipeline.select = "agree")'
        for result in results
    ]
    return others, why


def _selecting(  # noqa: PLR0917 - the split's state it reads and counts into
    data: DataFiles,
    source: BinaryIO | None,
    usable: Usable,
    settings: Settings,
    counted: set[str],
    result: SplitResult,
) -> list[tuple[_Answer, str]]:
    """:func:`_select`, its counts (of the ``counted`` topics) in ``result``."""
    unkept = _select(data, source, usable, settings) if source is not None else []
    if settings.pipeline.select == "all":
        return unkept
    result.unkept = sum(1 for answer, _ in unkept if answer.topic in counted)
    result.selected = result.unkept + sum(
        len(answers)
        for name, subtopics in usable.items() if name in counted
        for group in subtopics.values() for answers in group.values()
    )  # fmt: skip
    return unkept


def _record_unkept(
    data: DataFiles, source: BinaryIO | None, unkept: list[tuple[_Answer, str]]
) -> None:
    """Each answer not selected in ``rejected.jsonl`` (``kind`` answer, its text) and why
    in ``rejected.reasons.jsonl``, once: a split run again adds only what is new."""
    if not unkept or source is None:
        return
    ids = {answer.id for answer, _ in unkept}

    def scan(name: str) -> Iterator[dict[str, Any]]:
        for line in jsonl.scan_jsonl(data.path(name), f"{DATA_DIR}/{name}", CHECKS[name]):
            if line.record.get("id") in ids and line.record["kind"] == UNKEPT:
                yield line.record

    rejected = {r["id"] for r in scan(REJECTED)}
    reasons = {(r["id"], r["reason"]) for r in scan(REJECTED_REASONS)}
    with data.writer(REJECTED) as rejects, data.writer(REJECTED_REASONS) as why:
        for answer, reason in unkept:
            if answer.id not in rejected:
                text = _content(source, answer)
                rejects.append({"kind": UNKEPT, "id": answer.id, "topic": answer.topic,
                                "question": answer.question, "text": text})  # fmt: skip
            if (answer.id, reason) not in reasons:
                why.append({"id": answer.id, "kind": UNKEPT, "topic": answer.topic,
                            "reason": reason})  # fmt: skip


UNKEPT = "answer"
"""The ``kind`` of a ``rejected.jsonl`` record of an answer ``[pipeline] select`` left out."""


_WRITE_CHUNK = 1 << 20


def with_system(record: dict[str, Any], system: str) -> dict[str, Any]:
    """``record`` whose conversation opens with the system turn ``system``, in place of
    the one it had (``pipeline.system_prompt``)."""
    messages = record["messages"]
    if messages and messages[0].get("role") == "system":
        messages = messages[1:]
    return {**record, "messages": [{"role": "system", "content": system}, *messages]}


def _write(
    data: DataFiles,
    name: str,
    source: BinaryIO,
    answers: list[_Answer],
    system: str | None = None,
) -> None:
    """``name`` rewritten with the lines of ``answers``, read again from answers.jsonl:
    each as ``dumps`` writes its record (through the fast codec, checked to give the
    same bytes); with ``system``, each opening with that system turn."""

    def write(out: BinaryIO) -> None:
        pending: list[bytes] = []
        size = 0
        fd = source.fileno()
        for answer in answers:
            raw = os.pread(fd, answer.length, answer.offset)
            line = raw[:-1] if raw.endswith(b"\n") else raw
            if system is not None:
                record, fast = loads(line)
                line = encode(with_system(record, system), fast)
            elif not answer.verbatim:
                line = encode(*loads(line))
            pending.append(line)
            pending.append(b"\n")
            size += len(line) + 1
            if size >= _WRITE_CHUNK:
                out.write(b"".join(pending))
                pending.clear()
                size = 0
        out.write(b"".join(pending))

    files.write_atomic(data.path(name), write, f"{DATA_DIR}/{name}")
