"""Did distillation work, for real: the quickstart trained on the CPU (the real Axolotl),
exported (the real llama.cpp), then `compare --against base`: the child and its random-init
base model each served by llama.cpp's own server, judged by the loopback provider.

The judge is scripted but not rigged: shown the parent's answer as a reference
(``[compare] reference = true``), it prefers the answer whose words overlap the reference's
more (F1 of the two word sets), a tie when equal.

The quickstart's own settings (a random-init 2-layer model, 43 short examples, 4 epochs,
eval loss about 5.5) leave the child answering greedily with newlines alone (0 of 5 won
against the base, 2026-12-05). The test trains its copy 40 epochs at a learning rate of 0.003
(train loss about 0.4: it memorises, about a minute here) with Axolotl's ``chatml`` template,
the quickstart's template without the reasoning, so the child learns the answers alone
(trained with the reasoning, it won 3 of 5: one answer was empty, its ``<think>`` never
closed within the token limit). It is asked the eval split's 5 questions and an ``[eval]
files`` set of 20 held-out questions in the quickstart's style, each with the answer its
parent would give as the reference. The child writes pieces of the training answers it
memorised, in the parent's phrasing ("The selling price is $162.", "The film ends at 10:02
pm."), none of them right; the base writes random pieces of the JSON its tokenizer was
trained on. Measured 2026-12-06 under llama.cpp: 3 of the split's 5 won (none empty now) and
18 of the 20 held-out, 21 of 25: win-or-tie 84% (interval 65%-94%), "distillation helped".
The test asserts that: the interval above 50% and the report's line saying so. What it shows
is that the child speaks like its parent where its base does not, not that it answers
correctly; 5 questions alone could not show it (the interval clears 50% only at 5 of 5).

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
from tests.helpers.fake_provider import openai_completion
from tests.helpers.real import REAL_TIMEOUT

from overbrainer.cli import cli

pytestmark = pytest.mark.real

QUICKSTART = Path(__file__).parents[2] / "examples" / "quickstart"
JUDGE_PROMPT = "You are judging two answers"
TRAINING = {
    "epochs": 40,
    "learning_rate": 0.003,
    "micro_batch_size": 8,
    "evals_per_epoch": 1,
    "chat_template": '"chatml"',
}
"""The test's training settings, in place of the quickstart's: Axolotl's ChatML is the
quickstart's template without the reasoning, so the child is trained on the answers alone."""
HELD_OUT = [
    ("What is 20% of 150?", "20% of 150 is 30."),
    ("What is 35% of 60?", "35% of 60 is 21."),
    ("24 is 40% of what number?", "24 is 40% of 60."),
    ("A coat priced at $120 is on sale for 30% off. What is the sale price?",
     "The sale price is $84."),
    ("After a 25% discount, a lamp costs $45. What was the original price?",
     "The original price was $60."),
    ("A shop buys a chair for $80 and adds a 50% markup. What is the selling price?",
     "The selling price is $120."),
    ("A salary of $30,000 rises by 10%. What is the new salary?",
     "The new salary is $33,000."),
    ("The price of a phone drops from $400 to $300. What is the percentage decrease?",
     "The price decreased by 25%."),
    ("A village's population grows from 2,000 to 2,500. What is the percentage increase?",
     "The population increased by 25%."),
    ("How much simple interest does $1,000 earn at 5% per year over 2 years?",
     "It earns $100 of interest, for a total of $1,100."),
    ("In a club, 12 out of 48 members are children. What percentage of the members are "
     "children?", "25% of the members are children."),
    ("A rope is 3.5 m long. How long is it in centimetres?", "The rope is 350 cm long."),
    ("A bag of rice weighs 2.5 kg. How many grams is that?", "The bag weighs 2,500 g."),
    ("A cyclist rides at 36 km/h. What is that speed in metres per second?",
     "The cyclist is moving at 10 metres per second."),
    ("How many seconds are there in 3 hours?", "3 hours is 10,800 seconds."),
    ("The weather forecast says 10 °C. What is that in degrees Fahrenheit?", "10 °C is 50 °F."),
    ("A room is kept at 25 °C. What is that temperature in kelvin?", "25 °C is 298.15 K."),
    ("A film lasts 1 hour 50 minutes and starts at 8:20 pm. At what time does it end?",
     "The film ends at 10:10 pm."),
    ("A runner covers 3 km on a 250 m track. How many laps is that?",
     "The runner covers 12 laps of 250 m."),
    ("A parcel weighs 4 kg. What is that in pounds, to one decimal place?",
     "The parcel weighs about 8.8 pounds."),
]
"""Held-out questions in the quickstart's style, with the answers its parent would give (the
judge's reference): an `[eval] files` set, never trained on."""


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
    toolchain,
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
    (project / "evals").mkdir()
    (project / "evals" / "held_out.jsonl").write_text(
        "".join(json.dumps({"question": q, "answer": a}) + "\n" for q, a in HELD_OUT)
    )
    config.write_text(
        text + '\n[eval]\nfiles = ["evals/*.jsonl"]\n'
        "\n[compare]\nreference = true\nmax_tokens = 256\n"
    )
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
    asked = 5 + len(HELD_OUT)  # the eval split's 5, then the held-out set
    assert summary["wins"] + summary["ties"] + summary["losses"] == summary["questions"] == asked
    # The trained child writes the parent's kind of sentence, which shares more words with
    # the reference than the random base's text does: over 25 questions the interval of its
    # win-or-tie rate is above 50%, and the report says distillation helped.
    low, high = summary["intervals"]["win_or_tie"]
    assert 0.5 < low <= summary["win_or_tie"] <= high <= 1
    first, said = result.stdout.splitlines()[:2]
    assert first.startswith(
        f"compare: against its base model: win-or-tie {summary['win_or_tie']:.1%} (95% interval "
        f"{low:.1%}-{high:.1%}; length-controlled "
    )
    assert said == (
        f"compare: distillation helped: the child wins or ties {summary['win_or_tie']:.1%} "
        f"against its base model (95% interval {low:.1%}-{high:.1%}, above 50%)"
    )
    # A second compare reuses the base's GGUF and its answers: nothing made, nothing asked.
    again = invoke("compare", "--against", "base")
    assert "making a GGUF" not in again.stderr
    assert (
        f"compare: the base model answered 0 questions; {asked} answers kept from earlier "
        "compares reused"
    ) in again.stderr
