"""``mode = "online"``: the answers stage of a project distilling logits online asks its
served parent for answers only; the logprobs come during training."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner
from tests.helpers.kd_data import write_tokenizer
from tests.helpers.pipeline_data import lines, seed_questions

from overbrainer.cli import cli

ONLINE = """
[training]
target = "box"
base_model = "{child}"
adapter = "lora"
distill = "logits"

[training.kd]
mode = "online"
top_k = 3
"""


def test_the_answers_stage_keeps_no_logprobs_online(served_dir: Path, tmp_path: Path):
    child = write_tokenizer(tmp_path / "child")
    config = served_dir / "overbrainer.toml"
    config.write_text(config.read_text() + ONLINE.format(child=child))
    seed_questions(served_dir, {("ownership", "borrowing"): ["What is a borrow?", "Why move?"]})

    result = CliRunner().invoke(cli, ["-C", str(served_dir), "answers"], catch_exceptions=False)

    assert result.exit_code == 0, result.output
    answers = lines(served_dir, "answers.jsonl")
    assert len(answers) == 2
    assert all("served answer to:" in a["messages"][-1]["content"] for a in answers)
    # offline, these replies (no logprobs) would be excluded as no_logprobs
    assert [a["meta"].get("excluded") for a in answers] == [None, None]
    assert not (served_dir / "data" / "logprobs.bin").exists()
