"""The real Axolotl's KD trainer on the CPU, on the tiny model: the rows overbrainer writes
and the job's ``kd-align`` stage lines up train, and in Axolotl's own prepared dataset each
trained row is the parent's distribution for the next token (the off-by-one users report).

Run with ``OVERBRAINER_AXOLOTL_VENV=<venv holding bin/axolotl> uv run pytest -m real``.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy
import pytest
from tests.helpers.real import REAL_TIMEOUT

from overbrainer.pipeline.logits_file import LOGPROBS, AnswerLogits, LogitsFile
from overbrainer.train import kd_data
from overbrainer.train.job_setup import kd_module_file

pytestmark = pytest.mark.real

KD = """
[training.kd]
top_k = 4
alpha = 0.9
ce_alpha = 0.1
"""

# The parent's answer tokens as the tiny model's tokenizer and template give them: the
# assistant's turn after the generation prompt, less the template's end of turn.
ANSWER_TOKENS = """
import json, sys
from transformers import AutoTokenizer
tokenizer = AutoTokenizer.from_pretrained(sys.argv[1])
end = tokenizer.apply_chat_template([{"role": "user", "content": ""}], return_dict=False)
end = end[end.index(tokenizer.convert_tokens_to_ids("<|im_end|>")):]
for line in sys.stdin:
    messages = json.loads(line)["messages"]
    prompt = tokenizer.apply_chat_template(messages[:-1], add_generation_prompt=True,
                                           return_dict=False)
    full = tokenizer.apply_chat_template(messages, return_dict=False)
    print(json.dumps(full[len(prompt):len(full) - len(end)]))
"""

# The text of token lists as the tiny model's tokenizer decodes them.
DECODED = """
import json, sys
from transformers import AutoTokenizer
tokenizer = AutoTokenizer.from_pretrained(sys.argv[1])
print(json.dumps([tokenizer.decode(ids) for ids in json.loads(sys.stdin.read())]))
"""

# Axolotl's prepared dataset: each trained row's most likely token, and the token after it.
PREPARED_ROWS = """
import json, sys
from datasets import load_from_disk
from pathlib import Path
found = [p.parent for p in Path(sys.argv[1]).rglob("dataset_info.json")]
rows = []
for example in load_from_disk(str(found[0])):
    ids, targets, mask = example["input_ids"], example["target_token_ids"], example["target_mask"]
    for p in range(len(ids) - 1):
        if mask[p][0]:
            rows.append([targets[p][0], ids[p + 1]])
