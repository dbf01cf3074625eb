"""``kd-align`` lines an answer the parent split otherwise up on its tokens' BYTES, with the
child's tokenizer's own pieces (tokenizer.json files as a SentencePiece-style and a
byte-level child ship) and its family's byte map: digits after a space, an emoji split into
bytes, a parent answer cut inside a character, a long answer in one walk, and every line
of the rewritten file keeping the same keys (HF datasets takes its columns from the first)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy
import pytest
from tests.helpers.kd_data import write_tokenizer

from overbrainer.job.target.overbrainer_kd import (
    ABSENT_LOGPROB,
    KDAlignmentError,
    Spell,
    align,
    align_file,
    anchored_spell,
    family,
    pieces_spell,
)
from overbrainer.pipeline.logits_file import AnswerLogits
from overbrainer.train import kd_data

TOP_K = 3
SPECIALS = ("<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>")
EMOJI = "\U0001f642"  # 🙂: four UTF-8 bytes


class Child:
    """A child's tokenizer read from its tokenizer.json: ``pieces`` is what transformers'
    ``convert_ids_to_tokens`` gives, ``encode`` splits a text one piece a character (a
    character out of the vocabulary: its bytes, as byte fallback / byte-level do)."""

    def __init__(self, directory: Path, extra: list[str], byte_level: bool) -> None:
        path = write_tokenizer(directory, specials=SPECIALS, byte_level=byte_level)
        document = json.loads((path / "tokenizer.json").read_text())
        vocab: dict[str, int] = document["model"]["vocab"]
        self.byte_level = byte_level
        self.alphabet = byte_alphabet() if byte_level else {}
        for piece in [*self.alphabet.values(), *map(self.spelt, extra)]:
            vocab.setdefault(piece, len(SPECIALS) + len(vocab))
        self.ids = vocab | {t["content"]: t["id"] for t in document["added_tokens"]}
        self.by_id = {n: piece for piece, n in self.ids.items()}
        self.decoder = document["decoder"]

    def pieces(self, ids: list[int]) -> list[str]:
        return [self.by_id[n] for n in ids]

    def spelt(self, text: str) -> str:
        """``text`` as this tokenizer spells a piece."""
        if self.byte_level:
            return "".join(self.alphabet[b] for b in text.encode())
        return text.replace(" ", "\u2581")

    def piece(self, text: str) -> int:
        """The id of ``text`` as one piece."""
        return self.ids[self.spelt(text)]

    def encode(self, text: str) -> list[int]:
        ids = []
        for c in text:
            if self.byte_level:
                ids += [self.ids[self.alphabet[b]] for b in c.encode()]
            elif c.isascii() and c.replace(" ", "\u2581") in self.ids:
                ids.append(self.ids[c.replace(" ", "\u2581")])
            else:
                ids += [self.ids[f"<0x{b:02X}>"] for b in c.encode()]
        return ids

    def render(self, messages: list[dict[str, Any]], opened: bool) -> list[int]:
        """ChatML, as a child's chat template renders it."""
        ids: list[int] = []
        for message in messages:
            ids += [self.ids["<|im_start|>"], *self.encode(message["role"] + "\n")]
            ids += [*self.encode(message["content"]), self.ids["<|im_end|>"], *self.encode("\n")]
        if opened:
            ids += [self.ids["<|im_start|>"], *self.encode("assistant\n")]
        return ids

    def spell(self) -> Spell:
        kind = family(self.decoder)
        assert kind is not None
        return pieces_spell(self.pieces, kind)


def byte_alphabet() -> dict[int, str]:
    """GPT-2's bytes_to_unicode (written out here, not taken from the code under test)."""
    kept = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1)]
    kept += range(ord("®"), ord("ÿ") + 1)
    table = {b: chr(b) for b in kept}
    shifted = [b for b in range(256) if b not in table]
    table |= {b: chr(256 + n) for n, b in enumerate(shifted)}
    return table


@pytest.fixture(params=[False, True], ids=["sentencepiece", "byte-level"])
def child(request, tmp_path) -> Child:
    return Child(tmp_path / "child", [" 96", EMOJI], byte_level=request.param)


def example(child: Child, answer: str, chosen: list[int], answer_id: str = "a1") -> dict:
    """An example of Axolotl's KD dataset as `train` writes it: the parent's rows, its
    first candidate the chosen token."""
    n = len(chosen)
    ids = numpy.zeros((n, TOP_K), numpy.uint32)
    ids[:, 0] = chosen
    ids[:, 1:] = [1, 2]
    logprobs = numpy.full((n, TOP_K), -1.5, numpy.float32)
    logprobs[:, 0] = -0.1 * numpy.arange(1, n + 1)  # a row of its own for each token
    record = AnswerLogits(answer_id, "vocab", numpy.array(chosen, numpy.uint32), ids, logprobs)
    messages = [{"role": "user", "content": "Hi?"}, {"role": "assistant", "content": answer}]
    return {"id": answer_id, "messages": messages, **kd_data.kd_rows(record)}


