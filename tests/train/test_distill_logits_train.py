"""``distill = "logits"``: `train` writes Axolotl's KD dataset and plugin settings, and the
job lines the rows up on the child's tokens (its ``kd-align`` stage) before Axolotl trains."""

from __future__ import annotations

import json
from pathlib import Path

import numpy
import pytest
import yaml

from overbrainer.config.model import Training
from overbrainer.job.target.overbrainer_kd import (
    ABSENT_LOGPROB,
    KDAlignmentError,
    align,
    align_file,
)
from overbrainer.pipeline.logits_file import LOGPROBS, AnswerLogits, LogitsFile
from overbrainer.train import kd_data
from overbrainer.train.axolotl import axolotl_config
from overbrainer.train.inputs import Inputs, differences, inputs_of

TOP_K = 3
KD = """
[training.kd]
top_k = 3
alpha = 0.7
ce_alpha = 0.2
temperature = 2.0
beta = 0.5
"""


def logits_of(answer_id: str, chosen: list[int], k: int = TOP_K) -> AnswerLogits:
    """The parent's rows for ``chosen``: the chosen token first, one place short of k."""
    n = len(chosen)
    ids = numpy.zeros((n, k), numpy.uint32)
    logprobs = numpy.full((n, k), -numpy.inf, numpy.float32)
    for place, token in enumerate(chosen):
        ids[place, : k - 1] = [token, *(token + 1 + j for j in range(k - 2))]
        logprobs[place, : k - 1] = [-0.25 * (j + 1) for j in range(k - 1)]
    return AnswerLogits(answer_id, "vocab", numpy.array(chosen, numpy.uint32), ids, logprobs)


def keep_logits(project: Path, skip: str = "") -> None:
    """data/logprobs.bin with a record for each example of train.jsonl and eval.jsonl."""
    store = LogitsFile(project / "data" / LOGPROBS, f"data/{LOGPROBS}")
    for name in ("train.jsonl", "eval.jsonl"):
        for line in (project / "data" / name).read_text().splitlines():
            answer_id = json.loads(line)["id"]
            if answer_id != skip:
                store.append(logits_of(answer_id, [10, 11, 12, 13]))


def logits_project(trainer) -> None:
    config = trainer.dir / "overbrainer.toml"
    config.write_text(
        config.read_text().replace('adapter = "lora"', 'adapter = "lora"\ndistill = "logits"')
        + KD
    )


def test_train_writes_the_kd_dataset_and_settings_and_aligns_before_axolotl(trainer, run_cli):
    logits_project(trainer)
    keep_logits(trainer.dir)
    result = run_cli("train")
    run = trainer.run()
    run_dir = trainer.dir / "runs" / run["id"]
    config = yaml.safe_load((run_dir / "axolotl.yaml").read_text())
    assert config["plugins"] == [
        "overbrainer_metrics.OverbrainerMetricsPlugin", "axolotl.integrations.kd.KDPlugin"]
    assert {key: config[key] for key in config if key.startswith("kd_")} == {
        "kd_trainer": True, "kd_alpha": 0.7, "kd_ce_alpha": 0.2, "kd_temperature": 2.0,
        "kd_beta": 0.5,
    }
    for dataset in [*config["datasets"], *config["test_datasets"]]:
        assert dataset["type"] == "axolotl.integrations.kd.chat_template"
    lines = (run_dir / "data/train.jsonl").read_text().splitlines()
    examples = [json.loads(line) for line in lines]
    assert len(examples) == 10
    for example in examples:
        assert example["kd_chosen"] == [10, 11, 12, 13]
        assert example["target_token_ids"][0] == [10, 11, 0]
        # the missing third candidate: finite, so Axolotl's loss stays a number
        assert example["logprobs"][0] == [-0.25, -0.5, ABSENT_LOGPROB]
    job = json.loads((run_dir / "job.json").read_text())
    assert [stage["name"] for stage in job["stages"]] == ["kd-align", "train"]
    assert job["stages"][0]["argv"] == [
        "python3", "-m", "overbrainer_kd", "Qwen/Qwen3-0.6B", "data/train.jsonl", "data/eval.jsonl"]
    assert (run_dir / "plugin" / "overbrainer_kd.py").is_file()
    # The fake venv has no transformers: the stage says so, and Axolotl never starts.
    assert result.exit_code == 1
    assert run["state"] == "failed"
    cause = "KDAlignmentError: cannot load the child's tokenizer: No module named 'transformers'"
    assert result.stderr.splitlines()[-1] == (
        f"error: the job exited with code 2: {cause} (see runs/{run['id']}/job.log)")
    assert "stage kd-align exited with code 2" in (run_dir / "job.log").read_text()
    assert not (run_dir / "fake_axolotl.calls").exists()
    # runs show reads the KD keys train wrote, and says what the run's loss will be.
    shown = run_cli("runs", "show", run["id"]).stdout.splitlines()
    assert "kd.alpha 0.7, kd.ce_alpha 0.2, kd.temperature 2.0, kd.beta 0.5" in shown[1]
    assert shown[2] == (
        "  loss: loss = 0.7 × KD loss + 0.2 × cross-entropy; KD loss: JSD (beta 0.5) with the "
        "parent's top-k at temperature 2.0 (scaled by its square)"
    )


