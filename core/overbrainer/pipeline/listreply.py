"""Reading a list of strings out of a model's reply, however it was wrapped."""

from __future__ import annotations

import json
import re

_DECODER = json.JSONDecoder()
_ITEM_LINE = re.compile(r"^\s*(?:[-*•+]|\d+[.)])\s+(.+?)\s*$")


def parse_list(text: str) -> list[str] | None:
    """The strings ``text`` lists, or None when it lists none.

    From each ``[``, consecutive complete JSON strings are read; the first ``[`` giving at
    least one wins, so fenced arrays, ``{"items": […]}`` and arrays cut short all work.
    Failing that, bulleted or numbered lines.
    """
    start = text.find("[")
    while start >= 0:
        items = _strings_from(text, start + 1)
        if items:
            return items
        start = text.find("[", start + 1)
    items = [
        match.group(1).strip().strip('"').strip()
        for line in text.splitlines()
        if (match := _ITEM_LINE.match(line))
    ]
    items = [item for item in items if item]
    return items or None


def _strings_from(text: str, position: int) -> list[str]:
    items: list[str] = []
    while True:
        position = _skip_space(text, position)
        if position >= len(text) or text[position] != '"':
            return items
        try:
            value, position = _DECODER.raw_decode(text, position)
        except ValueError:
            return items  # a string cut short: keep what came before it
        if value.strip():
            items.append(value.strip())
        position = _skip_space(text, position)
        if position >= len(text) or text[position] != ",":
            return items
        position += 1


def _skip_space(text: str, position: int) -> int:
    while position < len(text) and text[position].isspace():
        position += 1
    return position
