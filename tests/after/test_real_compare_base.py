"""Did distillation work, for real: the quickstart trained on the CPU (the real Axolotl),
exported (the real llama.cpp), then `compare --against base`: the child and its random-init
base model each served by llama.cpp's own server, judged by the loopback provider.

The judge is scripted but not rigged: shown the parent's answer as a reference
(``[compare] reference = true``), it prefers the answer whose words overlap the reference's
more (F1 of the two word sets), a tie when equal.

The quickstart's own settings (a random-init 2-layer model, 43 short examples, 4 epochs,
eval loss about 5.5) leave the child answering greedily with newlines alone (0 of 5 won
against the base, 2026-12-05). The test trains its copy 40 epochs at a learning rate of 0.003
(train loss about 0.4, eval loss about 5.4: it memorises, about a minute here): the child
then writes short answers in the parent's words ("The final price is $96, ...") where the
base writes random pieces of the JSON its tokenizer was trained on, and wins 3 of 5
(measured 2026-12-06, under llama.cpp). The test asserts the child wins at least one
question, and that the report's line agrees with the interval; it does not assert that
distillation `helped`: with 5 eval questions the interval clears 0.5 only at 5 of 5, and
the child's answers are still mostly wrong (a tokenizer trained on the messages' text
instead of the raw JSON measured worse: 2 of 5).

Run with ``OVERBRAINER_AXOLOTL_VENV=... OVERBRAINER_LLAMA_CPP=<toolchain dir> uv run pytest
-m real tests/after/test_real_compare_base.py``.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from tests.after.test_real_export import toolchain  # noqa: F401 - the llama.cpp toolchain
from tests.fixtures.real import REAL_TIMEOUT

from fake_provider import openai_completion
from overbrainer.cli import cli

pytestmark = pytest.mark.real

QUICKSTART = Path(__file__).parents[2] / "examples" / "quickstart"
JUDGE_PROMPT = "You are judging two answers"
TRAINING = {"epochs": 40, "learning_rate": 0.003, "micro_batch_size": 8, "evals_per_epoch": 1}
"""The test's training settings, in place of the quickstart's."""


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def overlap(answer: str, reference: str) -> float:
    """F1 of the answer's words against the reference's."""
    found, wanted = words(answer), words(reference)
    common = len(found & wanted)
    if not common:
        return 0.0
    precision, recall = common / len(found), common / len(wanted)
    return 2 * precision * recall / (precision + recall)


def judge(seen):
    prompt = seen.prompt
    reference = prompt.split("it is not one of the two):\n", 1)[1].split("\n\nAnswer A:\n", 1)[0]
    answer_a = prompt.split("\n\nAnswer A:\n", 1)[1].split("\n\nAnswer B:\n", 1)[0]
    answer_b = prompt.split("\n\nAnswer B:\n", 1)[1].split("\n\nWhich answer", 1)[0]
    a, b = overlap(answer_a, reference), overlap(answer_b, reference)
    verdict = "A" if a > b else "B" if b > a else "tie"
    return openai_completion(json.dumps({"verdict": verdict, "reason": f"overlap {a:.2f}/{b:.2f}"}))


@pytest.mark.timeout(4 * REAL_TIMEOUT)  # train, export, make the base's GGUF, serve both
def test_compare_against_base_serves_the_quickstarts_child_and_its_base_and_says_if_it_helped(
    tmp_path,
    venv,
    toolchain,  # noqa: F811 - the fixture imported above
    provider,
    monkeypatch,
):
    project = tmp_path / "quickstart"
    shutil.copytree(
        QUICKSTART,
        project,
        ignore=shutil.ignore_patterns(
            "runs", "models", ".overbrainer", "train.jsonl", "eval.jsonl"
        ),
    )
    # The quickstart's 4 epochs leave the child answering with newlines alone: 40 epochs
    # of 5 steps (8 examples a step) at a higher learning rate teach it to write the
    # answers' words (train loss about 0.4) in about a minute. The random base fills
    # max_tokens: 256 keeps its answers short.
    config = project / "overbrainer.toml"
    text = config.read_text()
    for setting, value in TRAINING.items():
        text, found = re.subn(rf"(?m)^{setting} = .*$", f"{setting} = {value}", text)
        assert found == 1, setting
    config.write_text(text + "\n[compare]\nreference = true\nmax_tokens = 256\n")
    monkeypatch.setenv("OVERBRAINER_TARGETS__LOCAL__VENV", str(venv))
    monkeypatch.setenv("OVERBRAINER_LLAMA_CPP", str(toolchain))
    monkeypatch.setenv("OVERBRAINER_PROVIDERS__MAIN__BASE_URL", provider.url)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    provider.on(lambda seen: JUDGE_PROMPT in seen.prompt, judge, times=None)

    def invoke(*args: str):
        result = CliRunner().invoke(cli, ["-C", str(project), *args], catch_exceptions=False)
        assert result.exit_code == 0, result.stderr
        return result

    invoke("run")
    run_id = json.loads(next((project / "runs").glob("*/run.json")).read_text())["id"]
    invoke("export", run_id, "--verify", "0")
    result = invoke("compare", "--against", "base")
    [directory] = (project / "runs" / run_id).glob("compares/compare_*")
    data = json.loads((directory / "compare.json").read_text())
    [entry] = data["against"]
    summary = entry["summary"]
    print(result.stdout)
    for question in data["questions"]:
        base = question["against"]["base"]
        print(f"{question['id']}: {base['verdict']} ({base['reason']})\n  child: "
              f"{(question['child'] or '')[:300]!r}\n  base: {(base['answer'] or '')[:300]!r}")
    # The base was served as the child was: its GGUF made from models/tiny-llama by
    # llama.cpp's converter, quantized to the child's type, kept; it answered every question.
    [kept] = (project / ".overbrainer" / "bases").glob("tiny-llama-*/base.json")
    record = json.loads(kept.read_text())
    assert record["quantize"] == data["quantize"]
    assert (kept.parent / record["file"]).read_bytes()[:4] == b"GGUF"
    assert all(q["against"]["base"]["answer"] for q in data["questions"])
    assert "llama" in (directory / "server.log").read_text().lower()
    # Every question judged, in both orders, with the parent's answer as the reference.
    assert entry["reference"] is True and summary["unparsed"] == 0
    assert summary["wins"] + summary["ties"] + summary["losses"] == summary["questions"] == 5
    # The trained child writes words that the reference shares, where the random base's
    # do less: it wins some questions (the quickstart's own 4 epochs won none).
    assert summary["wins"] >= 1
    low, high = summary["intervals"]["win_or_tie"]
    assert 0 <= low <= summary["win_or_tie"] <= high <= 1
    first, said = result.stdout.splitlines()[:2]
    assert first.startswith(
        f"compare: against its base model: win-or-tie {summary['win_or_tie']:.1%} (95% interval "
        f"{low:.1%}-{high:.1%}; length-controlled "
    )
    verdict = (
        "helped" if low > 0.5 else "did not help" if high < 0.5 else "did not clearly help"
    )
    assert said.startswith(f"compare: distillation {verdict}: the child wins or ties ")
    # A second compare reuses the base's GGUF and its answers: nothing made, nothing asked.
    again = invoke("compare", "--against", "base")
    assert "making a GGUF" not in again.stderr
    assert (
        "compare: the base model answered 0 questions; 5 answers kept from earlier compares "
        "reused"
    ) in again.stderr
