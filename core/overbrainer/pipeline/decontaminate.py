"""Decontamination: a train example that shares a run of ``n`` words with an eval item's
question is no fair training example (the child would be tested on what it was shown).

Texts are compared as words: casefolded, then cut into runs of letters, digits and ``_``
(Unicode ``\\w``); anything else, punctuation and whitespace alike, only separates words.
Every ``n``-gram of every eval item goes into one dict by its hash, so a train text costs
one lookup per word, never a comparison with each eval item. An item shorter than ``n``
words (most hand-written questions) is matched whole instead: see :data:`MIN_WORDS`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from loguru import logger

from overbrainer import files
from overbrainer.errors import UserError
from overbrainer.redact import escape_controls

_WORD = re.compile(r"\w+")
_ASCII_SEPARATORS = str.maketrans({chr(c): " " for c in range(128) if not _WORD.match(chr(c))})
"""What is no word character in ASCII, made a space: ``split`` then gives ``_WORD``'s
words, four times faster than the regular expression (most of the CPU of a split)."""


def words(text: str) -> list[str]:
    """``text``'s words, casefolded: punctuation, case and spacing never hide an overlap."""
    folded = text.casefold()
    if folded.isascii():
        return folded.translate(_ASCII_SEPARATORS).split()
    return _WORD.findall(folded)


def grams(text_words: list[str], n: int) -> Iterator[tuple[str, ...]]:
    """The ``n``-grams of ``text_words``, in order (none when it has fewer words)."""
    return zip(*[text_words[start:] for start in range(n)], strict=False)


MIN_WORDS = 5
"""The fewest words an eval item shorter than ``n`` words must have to be matched whole (its
words in a row anywhere in a train text drop it). Five is the shortest question that is
its own ("What is 15% of 240?"); four words or fewer ("What is 2 + 2?", "what is the
difference") recur in innocent text often enough that matching them would drop clean
examples, so such items are not checked (and ``split`` says how many)."""

EVAL_FILES = "[eval] files"
"""The setting of the user's held-out sets, as messages name it."""

SPLIT_SET = "split"
"""The eval split's name as an eval set (``compare --eval split``): no file may take it."""


@dataclass(frozen=True)
class EvalItem:
    """A text no train example may share an ``n``-gram with, and where it is from (said in
    the reason: ``eval item ID`` or ``FILE:LINE``)."""

    where: str
    text: str
    answer: str | None = None
    """The reference answer the file gives, if any (``[eval] files``: the judge may use it)."""


@dataclass(frozen=True)
class Contamination:
    """Why a train example is dropped: the eval item it overlaps and the words shared."""

    item: EvalItem
    ngram: str
    whole: bool = False
    """The item is shorter than ``n`` words and the train text holds all of it."""

    def reason(self, n: int) -> str:
        """The reason recorded in ``rejected.reasons.jsonl``."""
        if self.whole:
            return f"contaminated: holds the whole of {self.item.where}, {self.ngram!r}"
        return f"contaminated: shares the {n}-gram {self.ngram!r} with {self.item.where}"


class Index:
    """The ``n``-grams of ``items`` by hash; a hash names the first item holding it, so the
    item a reason names does not depend on anything but the items' order. An item of
    :data:`MIN_WORDS` to ``n - 1`` words is held by the hash of its first ``MIN_WORDS``
    words: one more lookup per train word, and only when there are such items (never one
    pass per length). ``unchecked`` lists the items too short for either, by place."""

    def __init__(self, items: Sequence[EvalItem], n: int) -> None:
        self.n = n
        self._items = items
        self._first: dict[int, int] = {}
        self._short: dict[int, list[tuple[int, tuple[str, ...]]]] = {}
        self.unchecked: list[int] = []
        setdefault = self._first.setdefault
        for index, item in enumerate(items):
            item_words = words(item.text)
            if len(item_words) >= n:
                for key in map(hash, grams(item_words, n)):
                    setdefault(key, index)
            elif len(item_words) >= MIN_WORDS:
                whole = tuple(item_words)
                held = self._short.setdefault(hash(whole[:MIN_WORDS]), [])
                if all(other != whole for _, other in held):  # the first item names it
                    held.append((index, whole))
            else:
                self.unchecked.append(index)

    def __bool__(self) -> bool:
        return bool(self._first) or bool(self._short)

    def match(self, texts: Iterable[str]) -> Contamination | None:
        """The first overlap of ``texts`` (an example's turns, in order, read as one text:
        a run of words across two turns counts too) with an eval item, or None."""
        text_words = words("\n".join(texts))
        return self._shared(text_words) or self._whole(text_words)

    def _shared(self, text_words: list[str]) -> Contamination | None:
        n = self.n
        if self._first.keys().isdisjoint(map(hash, grams(text_words, n))):
            return None  # the common case, tested without leaving C
        for gram in grams(text_words, n):
            index = self._first.get(hash(gram))
            if index is not None:
                item = self._items[index]
                if gram in set(grams(words(item.text), n)):  # not a hash collision
                    return Contamination(item, " ".join(gram))
        return None

    def _whole(self, text_words: list[str]) -> Contamination | None:
        """The first short item ``text_words`` hold all of: found by its first words' hash,
        then its words compared."""
        if not self._short or self._short.keys().isdisjoint(
            map(hash, grams(text_words, MIN_WORDS))
        ):
            return None
        for start, gram in enumerate(grams(text_words, MIN_WORDS)):
            for index, whole in self._short.get(hash(gram), ()):
                if tuple(text_words[start : start + len(whole)]) == whole:
                    return Contamination(self._items[index], " ".join(whole), whole=True)
        return None


