"""``distill = "logits"`` against llama-cpp-python's server: the shape its logprobs really
have, their tokens given the ids of the tiny model's own vocabulary (the child's tokenizer
is the parent's), and the bytes a token costs in data/logprobs.bin.

Run with ``OVERBRAINER_LLAMA_CPP=<toolchain dir> uv run pytest -m real tests/providers``.
"""

from __future__ import annotations

import json
import string
from pathlib import Path

import pytest
from tests.helpers.pipeline_data import PIPELINE_CONFIG, seed_questions, write_project
from tests.helpers.project import run

from overbrainer.pipeline.logits_file import LogitsFile
from overbrainer.pipeline.vocab import load_vocabulary

pytestmark = pytest.mark.real

TOP_K = 4
QUESTIONS = 8


def write_tiny_tokenizer(directory: Path) -> Path:
    """tests/helpers/tiny_gguf.py's vocabulary as a tokenizer.json (SentencePiece-style)."""
    pieces = [f"<0x{byte:02X}>" for byte in range(256)]
    pieces += ["\u2581", *string.ascii_letters, *(f"\u2581{c}" for c in string.ascii_lowercase)]
    specials = ["<unk>", "<s>", "</s>"]
    document = {
        "added_tokens": [{"id": n, "content": t, "special": True} for n, t in enumerate(specials)],
        "decoder": {"type": "Sequence",
                    "decoders": [{"type": "Replace"}, {"type": "ByteFallback"}]},
        "model": {"type": "BPE", "vocab": {p: 3 + n for n, p in enumerate(pieces)}, "merges": []},
    }
    directory.mkdir()
    (directory / "tokenizer.json").write_text(json.dumps(document))
    return directory


def test_answers_keep_the_servers_logprobs_with_the_childs_ids(tmp_path, llama_server):
    child = write_tiny_tokenizer(tmp_path / "child")
    config = (
        PIPELINE_CONFIG.replace("reasoning = true", "max_tokens = 24")
        + '\n[providers.main.prices]\n"parent-model" = { input = 0.1, output = 0.2 }\n'
        f'\n[training]\ntarget = "here"\nbase_model = "{child}"\nadapter = "lora"\n'
        f'distill = "logits"\n\n[training.kd]\ntop_k = {TOP_K}\n\n'
        '[targets.here]\nkind = "local"\n'
    )
    project_dir = write_project(tmp_path / "project", llama_server, config)
    (project_dir / ".env").write_text(f"OVERBRAINER_PROVIDERS__MAIN__BASE_URL={llama_server}\n")
    seed_questions(project_dir, {("ownership", "moves"): [f"q{n}" for n in range(QUESTIONS)]})
    result = run(project_dir, "answers")
    assert result.exit_code == 0, result.stderr
    records = [json.loads(line) for line in
               (project_dir / "data" / "answers.jsonl").read_text().splitlines()]
    kept = LogitsFile(project_dir / "data" / "logprobs.bin", "data/logprobs.bin")
    index = kept.index()
    # The tiny model's replies are noise, mostly cut at max_tokens (excluded as truncated,
    # their logprobs never looked at). llama-cpp-python gives a token's text only, and a
    # byte token of the random model's (half a character) as '': such an answer cannot
    # be named and is excluded saying so; the others keep ids that spell their text.
    spelling = {i: t.replace("\u2581", " ") for t, i in load_vocabulary(
        str(child), "training.base_model").tokens.items()}
    named = 0
    for record in records:
        meta = record["meta"]
        if meta["excluded"] == "no_logprobs":
            assert "without its bytes or id (a part of a character, or a control token)" in (
                meta["logprobs_problem"]
            )
        elif meta["excluded"] is None:
            found = kept.read(index[record["id"]])
            assert found.ids.shape == (len(found.chosen), TOP_K)
            text = "".join(spelling[int(i)] for i in found.chosen)
            assert record["messages"][-1]["content"].strip() in text
            named += 1
    assert set(index) == {r["id"] for r in records if r["meta"]["excluded"] is None}
    print(f"{named} answer(s) named, of {len(records)}")
