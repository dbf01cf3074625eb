"""A run's KD dataset: each example of train.jsonl and eval.jsonl with the parent's top-k
of its answer, read from ``data/logprobs.bin`` by the example's answer id (issue 41).

Each example gets ``logprobs`` and ``target_token_ids`` (one row of ``top_k`` a token the
parent wrote, most likely first) and ``kd_chosen`` (the tokens it wrote). Axolotl lines
the rows up with the END of the example's tokens, and the rows after the answer (the chat
template's end of turn) depend on the child's tokenizer: the job's ``kd-align`` stage
(:mod:`overbrainer.job.target.overbrainer_kd`) checks the answer's tokens and adds them on the
target, where the tokenizer is.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy

from overbrainer.errors import UserError
from overbrainer.lines import read_lines
from overbrainer.pipeline.logits_file import LOGPROBS, AnswerLogits, Entry, LogitsFile

ABSENT_LOGPROB = -50.0
"""A candidate the server did not give (fewer than ``top_k``): Axolotl's loss multiplies
each teacher probability by its log, so -inf would make it NaN; e**-50 counts for nothing."""


def kd_rows(record: AnswerLogits) -> dict[str, Any]:
    """The fields an example of Axolotl's KD dataset carries for ``record``."""
    logprobs = numpy.where(numpy.isfinite(record.logprobs), record.logprobs, ABSENT_LOGPROB)
    return {
        "logprobs": logprobs.astype(float).tolist(),
        "target_token_ids": record.ids.astype(int).tolist(),
        "kd_chosen": record.chosen.astype(int).tolist(),
    }


def _examples(
    source: Path, index: dict[str, Entry], shown: str
) -> Iterator[tuple[dict[str, Any], Entry]]:
    """Each example of ``source`` and where its answer's logprobs are, or raise naming it."""
    with source.open("rb") as file:
        for number, line in enumerate(read_lines(file, shown), start=1):
            if not line.strip():
                continue
            example = json.loads(line)
            answer_id = example.get("id")
            entry = index.get(answer_id) if isinstance(answer_id, str) else None
            if entry is None:
                what = f"its answer {answer_id!r}" if answer_id else "an example without an id"
                raise UserError(
                    f"{shown} line {number}: no logprobs of the parent for {what} "
                    f"in data/{LOGPROBS}: run `overbrainer split` again (it keeps only answers "
                    "with logprobs), or `overbrainer answers --force` to ask for them"
                )
            yield example, entry


def check_kd_files(data: Path, names: Iterable[str]) -> None:
    """Raise unless every example of the files ``names`` of ``data`` has its logprobs."""
    index = LogitsFile(data / LOGPROBS, f"data/{LOGPROBS}").index()
    for name in names:
        if (data / name).is_file():
            for _ in _examples(data / name, index, f"data/{name}"):
                pass


def write_kd_file(source: Path, dest: Path, store: LogitsFile, shown: str) -> None:
    """Copy the examples of ``source`` (shown as ``shown``) into ``dest`` with their rows.

    Raises:
        UserError: an example has no answer id, or its answer has no logprobs (naming the
            example's line and what to do).
    """
    lines = []
    for example, entry in _examples(source, store.index(), shown):
        kd_example = example | kd_rows(store.read(entry))
        lines.append(json.dumps(kd_example, ensure_ascii=False) + "\n")
    dest.write_text("".join(lines), encoding="utf-8")


def rows_digest(data: Path, logits: Path) -> str:
    """A digest of the rows the examples of ``data``'s train and eval files take from
    ``logits``: what a run's fingerprint counts of the parent's logprobs."""
    store = LogitsFile(logits, f"data/{logits.name}")
    index = store.index()
    digest = hashlib.sha256()
    for name in ("train.jsonl", "eval.jsonl"):
        if not (data / name).is_file():
            continue
        for example, entry in _examples(data / name, index, f"data/{name}"):
            record = store.read(entry)
            digest.update(f"{example['id']}\0".encode())
            for array in (record.chosen, record.ids, record.logprobs):
                digest.update(numpy.ascontiguousarray(array).tobytes())
    return digest.hexdigest()
