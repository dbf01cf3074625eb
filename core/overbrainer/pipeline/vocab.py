"""A model's vocabulary, read from its ``tokenizer.json`` on this machine (never fetched).

Logit distillation needs the parent's token ids to be the child's: the two tokenizers are
compared by vocabulary and special tokens, and the parent's tokens, which the OpenAI
protocol names by text and bytes, are given the child's ids by their bytes. A vocabulary's
bytes come from the Hugging Face conventions: byte-level BPE (GPT-2, Llama 3, Qwen) writes
each byte as one printable character; SentencePiece-style models (Llama 2, Mistral, Gemma)
write a space as ``▁`` and a byte as ``<0xNN>``.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import xxhash

from overbrainer import files
from overbrainer.errors import UserError

TOKENIZER_FILE = "tokenizer.json"
TOKENIZER_LIMIT = 128 * 1024 * 1024
"""The largest tokenizer.json read (Gemma's, the largest common one, is some 35 MB)."""

AMBIGUOUS = -1
"""Stands for bytes that more than one token of the vocabulary spells."""

_BYTE_TOKEN = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")


@functools.cache
def _byte_level_alphabet() -> dict[str, int]:
    """GPT-2's printable character for each byte, inverted: character to byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
                 *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            chars[chr(byte)] = byte
        else:
            chars[chr(256 + extra)] = byte
            extra += 1
    return chars


@dataclass(frozen=True)
class Vocabulary:
    """Where a vocabulary came from, its tokens by id, and the special (added) ones."""

    source: str
    tokens: dict[str, int]
    special: tuple[tuple[int, str], ...]
    byte_level: bool

    @functools.cached_property
    def fingerprint(self) -> str:
        """Names this vocabulary and its special tokens: equal fingerprints, equal ids."""
        canonical = json.dumps([sorted(self.tokens.items()), self.special], ensure_ascii=False)
        return xxhash.xxh3_64_hexdigest(canonical.encode())

    @functools.cached_property
    def size(self) -> int:
        """One more than the largest id (asked once a candidate: computed once)."""
        return 1 + max([*self.tokens.values(), *(i for i, _ in self.special)], default=-1)

    @functools.cached_property
    def by_bytes(self) -> dict[bytes, int]:
        """Each token's id by the bytes it spells; ``AMBIGUOUS`` where several spell them.
        A SentencePiece byte token (``<0x41>``) gives its byte only to text no other
        token spells: the model writes ``A`` with the token ``A`` when it has one."""
        found: dict[bytes, int] = {}
        fallback: dict[bytes, int] = {}
        for text, token_id in self.tokens.items():
            spelled = self._spelled(text)
            if spelled is None:
                continue
            raw, is_byte = spelled
            into = fallback if is_byte else found
            into[raw] = AMBIGUOUS if raw in into and into[raw] != token_id else token_id
        for token_id, text in self.special:
            raw = text.encode()
            found[raw] = AMBIGUOUS if raw in found and found[raw] != token_id else token_id
        for raw, token_id in fallback.items():
            found.setdefault(raw, token_id)
        return found

    def _spelled(self, text: str) -> tuple[bytes, bool] | None:
        if self.byte_level:
            alphabet = _byte_level_alphabet()
            if not all(char in alphabet for char in text):
                return None
            return bytes(alphabet[char] for char in text), False
        byte = _BYTE_TOKEN.match(text)
        if byte:
            return bytes([int(byte.group(1), 16)]), True
        return text.replace("\u2581", " ").encode(), False

    def differences(self, other: Vocabulary) -> list[str]:
        """What differs between this vocabulary and ``other``, in a few words each."""
        found = []
        if self.tokens != other.tokens:
            moved = sum(1 for text, i in self.tokens.items() if other.tokens.get(text) != i)
            missing = len(other.tokens.keys() - self.tokens.keys())
            found.append(
                f"{moved} of its {len(self.tokens)} tokens have another id or none in the "
                f"other ({len(other.tokens)} tokens, {missing} not in this one)"
            )
        if self.special != other.special:
            mine, theirs = dict(self.special), dict(other.special)
            changed = sorted(i for i in mine.keys() | theirs.keys() if mine.get(i) != theirs.get(i))
            shown = ", ".join(f"{i}: {mine.get(i)!r} vs {theirs.get(i)!r}" for i in changed[:3])
            found.append(f"special tokens differ ({shown})")
        return found


def parse_tokenizer(data: bytes, source: str) -> Vocabulary:
    """The vocabulary of a ``tokenizer.json``'s bytes; ``source`` names it in errors."""
    try:
        document = json.loads(data)
        model = document["model"]
        vocab = model["vocab"]
        if model.get("type") == "Unigram":  # a list of [piece, score]
            vocab = {piece: n for n, (piece, _) in enumerate(vocab)}
        tokens = {str(text): int(i) for text, i in vocab.items()}
        added = document.get("added_tokens") or []
        special = tuple(sorted((int(a["id"]), str(a["content"])) for a in added))
    except (ValueError, KeyError, TypeError, AttributeError):
        raise UserError(f"{source} is not a tokenizer.json this can read") from None
    return Vocabulary(source, tokens, special, _is_byte_level(document))


def _is_byte_level(document: dict[str, Any]) -> bool:
    def kinds(node: Any) -> list[str]:
        if not isinstance(node, dict):
            return []
        inner = node.get("pretokenizers") or node.get("decoders") or []
        return [str(node.get("type")), *(k for part in inner for k in kinds(part))]

    return "ByteLevel" in kinds(document.get("decoder")) + kinds(document.get("pre_tokenizer"))


def tokenizer_path(model: str) -> Path | None:
    """Where ``model``'s tokenizer.json lies on this machine: in the directory ``model``,
    else in the Hugging Face cache (never downloaded); None when in neither."""
    local = Path(model).expanduser()
    if local.is_dir():
        found = local / TOKENIZER_FILE
        return found if found.is_file() else None
    from huggingface_hub import try_to_load_from_cache  # a named heavy library

    try:
        cached = try_to_load_from_cache(model, TOKENIZER_FILE)
    except ValueError:  # not a repository id
        return None
    return Path(cached) if isinstance(cached, str) else None


def load_vocabulary(model: str, setting: str) -> Vocabulary:
    """``model``'s vocabulary, read from this machine; ``setting`` names where ``model``
    was set, for the error that says how to get it here."""
    path = tokenizer_path(model)
    data = None if path is None else files.read_regular(path, str(path), TOKENIZER_LIMIT)
    if path is None or data is None:
        raise UserError(
            f"{setting} = {model!r}: its tokenizer.json is not on this machine (a directory "
            "holding it, or the Hugging Face cache); logit distillation reads it to give the "
            f"parent's tokens their ids: fetch it with `hf download {model} tokenizer.json`"
        )
    return parse_tokenizer(data, f"{setting} ({model})")