print(json.dumps(rows))
"""


def venv_python(venv: Path, script: str, *args: str, stdin: str = "") -> str:
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", script, *args], input=stdin, capture_output=True,
        text=True, timeout=REAL_TIMEOUT, check=False,
        env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def keep_parent_logits(real, venv: Path, model: Path) -> None:
    """data/logprobs.bin as a parent with the tiny model's tokenizer would have given it:
    its token most likely, three others after it."""
    store = LogitsFile(real.dir / "data" / LOGPROBS, f"data/{LOGPROBS}")
    for name in ("train.jsonl", "eval.jsonl"):
        text = (real.dir / "data" / name).read_text()
        answers = venv_python(venv, ANSWER_TOKENS, str(model), stdin=text).splitlines()
        for line, tokens in zip(text.splitlines(), answers, strict=True):
            chosen = numpy.array(json.loads(tokens), numpy.uint32)
            ids = numpy.stack([chosen, *(chosen + step for step in (1, 2, 3))], axis=1) % 900
            logprobs = numpy.tile(numpy.array([-0.1, -2.5, -3.0, -4.0], numpy.float32),
                                  (len(chosen), 1))
            store.append(AnswerLogits(json.loads(line)["id"], "tiny", chosen,
                                      ids.astype(numpy.uint32), logprobs))


def test_a_real_kd_run_trains_on_rows_lined_up_with_the_next_token(
    real, run_cli, venv, tiny_model
):
    real.configure_real(extra=KD)
    config = real.dir / "overbrainer.toml"
    # Two evaluations: with one an epoch and one epoch, Axolotl 0.19 evaluates never.
    config.write_text(config.read_text().replace(
        'adapter = "lora"', 'adapter = "lora"\ndistill = "logits"').replace(
        "evals_per_epoch = 1", "evals_per_epoch = 2"))
    keep_parent_logits(real, venv, tiny_model)

    result = run_cli("train")
    run = real.run()
    run_dir = real.dir / "runs" / run["id"]
    log = (run_dir / "job.log").read_text()
    assert result.exit_code == 0, log[-4000:]
    assert run["state"] == "succeeded"
    assert "kd-align: data/train.jsonl: 16 examples line up with the child's tokens" in log
    assert (run_dir / "output" / "adapter_model.safetensors").is_file()
    logs = [e for e in real.metrics(run["id"]) if e["event"] == "log"]
    train = [e for e in logs if "loss" in e]
    evals = [e for e in logs if "eval_loss" in e]
    assert train and evals and all(numpy.isfinite([e["loss"] for e in train]))
    # Axolotl's KD trainer logs its weighted sum as `loss`; overbrainer's plugin logs its two
    # terms beside it, every step and every evaluation, and they make up that sum.
    for entry in train:
        assert entry["kd_loss"] > 0 and entry["ce_loss"] > 0, entry
        assert entry["loss"] == pytest.approx(
            0.9 * entry["kd_loss"] + 0.1 * entry["ce_loss"], rel=1e-4), entry
    for entry in evals:
        assert entry["eval_loss"] == pytest.approx(
            0.9 * entry["eval_kd_loss"] + 0.1 * entry["eval_ce_loss"], rel=1e-4), entry
    states = sorted((run_dir / "output").glob("checkpoint-*/trainer_state.json"))
    assert states, sorted(p.name for p in (run_dir / "output").iterdir())
    history = json.loads(states[-1].read_text())["log_history"]
    assert {key for entry in history for key in entry if "loss" in key} - {"train_loss"} == {
        "loss", "eval_loss", "kd_loss", "ce_loss", "eval_kd_loss", "eval_ce_loss"}
    shown = run_cli("runs", "show", run["id"]).stdout.splitlines()
    assert shown[2].startswith(
        "  loss: loss = 0.9 × KD loss + 0.1 × cross-entropy; KD loss: KL to the parent's top-k")
    terms = next(line for line in shown if line.startswith("  terms: "))
    assert f"KD loss {train[-1]['kd_loss']:.4f}, cross-entropy {train[-1]['ce_loss']:.4f}" in terms
    assert f"eval KD loss {evals[-1]['eval_kd_loss']:.4f}" in terms

    rows = json.loads(venv_python(venv, PREPARED_ROWS, str(run_dir / "prepared")))
    assert rows
    assert [row[0] for row in rows] == [row[1] for row in rows]


def test_the_alignment_check_names_the_example_whose_tokens_the_child_splits_otherwise(
    real, venv, tiny_model, tmp_path
):
    plugin = tmp_path / "plugin"  # the module as the job has it: alone in plugin/
    plugin.mkdir()
    shutil.copyfile(kd_module_file(), plugin / kd_module_file().name)
    keep_parent_logits(real, venv, tiny_model)
    data = real.dir / "data"
    store = LogitsFile(data / LOGPROBS, f"data/{LOGPROBS}")
    third = json.loads((data / "train.jsonl").read_text().splitlines()[2])["id"]
    record = store.read(store.index()[third])
    chosen = record.chosen.copy()
    chosen[5] = (chosen[5] + 1) % 900  # a parent that split its answer otherwise
    store.append(AnswerLogits(third, "tiny", chosen, record.ids, record.logprobs))
    kd_data.write_kd_file(data / "train.jsonl", real.dir / "kd.jsonl", store, "data/train.jsonl")
    before = (real.dir / "kd.jsonl").read_text()

    done = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "overbrainer_kd", str(tiny_model), "kd.jsonl"],
        cwd=real.dir, capture_output=True, text=True, timeout=REAL_TIMEOUT, check=False,
        env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin",
             "PYTHONPATH": str(plugin)},
    )
    assert done.returncode == 3
    # the texts part where the parent's token 5 (its text's first character that differs)
    asked = [record.chosen[:5].tolist(), record.chosen[5:].tolist(), chosen[5:].tolist()]
    ahead, child, parent = json.loads(
        venv_python(venv, DECODED, str(tiny_model), stdin=json.dumps(asked)))
    same = next((n for n, (a, b) in enumerate(zip(child, parent, strict=False)) if a != b),
                min(len(child), len(parent)))
    said = re.fullmatch(
        rf"KDAlignmentError: kd\.jsonl line 3 \(example {third}\): the answer's text parts "
        r"from the parent's at character (\d+) \(byte \d+\): the child's tokenizer spells "
        r"('.*'|\".*\")(?:\.\.\.)?, the parent's tokens ('.*'|\".*\")(?:\.\.\.)? \(another "
        r"tokenizer, or the text changed since\)", done.stderr.splitlines()[-1])
    assert said, done.stderr.splitlines()[-1]
    assert int(said[1]) == len(ahead) + same
    spelt = ast.literal_eval(said[2])
    assert child[same:].startswith(spelt[:len(child) - same])
    assert ast.literal_eval(said[3]) == parent[same:][:20]
    assert (real.dir / "kd.jsonl").read_text() == before  # nothing half rewritten
