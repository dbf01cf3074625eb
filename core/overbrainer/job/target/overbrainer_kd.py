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
splits it, so such an answer is lined up on its text. A child token that starts where one
of the parent's started gets the parent's row there (its distribution for what follows
that same text); one that starts inside a parent's token gets its own token for sure (it
learns it from the text alone). Answers whose texts differ (another tokenizer, an edited
answer) fail the stage naming the file, line, example id and the first position where the
tokens differ: training on rows shifted by one token teaches the child nonsense.
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


Decode = Callable[[list[int]], str]
"""The text the child's tokenizer spells for token ids."""


class KDAlignmentError(Exception):
    """An example whose tokens are not the parent's: the message names it."""


def sure_row(token: int, k: int) -> tuple[list[float], list[int]]:
    """A row that gives ``token`` all the probability: the template's own tokens."""
    others = [n for n in range(k + 1) if n != token][: k - 1]
    return [0.0] + [ABSENT_LOGPROB] * (k - 1), [token, *others]


def align(example: dict, render: Render, where: str, decode: Decode | None = None) -> dict:
    """``example`` with its rows lined up as Axolotl reads them, or raise ``KDAlignmentError``.

    ``where``: the file and line, for the message; ``decode``: lines up on its text an
    answer the parent split otherwise (without it, such an answer is refused)."""
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
    k = len(ids[0])
    aligned = dict(example)
    sources: list[int | None]
    if answer[: len(chosen)] == chosen:
        end, sources = len(chosen), list(range(len(chosen)))
    else:
        found = on_text(answer, chosen, decode) if decode is not None else None
        if found is None:
            position = next(n for n, token in enumerate(chosen) if answer[n : n + 1] != [token])
            seen = answer[position] if position < len(answer) else "missing"
            raise KDAlignmentError(
                f"{name}: the answer's token {position} is {seen} in the child's tokenizer, "
                f"{chosen[position]} in the parent's (another tokenizer, or the text changed "
                "since)"
            )
        end, sources = found
        aligned["kd_chosen"] = answer[:end]  # the rows are the child's tokens' now
        aligned["kd_text_only"] = sources.count(None)
    rows = [
        (logprobs[source], ids[source]) if source is not None else sure_row(answer[n], k)
        for n, source in enumerate(sources)
    ]
    tail = answer[end:] or answer[end - 1 : end]
    rows += [sure_row(token, k) for token in [*tail, tail[-1]]]
    aligned["logprobs"] = [row[0] for row in rows]
    aligned["target_token_ids"] = [row[1] for row in rows]
    aligned["kd_tail"] = len(tail) + 1
    return aligned


def on_text(
    answer: list[int], chosen: list[int], decode: Decode
) -> tuple[int, list[int | None]] | None:
    """Where the parent's answer ends among the child's ``answer`` tokens, and for each child
    token the parent's row that teaches it (None: none, it starts inside a parent's token);
    None when the two do not spell the same text. Decoded from the first token they differ
    at: both spell the same text up to there."""
    same = 0
    while same < min(len(answer), len(chosen)) and answer[same] == chosen[same]:
        same += 1
    text = decode(chosen[same:])
    starts: dict[int, int] = {}  # where in the text each of the parent's tokens starts
    for position in range(same, len(chosen)):
        before = decode(chosen[same:position])
        if text.startswith(before):  # not inside a character
            starts.setdefault(len(before), position)
    sources: list[int | None] = list(range(same))
    for position in range(same, len(answer) + 1):
        before = decode(answer[same:position])
        if before == text:
            return position, sources
        if position < len(answer):
            sources.append(starts.get(len(before)) if text.startswith(before) else None)
    return None


def align_file(path: str, render: Render, decode: Decode | None = None) -> str:
    """Align every example of ``path`` in place (all or none); what the stage prints of it."""
    lines = []
    on_their_text = text_only = 0
    with open(path, encoding="utf-8") as file:
        for number, line in enumerate(file, start=1):
            if line.strip():
                aligned = align(json.loads(line), render, f"{path} line {number}", decode)
                lines.append(json.dumps(aligned, ensure_ascii=False) + "\n")
                if "kd_text_only" in aligned:
                    on_their_text += 1
                    text_only += aligned["kd_text_only"]
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


def child_tokenizer(model: str) -> tuple[Render, Decode]:
    """The child's chat template and tokenizer, as ``transformers`` loads them for Axolotl."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model)

    def render(messages: list[Any], opened: bool) -> list[int]:
        ids = tokenizer.apply_chat_template(
            messages, tokenize=True, add_generation_prompt=opened, return_dict=False
        )
        return list(ids)

    def decode(ids: list[int]) -> str:
        return str(tokenizer.decode(ids, clean_up_tokenization_spaces=False))

    return render, decode


def main(argv: Sequence[str]) -> int:
    if len(argv) < 2:
        print("usage: python -m overbrainer_kd MODEL FILE...", file=sys.stderr)
        return 2
    try:
        render, decode = child_tokenizer(argv[0])
    except ImportError as error:
        # Error lines as Axolotl's own: the run's message shows the log's last one.
        print(f"KDAlignmentError: cannot load the child's tokenizer: {error}", file=sys.stderr)
        return 2
    for path in argv[1:]:
        if not os.path.isfile(path):
            continue
        try:
            said = align_file(path, render, decode)
        except KDAlignmentError as error:
            print(f"KDAlignmentError: {error}", file=sys.stderr)
            return 3
        print(said)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