def load_files(
    project_dir: Path, patterns: Sequence[str], setting: str = "[split] decontaminate"
) -> list[EvalItem]:
    """The questions of the JSONL files ``patterns`` (globs relative to the project) match,
    in the patterns' order, then by path; a line that is not ``{"question": ...}`` (with an
    optional ``"answer"``) is an error naming its file and line. ``setting`` is where the
    patterns are from, as a warning or an error names it."""
    items: list[EvalItem] = []
    for path, shown in matched_files(project_dir, patterns, setting):
        items.extend(read_items(path, shown))
    return items


def matched_files(
    project_dir: Path, patterns: Sequence[str], setting: str
) -> list[tuple[Path, str]]:
    """Each file ``patterns`` match, once, with its path as shown (relative to the
    project); a pattern matching nothing is a warning, a file reached through a link out
    of the project an error."""
    found: list[tuple[Path, str]] = []
    seen: set[Path] = set()
    for pattern in patterns:
        paths = sorted(path for path in project_dir.glob(pattern) if path not in seen)
        if not paths:
            logger.warning(f"{setting}: {pattern!r} matches no file")
        for path in paths:
            seen.add(path)
            shown = path.relative_to(project_dir).as_posix()
            files.own_path(path, project_dir, f"{setting} file {shown}")
            found.append((path, shown))
    return found


def named_files(
    project_dir: Path, patterns: Sequence[str], setting: str
) -> list[tuple[str, Path, str]]:
    """:func:`matched_files` with each file's set name (its stem, as ``compare`` names it);
    two files of one name, or one named ``split`` (the eval split's), are an error, told
    the same by ``split``, ``config check`` and ``compare``."""
    named: dict[str, str] = {}
    found: list[tuple[str, Path, str]] = []
    for path, shown in matched_files(project_dir, patterns, setting):
        name = path.stem
        if name == SPLIT_SET:
            raise UserError(
                f"{setting}: {shown}: a set cannot be named `{SPLIT_SET}`, the eval split's "
                f"name (`compare --eval {SPLIT_SET}`): rename the file"
            )
        if name in named:
            raise UserError(
                f"{setting}: {named[name]} and {shown} are both the set `{name}` (a set "
                "is named by its file's name): rename one"
            )
        named[name] = shown
        found.append((name, path, shown))
    return found


def read_items(path: Path, shown: str) -> Iterator[EvalItem]:
    """The items of one JSONL file, ``where`` its ``FILE:LINE``."""
    data = files.read_regular(path, shown)
    if data is None:
        return
    for number, line in enumerate(data.split(b"\n"), 1):
        if not line.strip():
            continue
        where = f"{shown}:{number}"
        try:
            record = json.loads(line)
        except (ValueError, UnicodeDecodeError) as error:
            raise UserError(f"{where}: not a JSON line ({escape_controls(str(error))})") from None
        if not isinstance(record, dict) or not isinstance(record.get("question"), str):
            raise UserError(f'{where}: not {{"question": "...", "answer": "..."}} (the '
                            "question a string, the answer optional)")
        answer = record.get("answer")
        if answer is not None and not isinstance(answer, str):
            raise UserError(f"{where}: its answer is not a string")
        yield EvalItem(where, record["question"], answer)
