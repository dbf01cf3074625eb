"""Stand-ins for the runtime's Python and the llama.cpp toolchain (real processes,
scripted: the real ones are the `real` tier's), and the finished run they export."""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

RUN_ID = "demo-project-20260101-000000"


FAKE_SERVER = Path(__file__).parent / "fake_llama_server.py"


TRAINING = """
[training]
target = "local"
base_model = "models/tiny"
adapter = "lora"

[targets.local]
kind = "local"
venv = "{venv}"
"""


FAKE_CONVERTER = """\
import os, sys, time
if os.path.exists(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "slow")):
    with open("converter.pid", "w") as f:
        f.write(str(os.getpid()))
    time.sleep(120)
args = sys.argv[1:]
if os.path.exists(os.path.join(args[0], "unknown-tokenizer")):
    print("Traceback (most recent call last):")
    print("NotImplementedError: BPE pre-tokenizer was not recognized - update get_vocab_base_pre()")
    sys.exit(1)
out = args[args.index("--outfile") + 1]
outtype = args[args.index("--outtype") + 1]
import gguf  # the toolchain's gguf-py must be on PYTHONPATH
import json
config = os.path.join(args[0], "tokenizer_config.json")
seen = json.load(open(config)).get("chat_template") if os.path.exists(config) else None
with open("converter.json", "w") as f:
    json.dump({"argv": args, "chat_template": seen}, f)
with open(out, "wb") as f:
    f.write(b"GGUF " + f"converted {outtype} from {args[0]}".encode())
print("converted")
"""


FAKE_LLAMA_CPP = """\
import ctypes, shutil
__version__ = "0.3.16"
class _Params(ctypes.Structure):
    _fields_ = [("ftype", ctypes.c_int)]
def llama_model_quantize_default_params():
    return _Params()
LLAMA_FTYPE_MOSTLY_Q4_K_M = 15
LLAMA_FTYPE_MOSTLY_Q5_K_M = 17
LLAMA_FTYPE_MOSTLY_Q6_K = 18
LLAMA_FTYPE_MOSTLY_Q8_0 = 7
def llama_supports_gpu_offload():
    return False
def llama_model_quantize(source, dest, params):
    with open(source, "rb") as f, open(dest, "wb") as g:
        g.write(f.read() + b" quantized %d" % params._obj.ftype)
    return 0

# The smaller the type, the lower its logit for the token the merged model chose.
PENALTY = {15: 1.5, 17: 0.8, 18: 0.3, 7: 0.05}
VOCAB = 8

class _Row(list):
    def tolist(self):
        return list(self)

class Llama:
    def __init__(self, path, n_ctx=0, logits_all=False, verbose=True, n_gpu_layers=0):
        import re
        with open(path, "rb") as f:
            found = re.search(rb"quantized (\\d+)", f.read())
        self.penalty = PENALTY.get(int(found.group(1)), 0.0) if found else 0.0
        self.scores = []
    def reset(self):
        self.scores = []
    def eval(self, tokens):
        following = list(tokens[1:]) + [0]
        self.scores = [
            _Row([2.0 - self.penalty if j == t else 0.0 for j in range(VOCAB)]) for t in following
        ]
"""


# Stand-ins for torch and transformers: the merged model answers 4 tokens, each with logit 2
# over a vocabulary of 8 (the GGUF stand-in above scores the same tokens).
FAKE_TORCH = """\
float32 = "float32"
class cuda:
    @staticmethod
    def is_available():
        return False
class no_grad:
    def __enter__(self):
        return self
    def __exit__(self, *exc):
        return False
import math
class Scalar(float):
    def item(self):
        return float(self)
class Tensor:
    def __init__(self, data):
        self.data = data
    def __getitem__(self, index):
        found = self.data[index]
        return Tensor(found) if isinstance(found, list) else Scalar(found)
    def log_softmax(self, dim):
        top = max(self.data)
        total = top + math.log(sum(math.exp(x - top) for x in self.data))
        return Tensor([x - total for x in self.data])
    def to(self, device):
        return self
    def float(self):
        return self
    def tolist(self):
        return self.data
def tensor(data):
    return Tensor(data)
"""


FAKE_TRANSFORMERS = """\
from types import SimpleNamespace
import torch
VOCAB = 8
class AutoTokenizer:
    @classmethod
    def from_pretrained(cls, path):
        return cls()
    def apply_chat_template(self, messages, add_generation_prompt=False, tokenize=False):
        text = "".join(m["content"] for m in messages)
        return [1] + [ord(c) % VOCAB for c in text[:6]]
class AutoModelForCausalLM:
    @classmethod
    def from_pretrained(cls, path, torch_dtype=None):
        return cls()
    def to(self, device):
        return self
    def eval(self):
        return self
    def generate(self, ids, max_new_tokens=1, **options):
        prompt = ids.tolist()[0]
        tokens = [(len(prompt) + i) % VOCAB for i in range(min(4, max_new_tokens))]
        logits = [torch.tensor([[2.0 if j == t else 0.0 for j in range(VOCAB)]]) for t in tokens]
        return SimpleNamespace(sequences=torch.tensor([prompt + tokens]), logits=logits)
"""


def write_python(path: Path, pythonpath: Path) -> None:
    """A ``python`` at ``path`` that runs this one with ``pythonpath`` (the stand-ins) first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\nPYTHONPATH={pythonpath} exec {sys.executable} "$@"\n')
    path.chmod(0o755)


def make_toolchain(toolchain: Path) -> Path:
    """A llama.cpp toolchain directory of stand-ins (``OVERBRAINER_LLAMA_CPP``)."""
    (toolchain / "llama.cpp" / "gguf-py" / "gguf").mkdir(parents=True)
    (toolchain / "llama.cpp" / "gguf-py" / "gguf" / "__init__.py").write_text("")
    (toolchain / "llama.cpp" / "convert_hf_to_gguf.py").write_text(FAKE_CONVERTER)
    (toolchain / "site" / "llama_cpp").mkdir(parents=True)
    (toolchain / "site" / "llama_cpp" / "__init__.py").write_text(FAKE_LLAMA_CPP)
    (toolchain / "site" / "llama_cpp" / "server").mkdir()
    (toolchain / "site" / "llama_cpp" / "server" / "__init__.py").write_text("")
    shutil.copyfile(FAKE_SERVER, toolchain / "site" / "llama_cpp" / "server" / "__main__.py")
    write_python(toolchain / "bin" / "python", toolchain / "site")
    return toolchain


@dataclass
class Finished:
    """The project, its run and the stand-ins."""

    dir: Path
    run_id: str
    venv: Path
    toolchain: Path

    @property
    def run_dir(self) -> Path:
        return self.dir / "runs" / self.run_id

    def record(self, **changes: object) -> None:
        path = self.run_dir / "run.json"
        data = json.loads(path.read_text())
        data.update(changes)
        path.write_text(json.dumps(data))
