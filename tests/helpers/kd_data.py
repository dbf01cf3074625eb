"""Tokenizers for logit-distillation tests: tokenizer.json files a child model would ship."""

from __future__ import annotations

import json
import string
from pathlib import Path

SPECIALS = ("<unk>", "<s>", "</s>")


def write_tokenizer(
    directory: Path,
    *,
    drop: str = "",
    specials: tuple[str, ...] = SPECIALS,
    byte_level: bool = False,
) -> Path:
    """A tokenizer.json in ``directory``: one token a printable ASCII character (but those
    of ``drop``), SentencePiece-style (``▁`` for a space, ``<0xNN>`` byte fallback) or
    byte-level (GPT-2's ``Ġ`` for a space), after ``specials``."""
    directory.mkdir(parents=True, exist_ok=True)
    pieces = [c for c in string.printable[:95] if c not in drop]
    space = "\u0120" if byte_level else "\u2581"
    pieces = [space if c == " " else c for c in pieces]
    if not byte_level:
        pieces += [f"<0x{b:02X}>" for b in range(256)]
    start = len(specials)
    vocab = {piece: start + n for n, piece in enumerate(pieces)}
    document = {
        "version": "1.0",
        "added_tokens": [
            {"id": n, "content": text, "special": True} for n, text in enumerate(specials)
        ],
        "pre_tokenizer": {"type": "ByteLevel"} if byte_level else None,
        "decoder": {"type": "ByteLevel"} if byte_level else {
            "type": "Sequence", "decoders": [{"type": "Replace"}, {"type": "ByteFallback"}]},
        "model": {"type": "BPE", "vocab": vocab, "merges": [], "byte_fallback": not byte_level},
    }
    path = directory / "tokenizer.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return directory
