"""A stage against a served parent keeps the engine's batch full: as many requests at once
as the engine holds (vLLM's ``--max-num-seqs``, ``serve.concurrency``; llama.cpp one), not
``[pipeline] concurrency`` (2 in these projects). The stand-in vLLM counts them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from tests.helpers.pipeline_data import lines, seed_questions
from tests.helpers.serving import engine_records

from overbrainer.cli import cli
from overbrainer.engines import EngineLaunch
from overbrainer.engines.builtin import LlamaCpp, Sglang, Vllm

QUESTIONS = {("ownership", "borrowing"): [f"Question {n}?" for n in range(8)]}


def answer_at_once(
    project: Path, monkeypatch: pytest.MonkeyPatch, serve_more: str
) -> tuple[int, str]:
    config = project / "overbrainer.toml"
    config.write_text(
        config.read_text().replace(
            'model = "Qwen/Qwen3-0.6B" }', f'model = "Qwen/Qwen3-0.6B"{serve_more} }}'
        )
    )
    seed_questions(project, QUESTIONS)
    monkeypatch.setenv("FAKE_ENGINE_DELAY", "0.5")
    result = CliRunner().invoke(cli, ["-C", str(project), "answers"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert len(lines(project, "answers.jsonl")) == len(QUESTIONS[("ownership", "borrowing")])
    (peak,) = engine_records(project, "peak.json")
    return json.loads(peak.read_text())["peak"], result.stderr


def test_the_answers_stage_keeps_as_many_in_flight_as_vllm_s_max_num_seqs(served_dir, monkeypatch):
    peak, said = answer_at_once(served_dir, monkeypatch, ', args = ["--max-num-seqs", "6"]')

    assert peak == 6, "six at once, not [pipeline] concurrency's two"
    assert "answers: 6 request(s) at once to the served providers.big" in said
    assert "not [pipeline] concurrency 2" in said


def test_serve_concurrency_sets_it(served_dir, monkeypatch):
    peak, said = answer_at_once(
        served_dir, monkeypatch, ', concurrency = 3, args = ["--max-num-seqs", "6"]'
    )

    assert peak == 3
    assert "answers: 3 request(s) at once" in said


def test_each_engine_says_what_it_holds_at_once():
    assert Vllm().capacity(("--max-num-seqs", "64")) == 64
    assert Vllm().capacity(("--max-num-seqs=32",)) == 32
    assert Vllm().capacity(()) == Vllm.default_capacity > 1
    assert Sglang().capacity(("--max-running-requests", "48")) == 48
    assert LlamaCpp().capacity(()) == 1, "llama-cpp-python's server answers one at a time"
    launch = EngineLaunch("m", 8000, "", args=("--max-num-seqs", "64"))
    assert Vllm().command(launch)[-2:] == ["--max-num-seqs", "64"], "the flag reaches vLLM"
