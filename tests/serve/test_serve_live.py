"""The stages (answers, questions, subtopics) follow what a served vLLM or SGLang reports
LIVE at ``/metrics``: more in flight while nothing waits at the engine, down to what it runs
when requests queue there. The stand-in engine runs at most its capacity at once, queues the
rest, and serves ``/metrics`` in the engine's own text format."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from tests.helpers.pipeline_data import lines, seed_questions
from tests.helpers.serving import engine_records

from overbrainer.cli import cli
from overbrainer.engines.builtin import Sglang, Vllm
from overbrainer.pipeline import served_live
from overbrainer.providers.gauges import parse_gauges
from overbrainer.providers.served import MAX_IN_FLIGHT

QUESTIONS = {("ownership", "borrowing"): [f"Question {n}?" for n in range(36)]}
PASSED = '["FAKE_ENGINE_DELAY", "FAKE_ENGINE_CAPACITY", "FAKE_ENGINE_METRICS"]'


def answer(project: Path, monkeypatch: pytest.MonkeyPatch, serve_more: str) -> str:
    """Answer every question through the served stand-in; what the command said."""
    config = project / "overbrainer.toml"
    text = config.read_text().replace('["FAKE_ENGINE_DELAY"]', PASSED)
    config.write_text(
        text.replace('model = "Qwen/Qwen3-0.6B" }', f'model = "Qwen/Qwen3-0.6B"{serve_more} }}')
    )
    seed_questions(project, QUESTIONS)
    monkeypatch.setenv("FAKE_ENGINE_DELAY", "0.3")
    monkeypatch.setattr(served_live, "POLL_S", 0.1)
    result = CliRunner().invoke(cli, ["-C", str(project), "answers"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert len(lines(project, "answers.jsonl")) == len(QUESTIONS[("ownership", "borrowing")])
    return result.stderr


def engine_saw(project: Path) -> tuple[int, list[int]]:
    """The most the stand-in ran at once, and how many waited as each request came."""
    (peak,) = engine_records(project, "peak.json")
    (arrivals,) = engine_records(project, "arrivals.json")
    return json.loads(peak.read_text())["peak"], json.loads(arrivals.read_text())


def test_requests_queue_at_an_engine_holding_fewer_than_its_flag_and_the_stage_lowers(
    served_dir, monkeypatch
):
    monkeypatch.setenv("FAKE_ENGINE_CAPACITY", "3")  # its memory holds 3 of the 9 asked
    said = answer(served_dir, monkeypatch, ', args = ["--max-num-seqs", "9"]')

    peak, waiting = engine_saw(served_dir)
    assert peak == 3
    assert max(waiting[:9]) >= 3, "the stage started at the flag's 9: they queued"
    assert max(waiting[-12:]) <= 1, "then it kept about what the engine runs"
    assert "answers: the requests at once to the served providers.big followed its /metrics" in said
    assert re.search(r"from 9, between [1-3] and 9, \d+ at the end", said)


def test_an_engine_holding_more_than_assumed_gets_more(served_dir, monkeypatch):
    monkeypatch.setattr(Vllm, "default_capacity", 2)  # the figure assumed without a flag
    monkeypatch.setenv("FAKE_ENGINE_CAPACITY", "6")  # what its memory holds
    said = answer(served_dir, monkeypatch, "")

    peak, waiting = engine_saw(served_dir)
    assert peak == 6, "raised from 2 while nothing waited, up to what the engine runs"
    assert sum(waiting) < len(waiting), "hardly ever queued"
    assert re.search(r"from 2, between 2 and ([6-9]|1\d), \d+ at the end", said)


def test_metrics_that_cannot_be_read_keep_the_number(served_dir, monkeypatch):
    monkeypatch.setenv("FAKE_ENGINE_METRICS", "off")
    said = answer(served_dir, monkeypatch, ', args = ["--max-num-seqs", "4"]')

    peak, _ = engine_saw(served_dir)
    assert peak == 4
    assert "providers.big's /metrics cannot be read (HTTP 404): keeping 4 request(s)" in said
    assert "followed its" not in said


def test_sglang_is_followed_only_with_its_metrics_on(served_dir, monkeypatch):
    monkeypatch.setenv("FAKE_ENGINE_CAPACITY", "3")
    config = served_dir / "overbrainer.toml"
    config.write_text(config.read_text().replace('engine = "vllm"', 'engine = "sglang"'))
    said = answer(
        served_dir, monkeypatch, ', args = ["--max-running-requests", "8", "--enable-metrics"]'
    )

    assert re.search(r"from 8, between [1-3] and 8", said)
    assert Sglang().reported_metrics(("--max-running-requests", "8")) is None


def test_gauges_are_read_from_each_engine_s_text_format():
    vllm = (
        "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
        "# TYPE vllm:num_requests_running gauge\n"
        'vllm:num_requests_running{engine="0",model_name="m"} 5.0\n'
        'vllm:num_requests_running{engine="1",model_name="m"} 7.0\n'
        'vllm:num_requests_waiting{engine="0",model_name="m"} 2.0 1733450000000\n'
        'vllm:num_requests_waiting_by_reason{engine="0",reason="capacity"} 9.0\n'
    )
    names = (Vllm.metrics.running, Vllm.metrics.waiting)  # type: ignore[union-attr]
    assert parse_gauges(vllm, names) == {names[0]: 12.0, names[1]: 2.0}, "summed over ranks"
    sglang = 'sglang:num_running_reqs{model_name="m",tp_rank="0"} 3\nsglang:num_queue_reqs 0\n'
    names = (Sglang.metrics.running, Sglang.metrics.waiting)  # type: ignore[union-attr]
    assert parse_gauges(sglang, names) == {names[0]: 3.0, names[1]: 0.0}


def test_the_number_rises_only_while_all_are_used_and_nothing_waits():
    assert served_live.next_width(8, 8, running=8, waiting=0) > 8
    assert served_live.next_width(8, 5, running=5, waiting=0) == 8, "a slot is free: no use"
    assert served_live.next_width(8, 8, running=3, waiting=5) == 3
    assert served_live.next_width(8, 8, running=20, waiting=4) == 8, "others' requests"
    assert served_live.next_width(1, 1, running=0, waiting=3) == 1
    assert served_live.next_width(MAX_IN_FLIGHT, MAX_IN_FLIGHT, 9999, 0) == MAX_IN_FLIGHT


def test_the_subtopics_stage_follows_the_engine_too(served_dir, monkeypatch):
    """The subtopics stage (one request a topic) follows a served generator's /metrics."""
    monkeypatch.setenv("FAKE_ENGINE_CAPACITY", "3")
    config = served_dir / "overbrainer.toml"
    text = config.read_text().replace('["FAKE_ENGINE_DELAY"]', PASSED)
    topics = "".join(
        f'\n[[topics]]\nname = "topic {n}"\nsubtopics = 1\nquestions_per_subtopic = 1\n'
        for n in range(24)
    )
    config.write_text(
        text.replace(
            'model = "Qwen/Qwen3-0.6B" }',
            'model = "Qwen/Qwen3-0.6B", args = ["--max-num-seqs", "9"] }',
        )
        + topics
    )
    monkeypatch.setenv("FAKE_ENGINE_DELAY", "0.3")
    monkeypatch.setattr(served_live, "POLL_S", 0.1)

    result = CliRunner().invoke(cli, ["-C", str(served_dir), "subtopics"], catch_exceptions=False)

    assert result.exit_code == 0, result.output
    assert len(lines(served_dir, "subtopics.jsonl")) == 25
    said = result.stderr
    assert (
        "subtopics: the requests at once to the served providers.big followed its /metrics" in said
    )
    assert re.search(r"from 9, between [1-3] and 9, \d+ at the end", said)