def sure(row: list[float]) -> bool:
    return row == [0.0] + [ABSENT_LOGPROB] * (TOP_K - 1)


def test_the_tokenizer_families_byte_maps_come_from_their_decoders(child):
    assert family(child.decoder) == ("byte-level" if child.byte_level else "sentencepiece")
    metaspace = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first"}
    assert family(metaspace) == "metaspace"  # Llama-2, Mistral, TinyLlama: a space first
    assert family(metaspace | {"prepend_scheme": "never"}) == "sentencepiece"
    quickstart = {"type": "Sequence", "decoders": [  # examples/quickstart/tiny_model.py's
        {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"}]}  # fmt: skip
    assert family(quickstart) == "sentencepiece"
    assert family({"type": "WordPiece", "prefix": "##"}) is None
    spell = child.spell()
    assert spell([child.piece(" 96"), *child.encode(EMOJI)]) == [b" 96", *[
        bytes([b]) for b in EMOJI.encode()]]  # fmt: skip


def test_a_space_and_digits_the_parent_wrote_as_one_token_get_its_row_on_the_space(child):
    # The parent's sampler wrote " 96" as one token, the child's tokenizer has " ", "9",
    # "6": the child's space starts where the parent's " 96" did (its row), "9" and "6"
    # start inside it (their own tokens for sure); "." starts where the parent's did.
    chosen = [*child.encode("It is"), child.piece(" 96"), *child.encode(".")]
    parent = example(child, "It is 96.", chosen)
    aligned, learnt = align(parent, child.render, "data/train.jsonl line 1", child.spell())
    assert learnt == 2
    rows, logprobs = aligned["target_token_ids"], aligned["logprobs"]
    assert rows[:5] == parent["target_token_ids"][:5]
    assert rows[5] == parent["target_token_ids"][5] and logprobs[5] == parent["logprobs"][5]
    assert [row[0] for row in rows[6:8]] == child.encode("96")
    assert sure(logprobs[6]) and sure(logprobs[7])
    assert rows[8] == parent["target_token_ids"][6]
    assert aligned["kd_chosen"] == child.encode("It is 96.")
    # a resumed run aligns its copies again: the same rows, nothing realigned
    assert align(aligned, child.render, "x", child.spell()) == (aligned, None)


def test_a_space_a_metaspace_tokenizer_puts_before_the_answer_is_not_its_text(tmp_path):
    # Metaspace (prepend_scheme "first" / "always") puts a space before a text, its decoder
    # drops it: the parent's first token "▁It" against the child's "I", "t" is the same
    # answer; a tokenizer without that rule (byte-level's "Ġ") refuses it as another text.
    child = Child(tmp_path / "child", [" It", " 96"], byte_level=False)
    chosen = [child.piece(" It"), *child.encode(" is 96.")]
    parent = example(child, "It is 96.", chosen)
    aligned, learnt = align(parent, child.render, "x", child.spell(), first_space=True)
    assert learnt == 1  # the child's "t", inside the parent's "▁It"
    assert aligned["target_token_ids"][0] == parent["target_token_ids"][0]
    with pytest.raises(KDAlignmentError, match="parts from the parent's at character 0"):
        align(parent, child.render, "x", child.spell())


def test_an_emoji_one_token_on_one_side_and_bytes_on_the_other_lines_up_on_its_bytes(child):
    spell = child.spell()
    # the parent wrote the emoji as one token, the child spells its four bytes
    chosen = [*child.encode("ok "), child.piece(EMOJI), *child.encode("!")]
    parent = example(child, f"ok {EMOJI}!", chosen)
    aligned, learnt = align(parent, child.render, "data/train.jsonl line 1", spell)
    rows, logprobs = aligned["target_token_ids"], aligned["logprobs"]
    assert learnt == 3  # the emoji's last three bytes start inside the parent's token
    assert rows[3] == parent["target_token_ids"][3]
    assert all(sure(row) for row in logprobs[4:7])
    assert rows[7] == parent["target_token_ids"][4]
    # the other way: the parent's four byte tokens, the child's one emoji token
    chosen = child.encode(f"ok {EMOJI}!")  # its encode spells the emoji's bytes
    parent = example(child, f"ok {EMOJI}!", chosen)
    spelt_whole = [*child.encode("ok "), child.piece(EMOJI), *child.encode("!")]

    def whole(messages: list[dict[str, Any]], opened: bool) -> list[int]:
        ids = child.render(messages, opened)
        return ids if opened else [*ids[: -len(chosen) - 2], *spelt_whole, *ids[-2:]]

    aligned, learnt = align(parent, whole, "data/train.jsonl line 1", spell)
    assert learnt == 0
    rows = aligned["target_token_ids"]
    assert rows[:5] == [*parent["target_token_ids"][:4], parent["target_token_ids"][7]]


def test_a_parent_answer_cut_inside_a_character_is_refused(child):
    chosen = child.encode(f"ok {EMOJI}")[:-2]  # the emoji's first two bytes only
    parent = example(child, f"ok {EMOJI}", chosen)
    with pytest.raises(KDAlignmentError) as raised:
        align(parent, child.render, "data/train.jsonl line 7", child.spell())
    assert str(raised.value) == (
        "data/train.jsonl line 7 (example a1): the parent's answer is not whole UTF-8 text "
        "at byte 3 of 5 (its tokens end or break inside a character)"
    )


def test_another_text_is_refused_saying_where_the_texts_part(child):
    chosen = child.encode("The answer is 96, as said.")
    parent = example(child, "The answer is 97, as the question said it would be.", chosen)
    with pytest.raises(KDAlignmentError) as raised:
        align(parent, child.render, "data/eval.jsonl line 3", child.spell())
    assert str(raised.value) == (
        "data/eval.jsonl line 3 (example a1): the answer's text parts from the parent's at "
        "character 15 (byte 15): the child's tokenizer spells '7, as the question s'..., "
        "the parent's tokens '6, as said.' (another tokenizer, or the text changed since)"
    )


def test_an_empty_turn_is_refused_with_a_clear_error_not_a_traceback(child):
    parent = example(child, "", [])
    parent["target_token_ids"], parent["logprobs"] = [[1, 2, 3]], [[0.0, -1.0, -2.0]]

    def nothing_after(messages: list[dict[str, Any]], opened: bool) -> list[int]:
        return child.render(messages[:1], True)

    with pytest.raises(KDAlignmentError) as raised:
        align(parent, nothing_after, "data/train.jsonl line 2", child.spell())
    assert str(raised.value) == (
        "data/train.jsonl line 2 (example a1): the chat template renders nothing after the "
        "prompt (an empty answer and no end of turn), so there is no token to teach"
    )


def test_a_long_answer_is_spelt_once_per_token_on_each_side(child):
    looked_up: list[int] = []

    def pieces(ids: list[int]) -> list[str]:
        looked_up.append(len(ids))
        return child.pieces(ids)

    kind = family(child.decoder)
    assert kind is not None
    for words in (500, 2000):
        looked_up.clear()
        text = " ".join(["It is 96."] * words)
        chosen = []
        for part in text.split(" 96"):
            chosen += [*child.encode(part), child.piece(" 96")]
        chosen = chosen[:-1]
        _, learnt = align(
            example(child, text, chosen), child.render, "x", pieces_spell(pieces, kind)
        )
        assert learnt == 2 * words
        assert sum(looked_up) == len(chosen) + len(child.encode(text)) + 2  # and the end of turn


def test_a_tokenizer_of_unknown_family_is_spelt_after_an_anchor_once_per_token():
    # A Metaspace-like decoder drops the first token's space: decoding " 9" alone says "9";
    # after an anchor it keeps its space.
    pieces = {1: "x", 2: "\u2581", 3: "9", 4: "\u25819"}
    calls: list[list[int]] = []

    def decode(ids: list[int]) -> str:
        calls.append(ids)
        return "".join(pieces[n] for n in ids).replace("\u2581", " ").removeprefix(" ")

    spell = anchored_spell(decode, 1)
    assert spell([2, 3, 4, 4, 3, 2] * 100) == [b" ", b"9", b" 9", b" 9", b"9", b" "] * 100
    assert len(calls) == 4  # the anchor, then each distinct token once


def test_every_line_keeps_the_same_keys_when_a_late_answer_is_realigned(child, tmp_path):
    data = tmp_path / "train.jsonl"
    lines = [example(child, "ok.", child.encode("ok."), f"a{n}") for n in range(150)]
    late = [*child.encode("It is"), child.piece(" 96"), *child.encode(".")]
    lines.append(example(child, "It is 96.", late, "late"))
    lines[3]["kd_text_only"] = 2  # a line an earlier kd-align realigned
    data.write_text("".join(json.dumps(line) + "\n" for line in lines))
    said = align_file(str(data), child.render, child.spell())
    assert said == (
        f"kd-align: {data}: 151 examples line up with the child's tokens (1 that the parent "
        "split otherwise lined up on their text, 2 tokens learnt from the text alone)"
    )
    written = [json.loads(line) for line in data.read_text().splitlines()]
    assert {tuple(sorted(line)) for line in written} == {tuple(sorted(written[0]))}
    # and again, as a resumed run does: the same file, nothing left to realign
    before = data.read_text()
    assert align_file(str(data), child.render, child.spell()) == (
        f"kd-align: {data}: 151 examples line up with the child's tokens"
    )
    assert data.read_text() == before
