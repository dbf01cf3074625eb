"""Logit distillation end to end, for real: the quickstart's tiny parent trained on the CPU
(the real Axolotl), exported to GGUF (the real llama.cpp toolchain), served by llama.cpp
through the project's own serving (``[providers.NAME.serve]``), then a second project whose
child is the quickstart's tiny base (the parent's tokenizer): ``answers`` keeps the served
parent's top-k logprobs, ``split`` carries them, ``train`` runs Axolotl's KD trainer.

The parent, trained 12 epochs, answers every question alike ("The final price is $96."),
and llama.cpp writes its "96" as one token where the tokenizer encodes the text as "9", "6":
``kd-align`` lines such answers up on their text (``job/overbrainer_kd.py``). Two Axolotl
runs and an export: 75 s on 2 cores at load average 2, 3 min at 6 (2026-12-06).

Run with ``OVERBRAINER_AXOLOTL_VENV=... OVERBRAINER_LLAMA_CPP=<toolchain dir> uv run pytest
-m real tests/train/test_real_kd_chain.py``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
from pathlib import Path

import numpy
import pytest
from click.testing import CliRunner
from tests.helpers.real import REAL_TIMEOUT
from tests.helpers.serving import serving

from overbrainer.cli import cli
from overbrainer.pipeline.logits_file import LOGPROBS, LogitsFile
from overbrainer.pipeline.vocab import load_vocabulary

pytestmark = pytest.mark.real

QUICKSTART = Path(__file__).parents[2] / "examples" / "quickstart"
PARENT_TRAINING = {
    "epochs": 12,
    "learning_rate": 0.003,
    "micro_batch_size": 8,
    "evals_per_epoch": 1,
    "saves_per_epoch": 1,
    "chat_template": '"chatml"',
}
"""The parent's settings in place of the quickstart's: enough epochs at a high rate that it
writes answer-like text and ends its turn (the quickstart's 4 epochs leave it writing
newlines), with ChatML (the answers alone, no reasoning to wait through)."""
TOP_K = 4
CHILD = """
[providers.teacher]
protocol = "openai"

[providers.teacher.serve]
target = "box"
engine = "llama.cpp"
model = "{gguf}"
args = ["--n_ctx", "512"]

[targets.box]
kind = "local"
venv = "{toolchain}"

