"""Export a run's model to one GGUF file, on the target, with the runtime's Python.

Usage: python export_gguf.py MODEL_DIR AXOLOTL_YAML TYPE|AUTO OUT_FILE TOOLCHAIN_DIR [NAME]
    [--verify PROMPTS.jsonl --verify-count N] [--max-drift X]

Run in the export's job directory. The HF model is ``MODEL_DIR/merged`` when there is one,
else the adapter merged into its base (peft, on the CPU), else ``MODEL_DIR`` itself as a full
model (a base model given as a Hugging Face id is found in the target's Hub cache, downloaded
there unless ``HF_HUB_OFFLINE``). Its chat template loses transformers' training-only
``{% generation %}`` tags (a copy in ``export-work/``: the model itself is not changed), which
llama.cpp's server and Ollama cannot read. llama.cpp's converter writes it (``general.name`` =
NAME; ``--outtype auto``, or f16/bf16 straight), then ``llama_model_quantize`` of the
toolchain's ``llama_cpp`` quantizes it. With ``--verify``, the merged model (transformers)
answers the first N prompts greedily and the GGUF (llama.cpp) is scored on the same tokens:
token agreement and the mean absolute log-probability difference; past ``--max-drift`` the
export fails, and ``AUTO`` takes the smallest of the ladder within it. OUT_FILE holds
``{TYPE}`` for the type; the result is written as ``.part`` and renamed last, and
``export-result.json`` says what was chosen. ``export-work/`` and any ``.part`` are removed
on exit, failures included. Errors end with one line ``error: MESSAGE`` on stderr and exit 1.
Stdlib only: the work that needs torch runs in child processes.
"""

import argparse
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


FIND = """
import os, sys
from huggingface_hub import snapshot_download
try:
    print(snapshot_download(sys.argv[1]))
except Exception as error:
    if os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0"):
        print("it is not in the Hub cache and HF_HUB_OFFLINE is set")
    else:
        print(type(error).__name__ + ": " + (str(error).splitlines() or [""])[0][:300])
    sys.exit(1)
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


def hub_model(model):
    """The directory of ``model``: itself, or a Hugging Face id's snapshot on this machine."""
    model = os.path.expanduser(model)
    if os.path.exists(model) or model.startswith(("/", ".")):
        return model
    print(f"finding {model} in the Hugging Face cache", flush=True)
    done = subprocess.run(
        [sys.executable, "-c", FIND, model], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        check=False,
    )  # fmt: skip
    lines = [line for line in done.stdout.decode("utf-8", "replace").splitlines() if line.strip()]
    if done.returncode != 0 or not lines or not os.path.isdir(lines[-1]):
        last = lines[-1] if lines else f"exit {done.returncode}"
        raise Failure(f"{model} is not a directory, and as a Hugging Face id: {last}")
    return lines[-1]


def hf_model(model, config):
    """The directory of the HF model to convert, merging an adapter first."""
    model = hub_model(model)
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
    if not os.path.exists(model):
        raise Failure(f"{model} does not exist")
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


LADDER = ("Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0")
"""What ``--quantize auto`` tries, smallest first."""
VERIFY_TOKENS = 32
"""Tokens the merged model generates for each verification prompt."""
RESULT = "export-result.json"
PARTS: list[str] = []
"""The ``.part`` files written so far: removed on exit unless renamed."""

