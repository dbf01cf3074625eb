"""The fingerprint of what made a record: the prompt as sent, the model and the role's
settings. A record whose fingerprint differs from the one the project would give it now
is *stale*: an edit of a prompt, a model or a setting reached none of it yet.

Kept in ``meta.fingerprint`` of an answer and ``fingerprint`` of a subtopic or question.
A record written before fingerprints were kept has none: it is *unknown*, never stale (it
may well be current; redoing it on a guess would re-pay every answer of an old project).
"""

from __future__ import annotations

import functools
from typing import Any

import orjson
import xxhash

from overbrainer.config.model import Role

FIELD = "fingerprint"


@functools.lru_cache(maxsize=16)
def role_settings(role: Role) -> str:
    """What ``role`` sends besides the item, as JSON: the model and its generation
    settings (``batch`` is how, not what: a batch answer is the online one; ``samples``
    how many: each sample is made as the first is). Kept: a project's every answer is
    checked against the same role."""
    return role.model_dump_json(exclude={"provider", "batch", "samples", "samples_n"})


def fingerprint(prompt: str, role: Role, *item: str | None) -> str:
    """16 hex characters of ``prompt``, ``role``'s settings and ``item``'s parts."""
    return xxhash.xxh3_64_hexdigest(orjson.dumps([prompt, role_settings(role), *item]))


def answer_fingerprint(system: str, role: Role, question: dict[str, Any]) -> str:
    """An answer's: its system prompt as rendered, the parent's settings, and its
    question's text and fingerprint (a question made again makes its answer stale)."""
    return fingerprint(system, role, question["text"], question.get(FIELD))


def recorded(record: dict[str, Any]) -> str | None:
    """The fingerprint ``record`` was made with, or None (made before they were kept)."""
    meta = record.get("meta")
    found = meta.get(FIELD) if isinstance(meta, dict) else record.get(FIELD)
    return found if isinstance(found, str) else None
