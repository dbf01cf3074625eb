"""Ids, list replies and near-duplicates."""

from __future__ import annotations

import asyncio

import pytest

from overbrainer.pipeline.dedup import Deduplicator, bigrams, jaccard
from overbrainer.pipeline.ids import normalize, question_id, seeded_order, subtopic_id
from overbrainer.pipeline.listreply import parse_list


def test_the_pinned_subtopic_id():
    assert subtopic_id("ownership", "borrowing") == "d410fa975affdd150daf206922cfd8cc"


def test_ids_ignore_case_and_spacing():
    assert subtopic_id("ownership", "  Borrowing\t") == subtopic_id("ownership", "borrowing")
    assert normalize("What\x00 is\n\n  THIS?") == "what is this?"
    sid = subtopic_id("ownership", "borrowing")
    assert question_id(sid, "Why A?") == question_id(sid, "why  a?")
    assert len(question_id(sid, "x")) == 32


def test_seeded_order_depends_on_the_seed():
    assert seeded_order(42, "a") == seeded_order(42, "a")
    assert seeded_order(42, "a") != seeded_order(43, "a")


@pytest.mark.parametrize(
    ("text", "items"),
    [
        ('["a", "b"]', ["a", "b"]),
        ('Sure!\n```json\n[\n  "a",\n  "b"\n]\n```', ["a", "b"]),
        ('{"items": ["a", "b"]}', ["a", "b"]),
        ('["a", "b", "unfinish', ["a", "b"]),
        ('see [1] below: ["a"]', ["a"]),
        ("1. first\n2) second\n- third\n* fourth", ["first", "second", "third", "fourth"]),
        ('["", "  "]\n- x', ["x"]),
        ("no list here", None),
        ("[1, 2, 3]", None),
    ],
)
def test_list_replies(text, items):
    assert parse_list(text) == items


def test_bigrams_lowercase_and_split_on_non_alphanumerics():
    assert bigrams("Why, Rust?") == frozenset({"why rust"})
    assert bigrams("word") == frozenset({"word"})
    assert jaccard(bigrams("a b c"), bigrams("a b d")) == pytest.approx(1 / 3)


def test_lexical_near_duplicates_are_rejected():
    dedup = Deduplicator(0.8)
    dedup.seed(["how does the borrow checker reject two mutable borrows of one value"])
    admitted, rejected = asyncio.run(dedup.admit([
        "How does the borrow checker reject two mutable borrows of one value?",
        "What is a lifetime?",
        "what is a lifetime",
        "Why can a Box move out of a closure?",
    ], limit=5))
    assert admitted == ["What is a lifetime?", "Why can a Box move out of a closure?"]
    assert [reason for _, reason in rejected] == ["lexical", "lexical"]


def test_admit_keeps_at_most_the_limit():
    admitted, _ = asyncio.run(Deduplicator(0.8).admit(["a b", "c d", "e f"], limit=2))
    assert admitted == ["a b", "c d"]


def test_embeddings_reject_what_words_miss():
    vectors = {"a b": [1.0, 0.0], "c d": [0.99, 0.1], "e f": [0.0, 1.0], "held x": [0.0, -1.0]}
    calls = []

    async def embed(texts):
        calls.append(list(texts))
        return [vectors[t] for t in texts]

    dedup = Deduplicator(0.8, embed, 0.9)
    dedup.seed(["held x"])
    admitted, rejected = asyncio.run(dedup.admit(["a b", "c d", "e f"], limit=5))
    assert admitted == ["a b", "e f"]
    assert rejected == [("c d", "embedding")]
    assert calls == [["held x"], ["a b", "c d", "e f"]]  # held texts embedded once, lazily
