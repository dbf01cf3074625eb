"""The stages against llama-cpp-python's OpenAI-compatible server, as a user serving an
open-weights parent runs it: the server of the llama.cpp toolchain ``export`` builds, a
tiny random Llama written as a GGUF in a second (``tests/helpers/tiny_gguf.py``), on
127.0.0.1, stopped by its pid.

Run with ``OVERBRAINER_LLAMA_CPP=<toolchain dir> uv run pytest -m real tests/providers``
(``.ci/run`` builds the toolchain under ~/.cache/overbrainer).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from tests.helpers.pipeline_data import PIPELINE_CONFIG, seed_questions, write_project
from tests.helpers.project import run

pytestmark = pytest.mark.real

MAX_TOKENS = 12
QUESTIONS = 3


def test_answers_end_to_end_against_its_server(tmp_path, llama_server):
    config = (
        PIPELINE_CONFIG.replace("reasoning = true", f"max_tokens = {MAX_TOKENS}")
        + '\n[providers.main.prices]\n"parent-model" = { input = 0.1, output = 0.2 }\n'
        '"gen-model" = { input = 0.1, output = 0.2 }\n'
    )
    project_dir = write_project(tmp_path / "project", llama_server, config)
    (project_dir / ".env").write_text(f"OVERBRAINER_PROVIDERS__MAIN__BASE_URL={llama_server}\n")
    seed_questions(project_dir, {("ownership", "moves"): [f"q{n}" for n in range(QUESTIONS)]})
    result = run(project_dir, "answers")
    assert result.exit_code == 0, result.stderr
    records = [json.loads(line) for line in
               (project_dir / "data" / "answers.jsonl").read_text().splitlines()]
    assert len(records) == QUESTIONS  # each reply saved: noise, mostly cut at max_tokens
    for record in records:
        meta = record["meta"]
        assert meta["excluded"] == ("truncated" if meta["finish_reason"] == "length" else None)
    done = sum(record["meta"]["excluded"] is None for record in records)
    assert result.stdout.startswith(
        f"answers: {done} done, 0 skipped, 0 failed, {QUESTIONS - done} excluded;"
    )
    spend = project_dir / ".overbrainer" / "spend.jsonl"
    paid = [r for r in map(json.loads, spend.read_text().splitlines()) if "paid" in r]
    # The server's own usage (its completion_tokens can pass max_tokens by a few), priced
    # from the table.
    assert sorted((r["input_tokens"], r["output_tokens"]) for r in paid) == sorted(
        (record["meta"]["input_tokens"], record["meta"]["output_tokens"]) for record in records
    )
    for record in paid:
        assert record["input_tokens"] > 0 and record["output_tokens"] > 0
        cost = (record["input_tokens"] * 0.1 + record["output_tokens"] * 0.2) / 1e6
        assert record["cost"] == round(cost, 9)


def test_its_server_returns_logprobs_and_top_logprobs(llama_server):
    body = {"model": "parent-model", "max_tokens": 4, "logprobs": True, "top_logprobs": 3,
            "messages": [{"role": "user", "content": "hello"}]}
    request = urllib.request.Request(
        f"{llama_server}/chat/completions", data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        reply = json.loads(response.read())
    [choice] = reply["choices"]
    tokens = choice["logprobs"]["content"]
    assert len(tokens) == reply["usage"]["completion_tokens"] > 0
    for token in tokens:
        assert token["logprob"] <= 0
        assert 1 <= len(token["top_logprobs"]) <= 4  # the chosen one may be added
        assert all(alt["logprob"] <= 0 for alt in token["top_logprobs"])
