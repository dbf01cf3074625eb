"""Issue 41: ``distill = "text"`` against ``distill = "logits"`` on a tiny parent and child.

A tiny parent (the quickstart's tiny Llama and its tokenizer, trained with plain torch in the
Axolotl venv on the quickstart's answers) and a tiny child (the same model untrained: the
SAME tokenizer). The parent's top-k for every answer token is computed by the parent itself
(the logprobs a server scoring the given text would give) and kept in ``data/logprobs.bin``
through overbrainer's own ``LogitsFile``. Then, on the same questions for the same number of
steps, ``overbrainer train`` runs the real Axolotl on the CPU twice, ``distill = "text"`` and
``distill = "logits"``, and each child is scored on held-out examples it never trained on
(the parent trained on every answer, those too: it is the model the child should become):

1. agreement: how often its most likely next token is the parent's, at every answer place;
2. KL(parent ‖ child) over the parent's top-k (both renormalised over those k tokens);
3. the bytes of ``logprobs.bin`` a kept answer token costs;
4. the KD run's seconds a training step against the text run's (the median interval
   between its metrics' logged steps: the start-up and the evaluation are not in it).

The untrained child is scored too (where both start from). Run from the repository root::

    OVERBRAINER_AXOLOTL_VENV=~/.cache/overbrainer/axolotl-0.19.0 \\
        nice -n 19 uv run python benchmarks/kd.py [--epochs 1] [--top-k 8] [--parent-steps 1200]

Scale up with ``--epochs``, ``--top-k``, ``--parent-steps`` (its last loss is printed; by
2,000 steps it has memorised the answers, a mean loss near 0.3, and its top-k is nearly its
text), ``--held-out``; ``--keep`` keeps the work directory (the models, both runs).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "examples" / "quickstart"
BOOT = "from overbrainer.cli import main; import sys; sys.argv[0] = 'overbrainer'; main()"

CONFIG = """\
[project]
name = "kd-bench"

[[topics]]
name = "quickstart"
subtopics = 1
questions_per_subtopic = 1

[providers.main]
protocol = "openai"

[roles.generator]
provider = "main"
model = "gen-model"

[roles.parent]
provider = "main"
model = "tiny-parent"
reasoning = true

[training]
target = "local"
base_model = "{model}"
adapter = "{adapter}"
learning_rate = {lr}
distill = "{distill}"
chat_template = "tokenizer_default"
epochs = {epochs}
sequence_len = 512
sample_packing = false
micro_batch_size = 1
gradient_accumulation_steps = 1
evals_per_epoch = 1
saves_per_epoch = 0
seed = 7

[training.kd]
top_k = {top_k}

[targets.local]
kind = "local"
venv = "{venv}"
device = "cpu"
"""

# Runs in the Axolotl venv: the answer tokens of a chat as the child's template renders them
# (the assistant's turn after the generation prompt, less the end of turn; what the job's
# kd-align stage checks), shared by the two scripts below.
TOKENS = """
import json, sys, torch
from transformers import AutoModelForCausalLM, AutoTokenizer

def answer(tokenizer, messages):
    end = tokenizer.apply_chat_template([{"role": "user", "content": ""}], return_dict=False)
    end = end[end.index(tokenizer.convert_tokens_to_ids("<|im_end|>")):]
    prompt = tokenizer.apply_chat_template(messages[:-1], add_generation_prompt=True,
                                           return_dict=False)
    full = tokenizer.apply_chat_template(messages, return_dict=False)
    return full, len(prompt), len(full) - len(end)

def answer_logprobs(model, full, start, stop):
    with torch.no_grad():
        logits = model(torch.tensor([full])).logits[0].float()
    return torch.log_softmax(logits[start - 1:stop - 1], dim=-1)
"""

# The parent: trained on every chat of the quickstart, then its top-k at each answer token.
PARENT = (
    TOKENS
    + """
model_dir, steps, top_k, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
torch.manual_seed(0)
tokenizer = AutoTokenizer.from_pretrained(model_dir)
model = AutoModelForCausalLM.from_pretrained(model_dir)
chats = [json.loads(line)["messages"] for line in open(sys.argv[5])]
rendered = [tokenizer.apply_chat_template(m, return_dict=False) for m in chats]
optimizer = torch.optim.AdamW(model.parameters(), lr=float(sys.argv[6]))
model.train()
for step in range(steps):
    ids = torch.tensor([rendered[step % len(rendered)]])
    loss = model(ids, labels=ids).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