def test_an_example_without_logprobs_is_refused_before_any_run(trainer, run_cli):
    logits_project(trainer)
    first = json.loads((trainer.dir / "data/train.jsonl").read_text().splitlines()[2])["id"]
    keep_logits(trainer.dir, skip=first)
    result = run_cli("train")
    assert result.exit_code == 1
    assert result.stderr == (
        f"error: data/train.jsonl line 3: no logprobs of the parent for its answer '{first}' "
        f"in data/{LOGPROBS}: run `overbrainer split` again (it keeps only answers with "
        "logprobs), or `overbrainer answers --force` to ask for them\n"
    )
    assert trainer.runs() == []


def test_another_chat_template_is_refused_with_logits(trainer, run_cli):
    logits_project(trainer)
    keep_logits(trainer.dir)
    config = trainer.dir / "overbrainer.toml"
    config.write_text(config.read_text().replace(
        'adapter = "lora"', 'adapter = "lora"\nchat_template = "chatml"'))
    result = run_cli("train")
    assert result.exit_code == 1
    assert result.stderr == (
        'error: training.distill = "logits" trains with the child\'s own chat template (its '
        "answer's tokens are checked against the parent's with it); training.chat_template "
        'asks for another: remove it, or set training.distill = "text"\n'
    )
    assert trainer.runs() == []


# The alignment itself, with a chat template as a tokenizer renders one: ChatML's turns.

IM_START, IM_END, NEWLINE = 1, 2, 3
ASSISTANT = 4


def chatml(messages: list[dict], opened: bool) -> list[int]:
    """Token ids of ``messages``: each turn ``<|im_start|> ROLE content <|im_end|> \\n``, the
    content one token a character (its code point + 100)."""
    ids: list[int] = []
    for message in messages:
        role = ASSISTANT if message["role"] == "assistant" else 5
        ids += [IM_START, role, *(ord(c) + 100 for c in message["content"]), IM_END, NEWLINE]
    if opened:
        ids += [IM_START, ASSISTANT]
    return ids


def kd_example(answer: str, chosen: list[int]) -> dict:
    rows = kd_data.kd_rows(logits_of("a1", chosen))
    return {"id": "a1", "messages": [
        {"role": "user", "content": "Hi?"}, {"role": "assistant", "content": answer}], **rows}


def test_the_rows_end_with_the_templates_end_of_turn_one_row_after_each_token():
    example = kd_example("ok", [ord("o") + 100, ord("k") + 100])
    aligned, learnt = align(example, chatml, "data/train.jsonl line 1")
    assert learnt is None  # the parent's own tokens
    # Axolotl puts the last row on the last token; row p teaches token p+1. So: the parent's
    # row for "o" on the token before it, "k"'s on "o", <|im_end|>'s on "k", "\n"'s on
    # <|im_end|>, and a last one on "\n" (not trained: ChatML's "\n" has no label).
    tokens = chatml(example["messages"], False)
    rows = aligned["target_token_ids"]
    firsts = [row[0] for row in rows]
    assert firsts == [*example["kd_chosen"], IM_END, NEWLINE, NEWLINE]
    start = len(tokens) - len(rows)
    for position in range(start, len(tokens) - 1):
        assert rows[position - start][0] == tokens[position + 1]
    assert aligned["logprobs"][-3] == [0.0, ABSENT_LOGPROB, ABSENT_LOGPROB]
    assert len(set(rows[-3])) == TOP_K
    # aligning again (a resumed run's copies) gives the same rows
    assert align(aligned, chatml, "data/train.jsonl line 1") == (aligned, None)


def test_a_token_the_child_splits_otherwise_names_the_example_and_its_place():
    example = kd_example("ok", [ord("o") + 100, 999])
    with pytest.raises(KDAlignmentError) as raised:
        align(example, chatml, "data/train.jsonl line 4")
    assert str(raised.value) == (
        "data/train.jsonl line 4 (example a1): the answer's token 1 is 207 in the child's "
        "tokenizer, 999 in the parent's (another tokenizer, or the text changed since)"
    )


