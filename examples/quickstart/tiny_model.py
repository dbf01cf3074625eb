"""Make a tiny Llama child model, offline, for trying the training side on a CPU.

Run it with the Python of an Axolotl environment (it needs transformers, tokenizers and
torch)::

    python tiny_model.py OUT_DIR [--corpus FILE ...]

OUT_DIR receives a randomly initialised Llama (hidden size 64, 2 layers), a BPE tokenizer
with byte fallback (which llama.cpp's converter takes) trained on a small built-in corpus
(plus any ``--corpus`` text file), and a Qwen3-style chat template that renders the
assistant's ``reasoning_content`` as ``<think>...</think>`` before its answer. Nothing is
downloaded. When OUT_DIR already holds a complete model the script does nothing, so it can
run before every training.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

REQUIRED_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")
"""What a complete model directory holds; any missing one means "make it again"."""

EOS = "<|im_end|>"
"""Ends every turn of the chat template, so generation stops after the assistant's turn."""
PAD = "<|endoftext|>"
SPECIAL_TOKENS = (PAD, "<|im_start|>", EOS, "<think>", "</think>")

VOCAB_SIZE = 1024

CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' -}}"
    "{%- if message['role'] == 'assistant' -%}"
    "{%- if message.get('reasoning_content') -%}"
    "{{- '<think>\\n' + message['reasoning_content'] + '\\n</think>\\n\\n' -}}"
    "{%- endif -%}"
    "{%- endif -%}"
    "{{- message['content'] + '<|im_end|>' + '\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- endif -%}"
)
"""ChatML with the reasoning of an assistant turn in ``<think>`` tags, as Qwen3 writes it.

Axolotl finds the trainable turns by rendering them, so no ``{% generation %}`` markers are
needed for ``roles_to_train``; ``<|im_end|>`` ends each turn and is the EOS token, which
``train_on_eos: turn`` trains on.
"""

CORPUS = """\
Ownership in Rust means every value has a single owner, and the value is dropped when the
owner goes out of scope. Borrowing lets code read a value through a reference without taking
ownership. A mutable borrow is exclusive: while it lives, no other reference may exist.
Lifetimes describe how long references stay valid, and the compiler checks them.
The question asks why the borrow checker rejects the program. Let me think about it step by
step. First, find where the value is moved. Then check whether it is used after the move.
A gradient is the vector of partial derivatives of the loss. The learning rate scales each
update. Training a model repeats a forward pass, a backward pass and an optimizer step.
Evaluation measures the loss on examples the model never trained on. A checkpoint saves the
weights, the optimizer state and the scheduler, so training can resume where it stopped.
Photosynthesis turns light, water and carbon dioxide into sugar and oxygen. The sun is a star.
Water boils at one hundred degrees Celsius at sea level. Two plus two is four; three times
three is nine. The answer is yes, because the premise holds and the conclusion follows.
"""


def is_complete(directory: Path) -> bool:
    """True when ``directory`` already holds every file of a saved model."""
    return all((directory / name).is_file() for name in REQUIRED_FILES)


def train_tokenizer(corpus: str):
    """A BPE tokenizer trained on ``corpus``, wrapped for transformers.

    ``▁`` for spaces and byte fallback to the 256 ``<0xNN>`` tokens, as Llama 2's: llama.cpp's
    converter takes such a vocabulary as it is, where a byte-level BPE of its own would need
    its pre-tokenizer's hash to be one the converter knows (``overbrainer export``).
    """
    from tokenizers import Tokenizer, decoders, models, normalizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE(byte_fallback=True, fuse_unk=True))
    # No ``▁`` prepended: chat turns render as they are written (add_prefix_space false).
    tokenizer.normalizer = normalizers.Replace(" ", "\u2581")
    tokenizer.decoder = decoders.Sequence(
        [decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()]
    )
    byte_tokens = [f"<0x{byte:02X}>" for byte in range(256)]
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=[*SPECIAL_TOKENS, *byte_tokens],
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus.splitlines(), trainer=trainer)
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token=None,
        eos_token=EOS,
        pad_token=PAD,
        unk_token=None,
        chat_template=CHAT_TEMPLATE,
        model_max_length=2048,
    )
    wrapped.init_kwargs["add_prefix_space"] = False  # llama.cpp adds no space either
    return wrapped


def make_model(directory: Path, corpus: str) -> None:
    """Write a tiny randomly initialised Llama and its tokenizer into ``directory``."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = train_tokenizer(corpus)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", type=Path, help="where the model goes")
    parser.add_argument(
        "--corpus", type=Path, action="append", default=[],
        help="a text file to train the tokenizer on as well (repeatable)",
    )
    args = parser.parse_args(argv)
    out: Path = args.out_dir
    if is_complete(out):
        print(f"tiny model already in {out}")
        return 0
    corpus = CORPUS + "".join(path.read_text(encoding="utf-8") for path in args.corpus)
    out.parent.mkdir(parents=True, exist_ok=True)
    # Built beside OUT_DIR and moved in file by file, weights last, so an interrupted run
    # never leaves a directory that looks complete.
    with tempfile.TemporaryDirectory(prefix=f".{out.name}-", dir=out.parent) as tmp:
        make_model(Path(tmp), corpus)
        out.mkdir(exist_ok=True)
        for path in sorted(Path(tmp).iterdir(), key=lambda p: p.name == "model.safetensors"):
            shutil.move(str(path), out / path.name)
    print(f"tiny model written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