print(f"parent: last loss {loss.item():.3f} after {steps} steps", file=sys.stderr)
model.eval()
model.save_pretrained(out)
tokenizer.save_pretrained(out)
with open(out + "/topk.jsonl", "w") as sink:
    for line in open(sys.argv[5]):
        record = json.loads(line)
        full, start, stop = answer(tokenizer, record["messages"])
        values, ids = answer_logprobs(model, full, start, stop).topk(top_k, dim=-1)
        sink.write(json.dumps({"id": record["id"], "chosen": full[start:stop],
                               "ids": ids.tolist(), "logprobs": values.tolist()}) + "\\n")
"""
)

# A child against the parent on the held-out chats: agreement of the most likely next token
# and KL over the parent's top-k, at every answer place.
SCORE = (
    TOKENS
    + """
parent_dir, top_k, held_out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
tokenizer = AutoTokenizer.from_pretrained(parent_dir)
parent = AutoModelForCausalLM.from_pretrained(parent_dir).eval()
scores = {}
for name, child_dir in zip(sys.argv[4::2], sys.argv[5::2]):
    child = AutoModelForCausalLM.from_pretrained(child_dir).eval()
    agree = places = 0
    kl = 0.0
    for line in open(held_out):
        full, start, stop = answer(tokenizer, json.loads(line)["messages"])
        p = answer_logprobs(parent, full, start, stop)
        q = answer_logprobs(child, full, start, stop)
        agree += int((p.argmax(-1) == q.argmax(-1)).sum())
        places += p.shape[0]
        top, ids = p.topk(top_k, dim=-1)
        top = torch.log_softmax(top, -1)
        mine = torch.log_softmax(q.gather(-1, ids), -1)
        kl += float((top.exp() * (top - mine)).sum())
    scores[name] = {"agreement": agree / places, "kl": kl / places, "places": places}
print(json.dumps(scores))
"""
)


def venv_python(venv: Path, script: str, *args: str, env: dict[str, str]) -> str:
    """``script`` run by the Axolotl venv's Python; a failure stops the benchmark with its
    error."""
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", script, *args],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    sys.stderr.write(done.stderr[-500:])
    return done.stdout


def keep_logprobs(topk: Path, data: Path, vocab: str) -> tuple[int, int]:
    """``data/logprobs.bin`` from the parent's top-k: its size and the answer tokens in it."""
    from overbrainer.pipeline.logits_file import LOGPROBS, AnswerLogits, LogitsFile

    store = LogitsFile(data / LOGPROBS, f"data/{LOGPROBS}")
    tokens = 0
    for line in topk.read_text().splitlines():
        row = json.loads(line)
        chosen = numpy.array(row["chosen"], numpy.uint32)
        store.append(AnswerLogits(
            row["id"], vocab, chosen, numpy.array(row["ids"], numpy.uint32),
            numpy.array(row["logprobs"], numpy.float32),
        ))  # fmt: skip
        tokens += len(chosen)
    return (data / LOGPROBS).stat().st_size, tokens