[training.kd]
top_k = {top_k}
alpha = 0.9
ce_alpha = 0.1
"""


def copy_quickstart(project: Path, *more_ignored: str) -> Path:
    shutil.copytree(
        QUICKSTART,
        project,
        ignore=shutil.ignore_patterns(
            "runs", "models", ".overbrainer", "train.jsonl", "eval.jsonl", *more_ignored
        ),
    )
    return project


def set_settings(config: Path, settings: dict[str, str | int | float]) -> str:
    """The project's overbrainer.toml with each ``settings`` line's value replaced."""
    text = config.read_text()
    for setting, value in settings.items():
        text, found = re.subn(rf"(?m)^{setting} = .*$", f"{setting} = {value}", text)
        assert found == 1, setting
    return text


def invoke(project: Path, *args: str):
    result = CliRunner().invoke(cli, ["-C", str(project), *args], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr[-4000:]
    return result


@pytest.mark.timeout(4 * REAL_TIMEOUT)  # train, export, serve and answer, train again
def test_a_trained_parent_served_by_llama_cpp_teaches_its_logits_to_a_child_of_its_tokenizer(
    tmp_path,
    venv,
    toolchain,
    monkeypatch,
):
    monkeypatch.setenv("OVERBRAINER_TARGETS__LOCAL__VENV", str(venv))
    monkeypatch.setenv("OVERBRAINER_LLAMA_CPP", str(toolchain))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("AXOLOTL_DO_NOT_TRACK", "1")
    monkeypatch.setenv("DO_NOT_TRACK", "1")

    # The parent: the quickstart trained (its setup makes models/tiny-llama), then exported.
    parent = copy_quickstart(tmp_path / "parent")
    config = parent / "overbrainer.toml"
    config.write_text(set_settings(config, PARENT_TRAINING))
    invoke(parent, "run")
    parent_run = json.loads(next((parent / "runs").glob("*/run.json")).read_text())["id"]
    invoke(parent, "export", parent_run, "--verify", "0")
    [export] = (parent / "runs" / parent_run).glob("exports/*/export.json")
    gguf = parent / "runs" / parent_run / json.loads(export.read_text())["file"]
    base = parent / "models" / "tiny-llama"

    # The child's project: the quickstart's questions, its parent the GGUF served on this
    # machine, its base the quickstart's untrained tiny model with its own chat template
    # (the one `kd-align` checks the parent's tokens against).
    child = copy_quickstart(tmp_path / "child", "answers.jsonl")
    config = child / "overbrainer.toml"
    text = set_settings(config, {
        "base_model": f'"{base}"', "epochs": 1, "micro_batch_size": 8, "evals_per_epoch": 1,
    })  # fmt: skip
    parent_role = 'provider = "main"\nmodel = "deepseek/deepseek-r1"\nreasoning = true'
    assert parent_role in text
    text = text.replace(parent_role, f'provider = "teacher"\nmodel = "{gguf}"\n'
                        "max_tokens = 64\ntemperature = 0")  # fmt: skip
    text = text.replace('adapter = "full"', 'adapter = "full"\ndistill = "logits"')
    text = re.sub(r"(?m)^setup = .*$", "", text)
    config.write_text(text + CHILD.format(gguf=gguf, toolchain=toolchain, top_k=TOP_K))

    try:
        result = invoke(child, "answers")
    finally:
        left = serving(gguf)
        for pid in left:
            os.kill(pid, signal.SIGKILL)
    assert left == [], "the parent's engine outlived `answers`"
    assert "providers.teacher: llama.cpp answers (" in result.stderr
    answers = [json.loads(line) for line in (child / "data" / "answers.jsonl").open()]
    kept_ids = {a["id"] for a in answers if a["meta"]["excluded"] is None}
    assert kept_ids, [a["meta"] for a in answers]
    store = LogitsFile(child / "data" / LOGPROBS, f"data/{LOGPROBS}")
    index = store.index()
    assert set(index) == kept_ids
    vocabulary = load_vocabulary(str(base), "training.base_model")
    for answer_id in kept_ids:
        record = store.read(index[answer_id])
        assert len(record.chosen) and record.ids.shape == (len(record.chosen), TOP_K)
        assert int(record.ids.max()) < vocabulary.size
        assert numpy.all(record.logprobs <= 0)

    invoke(child, "split")
    invoke(child, "train")
    [record] = (child / "runs").glob("*/run.json")
    run, run_dir = json.loads(record.read_text()), record.parent
    assert run["state"] == "succeeded", (run_dir / "job.log").read_text()[-4000:]
    log = (run_dir / "job.log").read_text()
    assert re.search(r"kd-align: data/train\.jsonl: \d+ examples line up with the child's tokens",
                     log)
    assert (run_dir / "output" / "model.safetensors").is_file()
    axolotl = (run_dir / "axolotl.yaml").read_text()
    assert "kd_trainer: true" in axolotl and "kd_alpha: 0.9" in axolotl
    shown = invoke(child, "runs", "show", run["id"]).stdout.splitlines()
    assert "kd.alpha 0.9" in shown[1] and "kd.ce_alpha 0.1" in shown[1]
    assert shown[2].startswith(
        "  loss: loss = 0.9 × KD loss + 0.1 × cross-entropy; KD loss: KL to the parent's top-k")
    assert any(line.startswith("  terms: KD loss ") and "cross-entropy" in line
               for line in shown), shown
    assert json.loads(invoke(child, "runs", "show", run["id"], "--json").stdout)[0][
        "loss_kind"] == "kd"
    [line] = [line for line in invoke(child, "runs", "ls").stdout.splitlines()
              if line.startswith(run["id"])]
    assert re.search(r"  \d+\.\d{4} \(KD\)", line), line  # its LOSS, the KD trainer's
