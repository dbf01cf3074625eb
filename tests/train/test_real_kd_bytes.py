"""``kd-align``'s byte maps against the real ``transformers``: a byte-level BPE tokenizer
(GPT-2's, as Qwen and Llama-3) and a SentencePiece-style one (Metaspace, byte fallback, as
Llama-2 and Mistral) trained with ``tokenizers`` in the Axolotl venv, loaded as the stage
loads the child's; the bytes it reads from each token's piece spell the encoded text.

Run with ``OVERBRAINER_AXOLOTL_VENV=<venv holding bin/axolotl> uv run pytest -m real``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from tests.helpers.real import REAL_TIMEOUT

from overbrainer.train.job_setup import kd_module_file

pytestmark = pytest.mark.real

TEXTS = ["It is 96.", "ok \U0001f642! caf\u00e9 \u4e2d\u6587", "  two  spaces\nnew line"]

SPELT = """
import json, sys
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast
from overbrainer_kd import child_tokenizer

texts = json.loads(sys.argv[2])
corpus = ["it is 96 and 97, the answer is ok"] * 20
byte_level = Tokenizer(models.BPE())
byte_level.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
byte_level.decoder = decoders.ByteLevel()
metaspace = Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>"))
metaspace.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first")
metaspace.decoder = decoders.Metaspace(prepend_scheme="first")
alphabets = {"byte-level": pre_tokenizers.ByteLevel.alphabet(), "metaspace": []}
bytes_ = {"byte-level": [], "metaspace": [f"<0x{b:02X}>" for b in range(256)]}
said = {}
for name, tokenizer in (("byte-level", byte_level), ("metaspace", metaspace)):
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<unk>", *bytes_[name]],
                                  initial_alphabet=alphabets[name])
    tokenizer.train_from_iterator(corpus, trainer=trainer)
    directory = sys.argv[1] + "/" + name
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="<unk>").save_pretrained(
        directory)
    _, spell, first_space = child_tokenizer(directory)
    encoded = [tokenizer.encode(text).ids for text in texts]
    said[name] = [first_space, [b"".join(spell(ids)).decode() for ids in encoded],
                  [len(ids) for ids in encoded]]
print(json.dumps(said))
"""


def test_the_bytes_of_real_tokenizers_pieces_spell_the_text(venv: Path, tmp_path: Path) -> None:
    plugin = tmp_path / "plugin"  # the module as the job has it: alone in plugin/
    plugin.mkdir()
    shutil.copyfile(kd_module_file(), plugin / kd_module_file().name)
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", SPELT, str(tmp_path), json.dumps(TEXTS)],
        capture_output=True, text=True, timeout=REAL_TIMEOUT, check=False,
        env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(plugin)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    said = json.loads(done.stdout.splitlines()[-1])
    first_space, spelt, counts = said["byte-level"]
    assert not first_space
    assert spelt == TEXTS
    assert counts[1] > len(TEXTS[1].split())  # the emoji and the others split into pieces
    # Metaspace puts a space before a text that has none (and its decoder drops it again):
    # the pieces spell it; align's first_space says it is not the answer's.
    first_space, spelt, _ = said["metaspace"]
    assert first_space
    assert spelt == [text if text.startswith(" ") else " " + text for text in TEXTS]