def train(project: Path, env: dict[str, str]) -> tuple[Path, float, int]:
    """``overbrainer train`` in ``project``: the run's directory, its seconds a step (the
    median interval of its logged steps) and its steps."""
    done = subprocess.run(
        [sys.executable, "-c", BOOT, "-C", str(project), "train"],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    run_dir = next((project / "runs").glob("*/run.json")).parent
    if done.returncode != 0:
        log = run_dir / "job.log"
        raise SystemExit(
            done.stdout + done.stderr + (log.read_text()[-4000:] if log.exists() else "")
        )
    events = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    logs = [e for e in events if e["event"] == "log" and "loss" in e and "step" in e]
    # The median of the steps' intervals: a burst of the machine's other work weighs on a
    # few of them, not on the figure.
    intervals = [
        (b["time"] - a["time"]) / (b["step"] - a["step"])
        for a, b in itertools.pairwise(logs)
        if b["step"] > a["step"]
    ]
    return run_dir, statistics.median(intervals), logs[-1]["step"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=1, help="the child's epochs, both runs")
    parser.add_argument("--parent-steps", type=int, default=1200)
    parser.add_argument("--parent-lr", type=float, default=0.003)
    parser.add_argument("--top-k", type=int, default=8)
    parser.add_argument("--held-out", type=int, default=8, help="answers never trained on")
    parser.add_argument("--eval", type=int, default=4, help="Axolotl's eval split")
    parser.add_argument("--adapter", default="full", choices=["full", "lora"])
    parser.add_argument("--lr", type=float, default=0.002)
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    venv_name = os.environ.get("OVERBRAINER_AXOLOTL_VENV")
    if not venv_name:
        raise SystemExit("set OVERBRAINER_AXOLOTL_VENV to an Axolotl 0.19 venv")
    venv = Path(venv_name).expanduser()

    from overbrainer.pipeline.vocab import parse_tokenizer

    work = Path(tempfile.mkdtemp(prefix="kd-bench-"))
    # OVERBRAINER_* variables are settings to overbrainer: the venv's is not one.
    kept = {
        name: value for name, value in os.environ.items() if not name.startswith("OVERBRAINER_")
    }
    env = {**kept, "AXOLOTL_DO_NOT_TRACK": "1", "DO_NOT_TRACK": "1",
           "HF_HUB_OFFLINE": "1", "HF_HOME": str(work / "hf")}  # fmt: skip
    try:
        answers = (QUICKSTART / "data" / "answers.jsonl").read_text().splitlines()
        held_out, rest = answers[-args.held_out :], answers[: -args.held_out]
        evals, trains = rest[-args.eval :], rest[: -args.eval]
        every = work / "all.jsonl"
        every.write_text("\n".join(answers) + "\n")
        (work / "held_out.jsonl").write_text("\n".join(held_out) + "\n")

        child = work / "child"
        subprocess.run(
            [str(venv / "bin" / "python"), str(QUICKSTART / "tiny_model.py"), str(child),
             "--corpus", str(QUICKSTART / "data" / "answers.jsonl")],
            check=True, env=env, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        parent = work / "parent"
        venv_python(venv, PARENT, str(child), str(args.parent_steps), str(args.top_k),
                    str(parent), str(every), str(args.parent_lr), env=env)  # fmt: skip
        vocab = parse_tokenizer((child / "tokenizer.json").read_bytes(), "child").fingerprint

        results: dict[str, tuple[Path, float, int]] = {}
        bytes_kept = tokens_kept = 0
        for distill in ("text", "logits"):
            project = work / distill
            data = project / "data"
            data.mkdir(parents=True)
            (data / "train.jsonl").write_text("\n".join(trains) + "\n")
            (data / "eval.jsonl").write_text("\n".join(evals) + "\n")
            (project / "overbrainer.toml").write_text(CONFIG.format(
                model=child, adapter=args.adapter, lr=args.lr, distill=distill,
                epochs=args.epochs, top_k=args.top_k, venv=venv,
            ))  # fmt: skip
            if distill == "logits":
                bytes_kept, tokens_kept = keep_logprobs(parent / "topk.jsonl", data, vocab)
            print(f"training the child, distill = {distill!r}...", file=sys.stderr)
            results[distill] = train(project, env)

        children = ["untrained", str(child)]
        for distill, (run_dir, _, _) in results.items():
            children += [distill, str(run_dir / "output")]
        scores = json.loads(venv_python(
            venv, SCORE, str(parent), str(args.top_k), str(work / "held_out.jsonl"), *children,
            env=env,
        ))  # fmt: skip
    finally:
        if args.keep:
            print(f"kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)

    text_step = results["text"][1]
    print(f"tiny pair: parent trained {args.parent_steps} steps; child {args.adapter}, "
          f"{len(trains)} train / {len(evals)} eval examples, {args.epochs} epoch(s), "
          f"top_k = {args.top_k}; held out: {len(held_out)} answers, "
          f"{scores['untrained']['places']} answer places")  # fmt: skip
    print(f"{'child':<10} {'agreement':>10} {'KL top-k':>9} {'s/step':>8} {'steps':>6}")
    for name in ("untrained", "text", "logits"):
        step, steps = (
            ("", "") if name == "untrained" else (f"{results[name][1]:.3f}", str(results[name][2]))
        )
        print(f"{name:<10} {scores[name]['agreement']:>10.3f} {scores[name]['kl']:>9.3f} "
              f"{step:>8} {steps:>6}")  # fmt: skip
    text, logits = scores["text"], scores["logits"]
    print(f"logits / text: agreement {logits['agreement'] / text['agreement']:.2f}x, "
          f"KL {logits['kl'] / text['kl']:.2f}x, step time "
          f"{results['logits'][1] / text_step:.2f}x")  # fmt: skip
    print(
        f"logprobs.bin: {bytes_kept} bytes for {tokens_kept} answer tokens = "
        f"{bytes_kept / tokens_kept:.1f} bytes a token at k = {args.top_k}"
    )


if __name__ == "__main__":
    main()