OK = 1000
"""A token of the parent's vocabulary spelling "ok", which the child's tokenizer (one token a
character) never writes: a parent's sampler may pick a text's tokens otherwise than encoding
the text does (llama.cpp's "96" where the tokenizer encodes "9", "6")."""


def spell(ids: list[int]) -> list[bytes]:
    """The bytes of ``chatml``'s tokens and of ``OK``."""
    spelled = {OK: "ok", IM_START: "<|im_start|>", IM_END: "<|im_end|>", NEWLINE: "\n"}
    return [(spelled.get(token) or chr(token - 100)).encode() for token in ids]


def test_an_answer_the_parent_split_otherwise_is_lined_up_on_its_text(tmp_path):
    example = kd_example("okay", [OK, ord("a") + 100, ord("y") + 100])
    parent = example["target_token_ids"]
    aligned, learnt = align(example, chatml, "data/train.jsonl line 1", spell)
    assert learnt == 1
    rows, logprobs = aligned["target_token_ids"], aligned["logprobs"]
    # The child's "o" and "a", "y" start where the parent's tokens did: the parent's rows
    # for what follows the same text; its "k" starts inside the parent's "ok": learnt from
    # the text alone (its own token for sure). Then the template's end as always.
    assert rows[0] == parent[0] and rows[2:4] == parent[1:3]
    assert rows[1][0] == ord("k") + 100 and logprobs[1] == [0.0, ABSENT_LOGPROB, ABSENT_LOGPROB]
    assert [row[0] for row in rows[4:]] == [IM_END, NEWLINE, NEWLINE]
    assert aligned["kd_chosen"] == [ord(c) + 100 for c in "okay"]
    assert align(aligned, chatml, "data/train.jsonl line 1", spell) == (aligned, None)
    data = tmp_path / "train.jsonl"
    data.write_text(json.dumps(example) + "\n" + json.dumps(kd_example("ok", [OK])) + "\n")
    assert align_file(str(data), chatml, spell) == (
        f"kd-align: {data}: 2 examples line up with the child's tokens (2 that the parent "
        "split otherwise lined up on their text, 2 tokens learnt from the text alone)"
    )


def test_a_parent_answer_of_another_text_is_refused_even_lined_up_on_the_text():
    example = kd_example("okay", [OK, ord("a") + 100, ord("h") + 100])
    with pytest.raises(KDAlignmentError) as raised:
        align(example, chatml, "data/train.jsonl line 2", spell)
    assert str(raised.value) == (
        "data/train.jsonl line 2 (example a1): the answer's text parts from the parent's at "
        "character 3 (byte 3): the child's tokenizer spells 'y<|im_end|>\\n', the parent's "
        "tokens 'h' (another tokenizer, or the text changed since)"
    )


# The inputs fingerprint and `runs diff`: the KD settings and the parent's rows count.

def inputs(project: Path, **kd: float) -> Inputs:
    training = Training(target="local", base_model="Qwen/Qwen3-0.6B", adapter="lora",
                        distill="logits" if kd else "text", kd=kd)
    config = axolotl_config(training, has_eval=True)
    logits = project / "data" / LOGPROBS if kd else None
    return inputs_of(config, project / "data", "Qwen/Qwen3-0.6B", device="gpu", merge=False,
                     logits=logits)  # fmt: skip


def test_runs_diff_names_the_kd_settings_as_training_kd_does(trainer):
    keep_logits(trainer.dir)
    text, logits = inputs(trainer.dir), inputs(trainer.dir, alpha=1.0, temperature=1.0)
    assert differences(text, logits) == ["distill: text -> logits"]
    softer = inputs(trainer.dir, alpha=0.5, temperature=2.0)
    assert softer.fingerprint != logits.fingerprint
    assert differences(logits, softer) == ["kd.alpha: 1.0 -> 0.5", "kd.temperature: 1.0 -> 2.0"]


def test_the_fingerprint_counts_the_examples_rows_not_the_rest_of_logprobs_bin(trainer):
    keep_logits(trainer.dir)
    before = inputs(trainer.dir, alpha=1.0)
    store = LogitsFile(trainer.dir / "data" / LOGPROBS, f"data/{LOGPROBS}")
    store.append(logits_of("an-answer-split-left-out", [1, 2]))
    assert inputs(trainer.dir, alpha=1.0).fingerprint == before.fingerprint
    first = json.loads((trainer.dir / "data/train.jsonl").read_text().splitlines()[0])["id"]
    store.append(logits_of(first, [10, 11, 12, 14]))  # `answers --force` asked again
    after = inputs(trainer.dir, alpha=1.0)
    assert after.fingerprint != before.fingerprint
    assert differences(before, after) == [
        "logprobs: the parent's logprobs of the examples changed"]