HF_SIDE = """
import json, sys
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
model_dir, prompts, count, new_tokens, out = sys.argv[1:6]
tokenizer = AutoTokenizer.from_pretrained(model_dir)
model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32)
device = "cuda" if torch.cuda.is_available() else "cpu"
model = model.to(device).eval()
results = []
with open(prompts, encoding="utf-8") as file:
    records = [json.loads(line) for line in file if line.strip()][: int(count)]
for record in records:
    ids = tokenizer.apply_chat_template(
        record["messages"], add_generation_prompt=True, tokenize=True
    )
    if not isinstance(ids, list):  # a BatchEncoding (transformers 5)
        ids = list(ids["input_ids"])
    with torch.no_grad():
        done = model.generate(
            torch.tensor([ids]).to(device), max_new_tokens=int(new_tokens), do_sample=False,
            return_dict_in_generate=True, output_logits=True,
        )
    tokens = done.sequences[0][len(ids):].tolist()
    logprobs = [
        step[0].float().log_softmax(-1)[token].item() for step, token in zip(done.logits, tokens)
    ]
    results.append({"id": record.get("id"), "prompt": ids, "tokens": tokens, "logprobs": logprobs})
with open(out, "w", encoding="utf-8") as file:
    json.dump(results, file)
"""

GGUF_SIDE = """
import json, sys
import numpy
from llama_cpp import Llama
gguf, reference, out = sys.argv[1:4]
with open(reference, encoding="utf-8") as file:
    results = json.load(file)
n_ctx = max([len(r["prompt"]) + len(r["tokens"]) for r in results] + [16]) + 16
model = Llama(gguf, n_ctx=n_ctx, logits_all=True, verbose=False, n_gpu_layers=-1)
agree = total = 0
drift = 0.0
for result in results:
    tokens = result["tokens"]
    if not tokens:
        continue
    model.reset()
    model.eval(result["prompt"] + tokens)
    start = len(result["prompt"]) - 1
    rows = numpy.asarray(model.scores[start : start + len(tokens)], dtype=numpy.float64)
    top = rows.max(axis=1, keepdims=True)
    logprobs = rows - top - numpy.log(numpy.exp(rows - top).sum(axis=1, keepdims=True))
    chosen = logprobs[numpy.arange(len(tokens)), tokens]
    agree += int((rows.argmax(axis=1) == numpy.asarray(tokens)).sum())
    drift += float(numpy.abs(chosen - numpy.asarray(result["logprobs"])).sum())
    total += len(tokens)
with open(out, "w", encoding="utf-8") as file:
    json.dump({"tokens": total, "agree": agree, "drift": drift}, file)
"""


def reference_answers(source, prompts, count):
    """The merged model's greedy answers and their log-probs (transformers)."""
    out = os.path.join(WORK, "reference.json")
    print(f"verifying: the merged model answers {count} eval prompts (transformers)", flush=True)
    run(
        [sys.executable, "-c", HF_SIDE, source, prompts, str(count), str(VERIFY_TOKENS), out],
        "the merged model's verification answers",
    )
    with open(out, encoding="utf-8") as file:
        return out, len(json.load(file))


def verify(tool_python, gguf, reference, prompts, kind):
    """How the GGUF follows the merged model's answers: token agreement and the mean
    absolute log-probability difference of each answer token (llama.cpp)."""
    out = os.path.join(WORK, f"verify-{kind}.json")
    print(f"verifying: {kind} under llama.cpp", flush=True)
    run([tool_python, "-c", GGUF_SIDE, gguf, reference, out], f"llama.cpp's verification of {kind}")
    with open(out, encoding="utf-8") as file:
        found = json.load(file)
    tokens = found["tokens"]
    return {
        "quantize": kind,
        "prompts": prompts,
        "tokens": tokens,
        "token_agreement": round(found["agree"] / tokens, 6) if tokens else None,
        "mean_logprob_drift": round(found["drift"] / tokens, 6) if tokens else None,
    }


def within(check, max_drift):
    drift = check["mean_logprob_drift"]
    return max_drift is None or (drift is not None and drift <= max_drift)


def quantize_to(tool_python, source, kind, out):
    print(f"quantizing to {kind}", flush=True)
    run([tool_python, "-c", QUANTIZE, source, out, kind], "llama.cpp's quantize")


