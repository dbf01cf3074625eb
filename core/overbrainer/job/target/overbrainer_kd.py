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

A mismatch fails the stage naming the file, line, example id and the first position where
the tokens differ: training on rows shifted by one token teaches the child nonsense.
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


class KDAlignmentError(Exception):
    """An example whose tokens are not the parent's: the message names it."""


def sure_row(token: int, k: int) -> tuple[list[float], list[int]]:
    """A row that gives ``token`` all the probability: the template's own tokens."""
    others = [n for n in range(k + 1) if n != token][: k - 1]
    return [0.0] + [ABSENT_LOGPROB] * (k - 1), [token, *others]


def align(example: dict, render: Render, where: str) -> dict:
    """``example`` with its rows lined up as Axolotl reads them, or raise ``KDAlignmentError``.

    ``where``: the file and line, for the message."""
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
    for position, parent in enumerate(chosen):
        child = answer[position] if position < len(answer) else None
        if child != parent:
            seen = "missing" if child is None else child
            raise KDAlignmentError(
                f"{name}: the answer's token {position} is {seen} in the child's tokenizer, "
                f"{parent} in the parent's (another tokenizer, or the text changed since)"
            )
    tail = answer[len(chosen) :] or chosen[-1:]
    k = len(ids[0])
    rows = [sure_row(token, k) for token in [*tail, tail[-1]]]
    aligned = dict(example)
    aligned["logprobs"] = list(logprobs) + [row[0] for row in rows]
    aligned["target_token_ids"] = list(ids) + [row[1] for row in rows]
    aligned["kd_tail"] = len(rows)
    return aligned


def align_file(path: str, render: Render) -> int:
    """Align every example of ``path`` in place (all or none); how many there were."""
    lines = []
    with open(path, encoding="utf-8") as file:
        for number, line in enumerate(file, start=1):
            if line.strip():
                aligned = align(json.loads(line), render, f"{path} line {number}")
                lines.append(json.dumps(aligned, ensure_ascii=False) + "\n")
    temporary = path + ".aligning"
    with open(temporary, "w", encoding="utf-8") as file:
        file.writelines(lines)
    os.replace(temporary, path)
    return len(lines)


def tokenizer_render(model: str) -> Render:
    """The child's chat template and tokenizer, as ``transformers`` loads them for Axolotl."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model)

    def render(messages: list[Any], opened: bool) -> list[int]:
        ids = tokenizer.apply_chat_template(
            messages, tokenize=True, add_generation_prompt=opened, return_dict=False
        )
        return list(ids)

    return render


def main(argv: Sequence[str]) -> int:
    if len(argv) < 2:
        print("usage: python -m overbrainer_kd MODEL FILE...", file=sys.stderr)
        return 2
    try:
        render = tokenizer_render(argv[0])
    except ImportError as error:
        # Error lines as Axolotl's own: the run's message shows the log's last one.
        print(f"KDAlignmentError: cannot load the child's tokenizer: {error}", file=sys.stderr)
        return 2
    for path in argv[1:]:
        if not os.path.isfile(path):
            continue
        try:
            count = align_file(path, render)
        except KDAlignmentError as error:
            print(f"KDAlignmentError: {error}", file=sys.stderr)
            return 3
        print(f"kd-align: {path}: {count} examples line up with the child's tokens")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