def test_the_questions_stage_follows_the_engine_too(served_dir, monkeypatch):
    """Not only answers: the questions stage's requests to a served generator follow its
    /metrics as well."""
    monkeypatch.setenv("FAKE_ENGINE_CAPACITY", "3")
    config = served_dir / "overbrainer.toml"
    text = config.read_text().replace('["FAKE_ENGINE_DELAY"]', PASSED)
    text = text.replace("subtopics = 1\n", "subtopics = 36\n")
    config.write_text(
        text.replace(
            'model = "Qwen/Qwen3-0.6B" }',
            'model = "Qwen/Qwen3-0.6B", args = ["--max-num-seqs", "9"] }',
        )
    )
    seed_questions(served_dir, {("ownership", f"area {n}"): [] for n in range(36)})
    monkeypatch.setenv("FAKE_ENGINE_DELAY", "0.3")
    monkeypatch.setattr(served_live, "POLL_S", 0.1)

    result = CliRunner().invoke(cli, ["-C", str(served_dir), "questions"], catch_exceptions=False)

    assert result.exit_code == 0, result.output
    assert len(lines(served_dir, "questions.jsonl")) == 72
    peak, waiting = engine_saw(served_dir)
    assert peak == 3
    assert max(waiting[:9]) >= 3, "the stage started at the flag's 9: they queued"
    said = result.stderr
    assert (
        "questions: the requests at once to the served providers.big followed its /metrics" in said
    )
    assert re.search(r"from 9, between [1-3] and 9, \d+ at the end", said)
