"""The ``kd-align`` stage of a ``distill = "logits"`` job: before Axolotl trains, each
example's answer is tokenized with the child's tokenizer and its chat template, and must be
the very tokens the parent wrote (``kd_chosen``); then the rows after the answer are added.

Run on the target as ``python3 -m overbrainer_kd MODEL FILE...`` (the run's ``plugin/`` is on
PYTHONPATH), with the Axolotl venv's python: the standard library, and ``transformers`` for
the tokenizer. Each FILE (``data/train.jsonl``, ``data/eval.jsonl``) is rewritten in place.

Axolotl 0.19's KD dataset lines its rows up with the END of an example's tokens, and its
trainer compares row p with the child's prediction at p, the next token's: so the parent's
row for the answer's first token sits on the token before it (the prompt's last), and after
the answer come rows for the chat template's end of turn (``<|im_end|>``, ``\\n``), each the
template's token for sure, then one more for the last position (masked by Axolotl when the
template's last token is not trained, as ChatML's ``\\n``).

A parent's sampler may write a text in tokens its tokenizer would not pick for it (``96``
where encoding the text gives ``9``, ``6``): the child trains on the text as its tokenizer
splits it, so such an answer is lined up on its bytes (each token's, from its piece and the
tokenizer family's byte map, walking both sides once). A child token that starts at the byte
where one of the parent's started gets the parent's row there (its distribution for what
follows that same text); one that starts inside a parent's token (or inside a character)
gets its own token for sure (it learns it from the text alone). Answers whose bytes differ
(another tokenizer, an edited answer, an answer cut inside a character) fail the stage
naming the file, line, example id and where the texts part: training on rows shifted by one
token teaches the child nonsense.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

ABSENT_LOGPROB = -50.0
"""A candidate that is not there (see overbrainer.train.kd_data)."""

Render = Callable[[list[Any], bool], list[int]]
"""Token ids of a conversation as the chat template renders it; ``True``: the prompt with
the assistant's turn opened (the generation prompt), ``False``: the whole conversation."""


Spell = Callable[[list[int]], list[bytes]]
"""The bytes of each token, as the child's tokenizer spells it: an answer's text is the
tokens' bytes one after the other (a token may hold part of a character)."""


class KDAlignmentError(Exception):
    """An example whose tokens are not the parent's: the message names it."""


def sure_row(token: int, k: int) -> tuple[list[float], list[int]]:
    """A row that gives ``token`` all the probability: the template's own tokens."""
    others = [n for n in range(k + 1) if n != token][: k - 1]
    return [0.0] + [ABSENT_LOGPROB] * (k - 1), [token, *others]


def align(
    example: dict,
    render: Render,
    where: str,
    spell: Spell | None = None,
    first_space: bool = False,
) -> tuple[dict, int | None]:
    """``example`` with its rows lined up as Axolotl reads them, and how many of its tokens
    are learnt from the text alone (None: the parent's tokens were the child's), or raise
    ``KDAlignmentError``.

    ``where``: the file and line, for the message; ``spell``: lines up on its bytes an
    answer the parent split otherwise (without it, such an answer is refused); ``first_space``:
    the tokenizer's pre-tokenizer puts a space before a text (Metaspace's ``prepend_scheme``)
    and its decoder drops it again, so a space that starts one side's first token and not
    the other's is not the answer's text. The count is not put in the example: every line
    must keep the same keys (HF datasets takes the columns from a file's first lines and
    refuses a later line with another)."""
    name = "{} (example {})".format(where, example.get("id", "?"))
    chosen = example.get("kd_chosen")
    logprobs, ids = example.get("logprobs"), example.get("target_token_ids")
    if not isinstance(chosen, list) or not isinstance(logprobs, list) or not ids:
        raise KDAlignmentError(name + ": no kd_chosen, logprobs or target_token_ids")
    added = example.get("kd_tail", 0)  # a resumed run's copies were aligned once already
    if added:
        logprobs, ids = logprobs[:-added], ids[:-added]
    messages = example["messages"]
    prompt = render(messages[:-1], True)
    full = render(messages, False)
    if full[: len(prompt)] != prompt:
        raise KDAlignmentError(
            name + ": the chat template does not render the prompt as the start of the "
            "conversation, so the answer's tokens cannot be found"
        )
    answer = full[len(prompt) :]
    if not answer:
        raise KDAlignmentError(
            name + ": the chat template renders nothing after the prompt (an empty answer "
            "and no end of turn), so there is no token to teach"
        )
    k = len(ids[0])
    aligned = dict(example)
    aligned.pop("kd_text_only", None)  # written on some lines by an earlier kd-align
    sources: list[int | None]
    text_only = None
    if spell is not None:  # on the bytes even when the tokens are the parent's: whole text
        end, sources = on_bytes(spell(answer), spell(chosen), name, first_space)
        if answer[:end] != chosen:
            aligned["kd_chosen"] = answer[:end]  # the rows are the child's tokens' now
            text_only = sources.count(None)
    elif answer[: len(chosen)] == chosen:
        end, sources = len(chosen), list(range(len(chosen)))
    else:
        position = next(n for n, token in enumerate(chosen) if answer[n : n + 1] != [token])
        seen = answer[position] if position < len(answer) else "missing"
        raise KDAlignmentError(
            f"{name}: the answer's token {position} is {seen} in the child's tokenizer, "
            f"{chosen[position]} in the parent's (another tokenizer, or the text changed "
            "since)"
        )
    rows = [
        (logprobs[source], ids[source]) if source is not None else sure_row(answer[n], k)
        for n, source in enumerate(sources)
    ]
    tail = answer[end:] or answer[end - 1 : end]
    rows += [sure_row(token, k) for token in [*tail, tail[-1]]]
    aligned["logprobs"] = [row[0] for row in rows]
    aligned["target_token_ids"] = [row[1] for row in rows]
    aligned["kd_tail"] = len(tail) + 1
    return aligned, text_only


