"""The system prompt a child was trained with, for its Ollama Modelfile's ``SYSTEM``.

A child trained with ``[pipeline] system_prompt`` answers as it learnt only when it is given
that prompt again; Ollama gives it when the Modelfile says ``SYSTEM``. What the run trained
on is the truth (the project's settings may have changed since), so it is read from the
run's copy of its training data: the system turn every example opens with, when they share one.
"""

from __future__ import annotations

import json
from pathlib import Path

from loguru import logger

from overbrainer import files
from overbrainer.lines import read_lines

SAMPLED = 1000
"""Examples read: a system prompt set by the project is in every one, so the first ones
tell; a parent's own system turns (``include_system_prompt``) differ among them."""


def trained_system(train_file: Path, shown: str) -> str | None:
    """The system turn the first ``SAMPLED`` examples of ``train_file`` all open with, or
    None (no file, an example without one, or two different ones)."""
    found: str | None = None
    try:
        source = files.open_read(train_file, shown)
    except OSError:
        return None
    if source is None:
        return None
    with source:
        for number, raw in enumerate(read_lines(source, shown), start=1):
            if number > SAMPLED:
                break
            system = _opening_system(raw)
            if system is None or (found is not None and system != found):
                return None
            found = system
    return found


def _opening_system(raw: bytes) -> str | None:
    try:
        record = json.loads(raw)
    except ValueError:
        return None
    messages = record.get("messages") if isinstance(record, dict) else None
    if not isinstance(messages, list) or not messages or not isinstance(messages[0], dict):
        return None
    first = messages[0]
    content = first.get("content")
    return content if first.get("role") == "system" and isinstance(content, str) else None


def system_line(system: str | None, shown: str) -> str | None:
    """``system`` as a Modelfile ``SYSTEM`` instruction, or None when there is none or it
    cannot be written there (a ``\"\"\"`` inside, or a quote at either end, would end the
    triple quotes early: then the user is told to give it in each request)."""
    if system is None:
        return None
    if '"""' in system or system.startswith('"') or system.endswith('"'):
        logger.warning(
            f"export: the system prompt the run trained with cannot be written in {shown} "
            "(it holds triple quotes or starts or ends with a quote); give it as the system "
            "message of each request"
        )
        return None
    return f'SYSTEM """{system}"""'
