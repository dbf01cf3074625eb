"""The pieces of logit distillation: a vocabulary's bytes, the protocol's logprobs, and
data/logprobs.bin's records (exact ids, logprobs to a 32nd of a nat, compact)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy
import pytest
from tests.helpers.kd_data import write_tokenizer

from overbrainer.errors import UserError
from overbrainer.pipeline.logits import Unnamed, named
from overbrainer.pipeline.logits_file import AnswerLogits, decode, encode
from overbrainer.pipeline.vocab import AMBIGUOUS, load_vocabulary, parse_tokenizer
from overbrainer.providers.completion import Completion
from overbrainer.providers.logprobs import parse_positions


def _vocab(tmp_path: Path, **options):
    return load_vocabulary(str(write_tokenizer(tmp_path / "tok", **options)), "base")


def test_byte_level_tokens_spell_their_bytes(tmp_path):
    vocab = _vocab(tmp_path, byte_level=True)
    assert vocab.by_bytes[b" "] == vocab.tokens["\u0120"]
    assert vocab.by_bytes[b"a"] == vocab.tokens["a"]
    assert vocab.by_bytes[b"</s>"] == 2  # a special token by its text


def test_a_sentencepiece_byte_token_yields_to_a_normal_one(tmp_path):
    vocab = _vocab(tmp_path)
    assert vocab.by_bytes[b"A"] == vocab.tokens["A"]  # not <0x41>
    assert vocab.by_bytes[b"\xc3"] == vocab.tokens["<0xC3>"]  # no other token spells it
    assert vocab.by_bytes[b" "] == vocab.tokens["\u2581"]


def test_two_tokens_spelling_the_same_bytes_are_ambiguous():
    document = {"model": {"type": "BPE", "vocab": {"\u2581a": 0, " a": 1}}, "added_tokens": []}
    vocab = parse_tokenizer(json.dumps(document).encode(), "x")
    assert vocab.by_bytes[b" a"] == AMBIGUOUS


def test_differences_name_moved_tokens_and_specials(tmp_path):
    child = _vocab(tmp_path)
    other = load_vocabulary(
        str(write_tokenizer(tmp_path / "o", drop="Q", specials=("<pad>", "<s>", "</s>"))), "p"
    )
    found = other.differences(child)
    assert found[0].endswith("tokens have another id or none in the other (351 tokens, 1 not "
                             "in this one)")
    assert found[1] == "special tokens differ (0: '<pad>' vs '<unk>')"
    assert child.differences(_vocab(tmp_path / "same")) == []


def test_an_unreadable_tokenizer_is_named(tmp_path):
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "tokenizer.json").write_text("{}")
    with pytest.raises(UserError, match=r"^training.base_model \(.*bad\) is not a tokenizer"):
        load_vocabulary(str(tmp_path / "bad"), "training.base_model")


def test_the_servers_ids_are_taken_as_they_are(tmp_path):
    vocab = _vocab(tmp_path)
    wire = {"content": [
        {"token": "token_id:70", "logprob": -0.5, "top_logprobs": [
            {"token": "token_id:70", "logprob": -0.5}, {"token": "token_id:71", "logprob": -1}]},
        {"token": "b", "id": 71, "logprob": -0.1, "top_logprobs": [
            {"token": "b", "id": 71, "logprob": -0.1}]},
    ]}
    positions = parse_positions(wire)
    assert positions is not None
    assert [p.chosen.id for p in positions] == [70, 71]
    found = named(vocab, 2, "a", _completion(positions, ""))
    assert found.chosen.tolist() == [70, 71]
    assert found.ids.tolist() == [[70, 71], [71, 0]]
    assert numpy.isneginf(found.logprobs[1, 1])


def test_an_id_past_the_vocabulary_is_refused(tmp_path):
    vocab = _vocab(tmp_path)
    positions = parse_positions({"content": [
        {"token": "token_id:99999", "logprob": -0.5, "top_logprobs": []}]})
    assert positions is not None
    with pytest.raises(Unnamed, match=r"token 1 of the reply: the token id 99999 is past the"):
        named(vocab, 2, "a", _completion(positions, ""))


def _completion(positions, content: str) -> Completion:
    return Completion(content, None, "none", "stop", 1, 1, logprobs=positions)


def _record(n: int, k: int, vocabulary: int, rng) -> AnswerLogits:
    ids = numpy.minimum(rng.zipf(1.2, (n, k)), vocabulary - 1).astype(numpy.uint32)
    logprobs = numpy.sort(-rng.exponential(3, (n, k)), axis=1)[:, ::-1].astype(numpy.float32)
    logprobs[0, k // 2 :] = -numpy.inf  # a place with fewer candidates
    return AnswerLogits("q1", "v", ids[:, 0].copy(), ids, logprobs)


def test_a_record_keeps_ids_exactly_and_logprobs_to_a_32nd_of_a_nat():
    record = _record(300, 20, 151_936, numpy.random.default_rng(1))
    data = encode(record)
    header_len = int.from_bytes(data[8:12], "little")
    back = decode(data[20 : 20 + header_len], data[20 + header_len :])
    assert (back.ids[1:] == record.ids[1:]).all() and (back.chosen == record.chosen).all()
    present = numpy.isfinite(record.logprobs)
    assert (numpy.isfinite(back.logprobs) == present).all()
    deep = record.logprobs > -15.8
    assert numpy.abs(back.logprobs[deep] - record.logprobs[deep]).max() <= 1 / 32


def test_a_2000_token_answer_at_k_20_costs_well_under_100_kb(capsys):
    record = _record(2000, 20, 151_936, numpy.random.default_rng(2))
    size = len(encode(record))
    with capsys.disabled():
        print(f"\nlogprobs.bin: {size / 2000:.1f} bytes a token at k = 20 (Zipf-like ids)")
    assert size < 90_000