def on_bytes(
    answer: list[bytes], chosen: list[bytes], name: str, first_space: bool = False
) -> tuple[int, list[int | None]]:
    """Where the parent's answer (the bytes of its tokens, ``chosen``) ends among the
    child's ``answer`` tokens (the answer, then the template's end of turn), and for each
    child token before it the parent's row that teaches it: the parent's token that starts
    at the same byte, None when it starts inside one (or a character). One walk over both;
    ``KDAlignmentError`` naming where they part when the bytes are not the same."""
    if first_space and answer and chosen:
        spaced = answer[0].startswith(b" "), chosen[0].startswith(b" ")
        if spaced == (True, False):
            answer = [answer[0][1:], *answer[1:]]
        elif spaced == (False, True):
            chosen = [chosen[0][1:], *chosen[1:]]
    text = b"".join(chosen)
    try:
        text.decode("utf-8")
    except UnicodeDecodeError as error:
        raise KDAlignmentError(
            f"{name}: the parent's answer is not whole UTF-8 text at byte {error.start} of "
            f"{len(text)} (its tokens end or break inside a character)"
        ) from None
    sources: list[int | None] = []
    parent = start = 0  # the parent's first token that does not start before ``offset``
    offset = 0
    for position, piece in enumerate(answer):
        if offset == len(text):
            return position, sources
        if text[offset : offset + len(piece)] != piece:
            raise KDAlignmentError(differ(b"".join(answer), text, name))
        while parent < len(chosen) and (start < offset or not chosen[parent]):
            start += len(chosen[parent])
            parent += 1
        taught = piece and start == offset and parent < len(chosen)
        sources.append(parent if taught else None)
        offset += len(piece)
    if offset == len(text):
        return len(answer), sources
    raise KDAlignmentError(differ(b"".join(answer), text, name))


def differ(child: bytes, parent: bytes, name: str) -> str:
    """The refusal of an answer whose bytes are not the parent's: where they part (in
    characters and bytes of the answer) and some 20 characters of each side from there."""
    at = next(
        (n for n, (a, b) in enumerate(zip(child, parent, strict=False)) if a != b),
        min(len(child), len(parent)),
    )
    while at and (parent[at : at + 1] or child[at : at + 1] or b"\0")[0] & 0xC0 == 0x80:
        at -= 1  # from the start of the character they part in
    character = len(parent[:at].decode("utf-8", errors="replace"))

    def said(side: bytes) -> str:
        shown = side[at:].decode("utf-8", errors="replace")
        return repr(shown[:20]) + ("..." if len(shown) > 20 else "")

    return (
        f"{name}: the answer's text parts from the parent's at character {character} "
        f"(byte {at}): the child's tokenizer spells {said(child)}, the parent's tokens "
        f"{said(parent)} (another tokenizer, or the text changed since)"
    )


def byte_level_bytes() -> dict[str, int]:
    """GPT-2's byte-level alphabet read back: the byte each of its characters stands for
    (printable bytes are themselves, the others shifted past 255: ``Ġ`` is a space)."""
    kept = [*range(33, 127), *range(161, 173), *range(174, 256)]
    shifted = [b for b in range(256) if b not in kept]
    table = {chr(b): b for b in kept}
    table.update({chr(256 + n): b for n, b in enumerate(shifted)})
    return table


def family(decoder: dict | None) -> str | None:
    """How the tokenizer's pieces spell bytes, read from its ``tokenizer.json`` decoder:
    ``byte-level`` (GPT-2, Qwen, Llama-3), ``sentencepiece`` (``▁`` a space, ``<0xNN>`` a
    byte: Llama-2, Mistral, Gemma, the quickstart's tiny model), ``metaspace`` (those, when
    the tokenizer also puts a space before a text and its decoder drops it), None when
    unknown."""
    steps = (decoder.get("decoders") or [decoder]) if decoder else []
    kinds = {step.get("type") for step in steps if isinstance(step, dict)}
    if "ByteLevel" in kinds:
        return "byte-level"
    replaces = any(
        step.get("type") == "Replace" and step.get("pattern", {}).get("String") == "\u2581"
        for step in steps
        if isinstance(step, dict)
    )
    for step in steps:
        if isinstance(step, dict) and step.get("type") == "Metaspace":
            scheme = step.get("prepend_scheme", "always" if step.get("add_prefix_space") else "")
            return "metaspace" if scheme in ("first", "always") else "sentencepiece"
    if "ByteFallback" in kinds or replaces:
        return "sentencepiece"
    return None


