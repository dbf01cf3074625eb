"""The answers stage's part in logit distillation (``distill = "logits"``, offline).

Each answer is asked with ``top_logprobs = training.kd.top_k``; its reply's logprobs get the
child's token ids and go to ``data/logprobs.bin`` before the answer's line goes to
answers.jsonl. The protocol names a token by its text and bytes: an id is the one token of
the child's vocabulary that spells those bytes (or the id the server gave: llama.cpp's
``id``, vLLM's ``token_id:N``). An answer whose tokens cannot all be named so, or whose
logprobs do not spell it, is excluded as ``no_logprobs``: training on it would teach the
child another model's distribution.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy

from overbrainer.config.model import Settings
from overbrainer.errors import UserError
from overbrainer.pipeline.logits_file import LOGPROBS, AnswerLogits, LogitsFile
from overbrainer.pipeline.records import Answer
from overbrainer.pipeline.vocab import AMBIGUOUS, Vocabulary, load_vocabulary
from overbrainer.providers.completion import Completion
from overbrainer.providers.logprobs import Candidate, Position

NO_LOGPROBS = "no_logprobs"


class Unnamed(Exception):
    """A token of the reply that no single id of the child's vocabulary names."""


@dataclass(frozen=True)
class LogitKeeper:
    """Asks each answer's top-k and keeps them, with ids of ``vocab``, in ``file``."""

    top_k: int
    vocab: Vocabulary
    file: LogitsFile

    def keep(self, record: Answer, completion: Completion) -> None:
        """Write ``completion``'s logprobs for the answer ``record``, or mark the answer
        excluded (``no_logprobs``, with ``meta.logprobs_problem`` saying why)."""
        meta = record["meta"]
        if meta.get("excluded") is not None:
            return  # never trained on: its logprobs are of no use
        try:
            found = named(self.vocab, self.top_k, record["id"], completion)
        except Unnamed as problem:
            meta["excluded"] = NO_LOGPROBS
            meta["logprobs_problem"] = str(problem)
            return
        self.file.append(found)


def named(vocab: Vocabulary, top_k: int, answer_id: str, completion: Completion) -> AnswerLogits:
    """The reply's positions as ids of the child's ``vocab``, ``top_k`` a token; raises
    ``Unnamed`` when a token has no single id there or the tokens do not spell the reply."""
    positions = completion.logprobs
    if not positions:
        raise Unnamed("the reply carried no logprobs")
    n = len(positions)
    chosen = numpy.zeros(n, numpy.uint32)
    ids = numpy.zeros((n, top_k), numpy.uint32)
    logprobs = numpy.full((n, top_k), -numpy.inf, numpy.float32)
    for row, position in enumerate(positions):
        try:
            chosen[row] = _id(vocab, position.chosen)
        except Unnamed as problem:
            raise Unnamed(f"token {row + 1} of the reply: {problem}") from None
        found: list[int] = []
        for candidate in position.top:
            # A candidate that cannot be named is left out (its share of the top-k is
            # lost, not given to another token); the same token twice counts once.
            try:
                token = _id(vocab, candidate)
            except Unnamed:
                continue
            if token not in found:
                logprobs[row, len(found)] = candidate.logprob
                found.append(token)
            if len(found) == top_k:
                break
        ids[row, : len(found)] = found
    _check_spelling(positions, completion)
    return AnswerLogits(answer_id, vocab.fingerprint, chosen, ids, logprobs)


def _id(vocab: Vocabulary, candidate: Candidate) -> int:
    if candidate.id is not None:
        if candidate.id >= vocab.size:
            raise Unnamed(
                f"the token id {candidate.id} is past the {vocab.size} of {vocab.source}"
            )
        return candidate.id
    if candidate.raw is None and (not candidate.text or "\ufffd" in candidate.text):
        raise Unnamed(
            f"the server gave it as {candidate.text!r}, without its bytes or id (a part of a "
            "character, or a control token): it cannot be named. A server that gives bytes "
            "or ids (vLLM, SGLang) can"
        )
    raw = candidate.raw if candidate.raw is not None else candidate.text.encode()
    found = vocab.by_bytes.get(raw)
    if found is None or found == AMBIGUOUS:
        how = "no" if found is None else "more than one"
        raise Unnamed(f"the token {candidate.text!r} is {how} token of {vocab.source}")
    return found


def _spelled(positions: tuple[Position, ...]) -> str:
    chosen = (p.chosen for p in positions)
    return b"".join(c.raw if c.raw is not None else c.text.encode() for c in chosen).decode(
        "utf-8", "replace"
    )


def _check_spelling(positions: tuple[Position, ...], completion: Completion) -> None:
    # The logprobs cover every token the parent wrote: its reasoning too when the server
    # sends it apart (vLLM's reasoning parser), its <think> block when inline.
    if completion.content.strip() not in _spelled(positions):
        raise Unnamed("the logprobs' tokens do not spell the answer")


def keeper(settings: Settings, data_dir: Path, shown_dir: str) -> LogitKeeper | None:
    """The keeper of a project that distills logits offline, None for one that distills
    text or asks the parent during training (online); raises ``UserError`` when the child's
    tokenizer is not on this machine."""
    training = settings.training
    if training is None or not training.kd_offline:
        return None
    vocab = load_vocabulary(training.base_model, "training.base_model")
    if not vocab.tokens:
        raise UserError(f"{vocab.source}: its tokenizer.json holds no vocabulary")
    file = LogitsFile(data_dir / LOGPROBS, f"{shown_dir}/{LOGPROBS}")
    return LogitKeeper(training.kd.top_k, vocab, file)
