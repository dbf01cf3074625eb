"""Export a run's model to one GGUF file, on the target, with the runtime's Python.

Usage: python export_gguf.py MODEL_DIR AXOLOTL_YAML TYPE OUT_FILE TOOLCHAIN_DIR [NAME]

Run in the export's job directory. The HF model is ``MODEL_DIR/merged`` when there is one,
else the adapter merged into its base (peft, on the CPU), else ``MODEL_DIR`` itself as a full
model. Its chat template loses transformers' training-only ``{% generation %}`` tags (a copy
in ``export-work/``: the model itself is not changed), which llama.cpp's server and Ollama
cannot read. llama.cpp's converter writes it (``general.name`` = NAME; ``--outtype auto``,
or f16/bf16 straight), then ``llama_model_quantize`` of the toolchain's ``llama_cpp``
quantizes it. The result is written as ``OUT_FILE.part`` and renamed last; ``export-work/``
and any ``.part`` are removed on exit, failures included. Errors end with one line ``error:
MESSAGE`` on stderr and exit 1. Stdlib only: the work that needs torch runs in child
processes.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys

WORK = "export-work"
TEMPLATE_FILES = ("tokenizer_config.json", "chat_template.jinja")
# overbrainer.after.chat_template holds the same (this script cannot import it).
TAG = re.compile(r"\{%(-?)\s*(end)?generation\s*(-?)%\}")
CONVERTER_MODULES = ("torch", "numpy", "transformers", "yaml")

QUANTIZE = """
import ctypes, sys, llama_cpp
source, dest, kind = sys.argv[1:4]
params = llama_cpp.llama_model_quantize_default_params()
params.ftype = getattr(llama_cpp, "LLAMA_FTYPE_MOSTLY_" + kind)
code = llama_cpp.llama_model_quantize(source.encode(), dest.encode(), ctypes.byref(params))
sys.exit(1 if code else 0)
"""

MERGE = """
import json, sys, yaml
from pathlib import Path
import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM, AutoTokenizer
adapter, config_path, out = sys.argv[1:4]
config = yaml.safe_load(Path(config_path).read_text()) or {}
adapter_config = json.loads((Path(adapter) / "adapter_config.json").read_text())
base = config.get("base_model") or adapter_config.get("base_model_name_or_path")
model = AutoModelForCausalLM.from_pretrained(base, torch_dtype=torch.float32, device_map="cpu")
model = PeftModel.from_pretrained(model, adapter).merge_and_unload()
model.save_pretrained(out, safe_serialization=True)
tokenizer_dir = adapter if (Path(adapter) / "tokenizer_config.json").exists() else base
AutoTokenizer.from_pretrained(tokenizer_dir).save_pretrained(out)
"""


class Failure(Exception):
    pass


def run(argv, what, env=None):
    done = subprocess.run(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False
    )
    output = done.stdout.decode("utf-8", "replace")
    sys.stdout.write(output)
    sys.stdout.flush()
    if done.returncode != 0:
        lines = [line for line in output.strip().splitlines() if line.strip()]
        raise Failure(f"{what} failed: {lines[-1] if lines else 'exit ' + str(done.returncode)}")


def is_file(*parts):
    return os.path.isfile(os.path.join(*parts))


def hf_model(model, config):
    """The directory of the HF model to convert, merging an adapter first."""
    merged = os.path.join(model, "merged")
    if is_file(merged, "config.json"):
        return merged
    if is_file(model, "adapter_config.json"):
        out = os.path.join(WORK, "merged")
        print(f"merging the adapter of {model} into its base model", flush=True)
        run([sys.executable, "-c", MERGE, model, config, out], "merging the adapter")
        return out
    if is_file(model, "config.json"):
        return model
    raise Failure(f"{model} holds neither an adapter nor a model")


def without_training_tags(template):
    def replace(match):
        left, end, right = match.groups()
        if not left and not right:
            return ""
        return "{%" + left + (" endif " if end else " if true ") + right + "%}"

    return TAG.sub(replace, template)


def _json_without_tags(text):
    config = json.loads(text)
    template = config.get("chat_template")
    if isinstance(template, str):
        config["chat_template"] = without_training_tags(template)
    elif isinstance(template, list):
        for item in template:
            if isinstance(item, dict) and isinstance(item.get("template"), str):
                item["template"] = without_training_tags(item["template"])
    return json.dumps(config, indent=2, ensure_ascii=False)


def inference_view(source):
    """``source``, or a directory of links to its files with the chat template's training
    tags removed, when it has them."""
    changed = {}
    for name in TEMPLATE_FILES:
        path = os.path.join(source, name)
        if not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8") as file:
            text = file.read()
        if TAG.search(text) is None:
            continue
        changed[name] = (
            _json_without_tags(text) if name.endswith(".json") else (without_training_tags(text))
        )
    if not changed:
        return source
    print("removing the {% generation %} tags from the chat template", flush=True)
    view = os.path.join(WORK, "inference-model")
    os.makedirs(view, exist_ok=True)
    for name in os.listdir(source):
        if name not in changed:
            os.symlink(os.path.abspath(os.path.join(source, name)), os.path.join(view, name))
    for name, text in changed.items():
        with open(os.path.join(view, name), "w", encoding="utf-8") as file:
            file.write(text)
    return view


def check_modules():
    probe = (
        "import importlib.util, sys; "
        "print(' '.join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, *CONVERTER_MODULES], stdout=subprocess.PIPE, check=True
    )
    missing = done.stdout.decode().split()
    if missing:
        raise Failure(
            "llama.cpp's convert_hf_to_gguf.py needs the Python module "
            f"{', '.join(missing)}, missing from the job's environment"
        )


def export(model, config, kind, out, toolchain, name=None):  # noqa: PLR0917 - the argv
    converter = os.path.join(toolchain, "llama.cpp", "convert_hf_to_gguf.py")
    tool_python = os.path.join(toolchain, "bin", "python")
    if not os.path.isfile(converter) or not os.path.isfile(tool_python):
        raise Failure(
            f"the llama.cpp toolchain is not in {toolchain}: install it with "
            "install_llama_cpp.sh (see docs/after-training.md)"
        )
    os.makedirs(WORK, exist_ok=True)
    source = inference_view(hf_model(model, config))
    check_modules()
    env = dict(os.environ)
    gguf_py = os.path.join(toolchain, "llama.cpp", "gguf-py")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [gguf_py, env.get("PYTHONPATH")]))
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    part = out + ".part"
    if kind in ("F16", "BF16"):
        convert_to, outtype = part, kind.lower()
    else:
        convert_to, outtype = os.path.join(WORK, "model.gguf"), "auto"
    print(f"converting {source} to GGUF ({outtype})", flush=True)
    named = ["--model-name", name] if name else []
    run(
        [sys.executable, converter, source, "--outfile", convert_to, "--outtype", outtype, *named],
        "llama.cpp's converter",
        env=env,
    )
    if convert_to != part:
        print(f"quantizing to {kind}", flush=True)
        run([tool_python, "-c", QUANTIZE, convert_to, part, kind], "llama.cpp's quantize")
    os.replace(part, out)
    print(json.dumps({"gguf": out}), flush=True)


def _terminated(signum, frame):
    # SIGTERM (a cancel from overbrainer) unwinds like an error: the cleanup runs.
    sys.exit(128 + signum)


def main():
    signal.signal(signal.SIGTERM, _terminated)
    model, config, kind, out, toolchain = sys.argv[1:6]
    name = sys.argv[6] if len(sys.argv) > 6 else None
    try:
        export(model, config, kind, out, os.path.expanduser(toolchain), name)
    except Failure as failure:
        sys.stderr.write(f"error: {failure}\n")
        return 1
    finally:
        shutil.rmtree(WORK, ignore_errors=True)
        if os.path.exists(out + ".part"):
            os.remove(out + ".part")
    return 0


if __name__ == "__main__":
    sys.exit(main())