def piece_bytes(piece: str, kind: str) -> bytes:
    """The bytes one token's piece (as ``convert_ids_to_tokens`` gives it) spells: no
    decoding of a whole text, so a token that holds part of a character keeps its bytes. The
    decoder's dropping of a text's first space (Metaspace's ``prepend_scheme``) is left out
    here: it is a rule of whole texts (see ``align``'s ``first_space``)."""
    if kind == "byte-level":
        table = BYTE_LEVEL
        return b"".join(bytes([table[c]]) if c in table else c.encode("utf-8") for c in piece)
    if len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
        try:
            return bytes([int(piece[3:5], 16)])
        except ValueError:
            pass
    return piece.replace("\u2581", " ").encode("utf-8")


BYTE_LEVEL = byte_level_bytes()


def pieces_spell(pieces: Callable[[list[int]], list[str]], kind: str) -> Spell:
    """A ``Spell`` from the tokenizer's pieces and its family's byte map."""
    return lambda ids: [piece_bytes(piece, kind) for piece in pieces(ids)]


def anchored_spell(decode: Callable[[list[int]], str], anchor: int) -> Spell:
    """A ``Spell`` for a tokenizer of unknown family: each token decoded after a fixed
    ``anchor`` token, less the anchor's text (so a decoder's rules for a text's first token
    fall on the anchor), once per distinct token. Right for tokens of whole characters; a
    token holding part of one decodes to U+FFFD, so such an answer is refused, never lined
    up wrong."""
    alone = decode([anchor])
    known: dict[int, bytes] = {}

    def spell(ids: list[int]) -> list[bytes]:
        for token in ids:
            if token not in known:
                known[token] = decode([anchor, token])[len(alone) :].encode("utf-8")
        return [known[token] for token in ids]

    return spell


def align_file(
    path: str, render: Render, spell: Spell | None = None, first_space: bool = False
) -> str:
    """Align every example of ``path`` in place (all or none); what the stage prints of it."""
    lines = []
    on_their_text = text_only = 0
    with open(path, encoding="utf-8") as file:
        for number, line in enumerate(file, start=1):
            if line.strip():
                where = f"{path} line {number}"
                aligned, learnt = align(json.loads(line), render, where, spell, first_space)
                lines.append(json.dumps(aligned, ensure_ascii=False) + "\n")
                if learnt is not None:
                    on_their_text += 1
                    text_only += learnt
    temporary = path + ".aligning"
    with open(temporary, "w", encoding="utf-8") as file:
        file.writelines(lines)
    os.replace(temporary, path)
    said = f"kd-align: {path}: {len(lines)} examples line up with the child's tokens"
    if on_their_text:
        said += (
            f" ({on_their_text} that the parent split otherwise lined up on their text, "
            f"{text_only} tokens learnt from the text alone)"
        )
    return said


def child_tokenizer(model: str) -> tuple[Render, Spell, bool]:
    """The child's chat template and tokenizer, as ``transformers`` loads them for Axolotl;
    its tokens' bytes by its family's byte map, or anchored decoding when it is unknown; and
    whether it puts a space before a text (``align``'s ``first_space``)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model)

    def render(messages: list[Any], opened: bool) -> list[int]:
        ids = tokenizer.apply_chat_template(
            messages, tokenize=True, add_generation_prompt=opened, return_dict=False
        )
        return list(ids)

    def pieces(ids: list[int]) -> list[str]:
        return [str(piece) for piece in tokenizer.convert_ids_to_tokens(ids)]

    def decode(ids: list[int]) -> str:
        return str(tokenizer.decode(ids, clean_up_tokenization_spaces=False))

    backend = getattr(tokenizer, "backend_tokenizer", None)
    decoder = json.loads(backend.to_str()).get("decoder") if backend is not None else None
    # a slow SentencePiece tokenizer: its pieces, and the dummy prefix it puts before a text
    kind = family(decoder) or ("metaspace" if hasattr(tokenizer, "sp_model") else None)
    if kind is not None:
        return render, pieces_spell(pieces, kind), kind == "metaspace"
    anchor = tokenizer.encode("x", add_special_tokens=False)[-1]
    return render, anchored_spell(decode, anchor), False


def main(argv: Sequence[str]) -> int:
    if len(argv) < 2:
        print("usage: python -m overbrainer_kd MODEL FILE...", file=sys.stderr)
        return 2
    try:
        render, spell, first_space = child_tokenizer(argv[0])
    except ImportError as error:
        # Error lines as Axolotl's own: the run's message shows the log's last one.
        print(f"KDAlignmentError: cannot load the child's tokenizer: {error}", file=sys.stderr)
        return 2
    for path in argv[1:]:
        if not os.path.isfile(path):
            continue
        try:
            said = align_file(path, render, spell, first_space)
        except KDAlignmentError as error:
            print(f"KDAlignmentError: {error}", file=sys.stderr)
            return 3
        print(said)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
