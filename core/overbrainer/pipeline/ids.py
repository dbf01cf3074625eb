"""Stable ids, compatible with the reference tool: XXH3-128 of parts joined by ``\\x1f``."""

from __future__ import annotations

import re

import xxhash

_BREAKS = re.compile(r"[\s\x00-\x1f\x7f-\x9f]+")


def normalize(text: str) -> str:
    """``text`` split on whitespace and control characters, lowercased, joined by one space."""
    return " ".join(part for part in _BREAKS.split(text.lower()) if part)


def stable_id(*parts: str) -> str:
    """32 hex characters."""
    return xxhash.xxh3_128_hexdigest("\x1f".join(parts).encode())


def subtopic_id(topic: str, name: str) -> str:
    return stable_id("subtopic", topic, normalize(name))


def question_id(subtopic: str, text: str) -> str:
    """The id of question ``text`` of the subtopic whose id is ``subtopic``."""
    return stable_id("question", subtopic, normalize(text))


def seeded_order(seed: int, text: str) -> int:
    """XXH3-64 of ``text`` with ``seed``: the split's reproducible shuffle."""
    return xxhash.xxh3_64_intdigest(text.encode(), seed=seed)