def choose(options, tool_python, converted, reference, prompts):
    """The type to deliver, its ``.part`` and its check: the asked one, or the smallest of
    the ladder within ``--max-drift``; a type past it fails."""
    kind, out = options.kind, options.out
    straight = kind in ("F16", "BF16")
    first = kind if kind != "AUTO" else LADDER[0]
    convert_to = converted
    tried = []
    chosen = None
    for candidate in LADDER if kind == "AUTO" else (first,):
        part = out.replace("{TYPE}", candidate) + ".part"
        if not straight:
            PARTS.append(part)
            quantize_to(tool_python, convert_to, candidate, part)
        check = verify(tool_python, part, reference, prompts, candidate) if reference else None
        if check is not None:
            tried.append(check)
            print(f"verified {candidate}: {json.dumps(check)}", flush=True)
        if check is None or within(check, options.max_drift):
            chosen = (candidate, part, check)
            break
        if kind == "AUTO":
            os.remove(part)
    if chosen is None:
        figures = ", ".join(f"{c['quantize']} {c['mean_logprob_drift']:.4f}" for c in tried)
        if kind == "AUTO":
            raise Failure(
                f"no type of the ladder is within --max-drift {options.max_drift} (mean "
                f"log-prob drift: {figures}): export F16, or allow more drift"
            )
        check = tried[-1]
        raise Failure(
            f"the {kind} GGUF drifts from the merged model by "
            f"{check['mean_logprob_drift']:.4f} nats a token on average (token agreement "
            f"{check['token_agreement']:.1%}), past "
            f"--max-drift {options.max_drift}: export a larger type (Q8_0, F16) or allow more"
        )
    return (*chosen, tried)


def export(options):
    """Convert (and quantize, and verify) the run's model; ``options.out`` holds ``{TYPE}``
    where the type goes (``--quantize auto`` decides it)."""
    model, config, kind, out = options.model, options.config, options.kind, options.out
    toolchain = os.path.expanduser(options.toolchain)
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
    if kind in ("F16", "BF16"):
        convert_to, outtype = out.replace("{TYPE}", kind) + ".part", kind.lower()
        PARTS.append(convert_to)
    else:
        convert_to, outtype = os.path.join(WORK, "model.gguf"), "auto"
    print(f"converting {source} to GGUF ({outtype})", flush=True)
    named = ["--model-name", options.name] if options.name else []
    run(
        [sys.executable, converter, source, "--outfile", convert_to, "--outtype", outtype, *named],
        "llama.cpp's converter",
        env=env,
    )
    reference, prompts = None, 0
    if options.verify:
        reference, prompts = reference_answers(source, options.verify, options.verify_count)
    candidate, part, check, tried = choose(options, tool_python, convert_to, reference, prompts)
    final = out.replace("{TYPE}", candidate)
    os.replace(part, final)
    result = {"gguf": final, "quantize": candidate, "verify": check, "tried": tried}
    with open(RESULT, "w", encoding="utf-8") as file:
        json.dump(result, file)
    print(json.dumps({"gguf": final}), flush=True)


def _terminated(signum, frame):
    # SIGTERM (a cancel from overbrainer) unwinds like an error: the cleanup runs.
    sys.exit(128 + signum)


def arguments(argv):
    parser = argparse.ArgumentParser(prog="export_gguf.py")
    for name in ("model", "config", "kind", "out", "toolchain"):
        parser.add_argument(name)
    parser.add_argument("name", nargs="?")
    parser.add_argument("--verify", help="a JSONL file of {id, messages}: the eval prompts")
    parser.add_argument("--verify-count", type=int, default=8)
    parser.add_argument("--max-drift", type=float)
    return parser.parse_args(argv)


def main():
    signal.signal(signal.SIGTERM, _terminated)
    options = arguments(sys.argv[1:])
    try:
        export(options)
    except Failure as failure:
        sys.stderr.write(f"error: {failure}\n")
        return 1
    finally:
        shutil.rmtree(WORK, ignore_errors=True)
        for part in PARTS:
            if os.path.exists(part):
                os.remove(part)
    return 0


if __name__ == "__main__":
    sys.exit(main())
