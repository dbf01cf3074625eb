"""The stages through the real LiteLLM proxy (``tests/helpers/litellm_proxy.py``): its chat
endpoint and its ``/v1/messages``, the tokens and costs it says beside ours, its prices
(``/model/info``, ``x-litellm-response-cost``), its rpm limit (limit and remaining, no
reset), and that it serves with no network at all.

One proxy serves the module (about 17 s to start on two busy cores)."""

from __future__ import annotations

import json
import re
import subprocess
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from tests.helpers.litellm_proxy import (
    DISCOUNT,
    LIMITED_RPM,
    LIMITED_TPM,
    MASTER_KEY,
    OFFLINE,
    PRICE_IN,
    PRICE_OUT,
    LiteLLMProxy,
    free_port,
    start,
    venv_python,
)
from tests.helpers.pipeline_data import PIPELINE_CONFIG, seed_questions, write_project
from tests.helpers.tools import need

from overbrainer.cli import cli

QUESTIONS = 4
CHAT = {"model": "parent-model", "max_tokens": 64,
        "messages": [{"role": "user", "content": "a question"}]}


@pytest.fixture(scope="module")
def litellm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiteLLMProxy]:
    proxy = start(tmp_path_factory.mktemp("litellm"))
    yield proxy
    proxy.stop()


def configure(directory: Path, url: str, protocol: str = "openai", model: str = "parent-model",
              concurrency: int = 4) -> Path:
    config = (
        PIPELINE_CONFIG.replace("reasoning = true", "reasoning = false")
        .replace('protocol = "openai"', f'protocol = "{protocol}"')
        .replace('model = "parent-model"', f'model = "{model}"')
        .replace("concurrency = 4", f"concurrency = {concurrency}")
    )
    write_project(directory, url, config)
    (directory / ".env").write_text(
        f"OVERBRAINER_PROVIDERS__MAIN__BASE_URL={url}\n"
        f"OVERBRAINER_PROVIDERS__MAIN__API_KEY={MASTER_KEY}\n",
        encoding="utf-8",
    )
    seed_questions(directory, {("ownership", "moves"): [f"q{n}" for n in range(QUESTIONS)]})
    return directory


@pytest.fixture
def project_dir(tmp_path: Path, litellm: LiteLLMProxy) -> Path:
    return configure(tmp_path / "project", litellm.url)


def run(project_dir: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["-C", str(project_dir), *args], catch_exceptions=False)


def paid(project_dir: Path) -> list[dict]:
    path = project_dir / ".overbrainer" / "spend.jsonl"
    return [r for r in map(json.loads, path.read_text().splitlines()) if "paid" in r]


def test_answers_through_its_chat_endpoint_cost_what_its_replies_say(
    run_cli, project_dir, litellm
):
    # What the proxy says of one such request: its tokens, and its cost after its discount.
    status, headers, body = litellm.request("chat/completions", CHAT)
    assert status == 200
    tokens = body["usage"]["prompt_tokens"], body["usage"]["completion_tokens"]
    stated = float(headers["x-litellm-response-cost"])
    listed = tokens[0] * PRICE_IN + tokens[1] * PRICE_OUT
    assert stated == pytest.approx(listed * (1 - DISCOUNT))  # not what /model/info lists

    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == (
        f"answers: {QUESTIONS} done, 0 skipped, 0 failed, 0 excluded; tokens "
        f"{QUESTIONS * tokens[0]} in, {QUESTIONS * tokens[1]} out; "
        f"cost ${QUESTIONS * stated:.4f}\n"
    )
    records = paid(project_dir)
    assert [(r["input_tokens"], r["output_tokens"]) for r in records] == [tokens] * QUESTIONS
    assert [r["cost"] for r in records] == [round(stated, 9)] * QUESTIONS


def test_answers_through_its_messages_endpoint_priced_from_its_model_info(tmp_path, litellm):
    status, headers, body = litellm.request(
        "messages", CHAT, {"x-api-key": MASTER_KEY, "anthropic-version": "2023-06-01"}
    )
    assert status == 200
    # Its /v1/messages states no cost: the tokens are priced from /model/info.
    assert "x-litellm-response-cost" not in {name.lower() for name in headers}
    tokens = body["usage"]["input_tokens"], body["usage"]["output_tokens"]
    listed = tokens[0] * PRICE_IN + tokens[1] * PRICE_OUT

    project_dir = configure(tmp_path / "project", litellm.url, protocol="anthropic")
    result = run(project_dir, "answers")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == (
        f"answers: {QUESTIONS} done, 0 skipped, 0 failed, 0 excluded; tokens "
        f"{QUESTIONS * tokens[0]} in, {QUESTIONS * tokens[1]} out; "
        f"cost ${QUESTIONS * listed:.4f}\n"
    )
    records = paid(project_dir)
    assert [r["cost"] for r in records] == [round(listed, 9)] * QUESTIONS
    answers = project_dir / "data" / "answers.jsonl"
    assert all("The answer, from the mock." in line for line in answers.read_text().splitlines())


def test_its_limits_are_told_as_limit_and_remaining_without_reset(litellm):
    _, headers, _ = litellm.request("chat/completions", {**CHAT, "model": "limited-model"})
    names = {name.lower(): value for name, value in headers.items()}
    assert names["x-ratelimit-limit-requests"] == str(LIMITED_RPM)
    assert "x-ratelimit-remaining-requests" in names
    assert names["x-ratelimit-limit-tokens"] == str(LIMITED_TPM)
    assert "x-ratelimit-remaining-tokens" in names
    assert not [name for name in names if "reset" in name]


@pytest.mark.real
def test_its_rpm_limit_paces_the_answers(tmp_path, litellm):
    """LiteLLM tells ``limit`` and ``remaining`` and no reset, counts per wall-clock
    minute (admitting ``rpm - 1``: its ``remaining`` is one too many) and asks 60 s of a
    refused request (``llm_provider-retry-after``). Not knowing when a window turns, a
    client has to ask once a window at most; a 429 more is a request sent against what
    the limit said (without pacing: 8 for these 4 answers)."""
    project_dir = configure(tmp_path / "project", litellm.url, model="limited-model",
                            concurrency=LIMITED_RPM)
    began = time.time() // 60
    result = run(project_dir, "answers")
    windows = int(time.time() // 60 - began) + 1
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith(f"answers: {QUESTIONS} done, 0 skipped, 0 failed")
    refused = re.search(r"(\d+) request\(s\) refused by the rate limit", result.stdout)
    assert refused is None or int(refused[1]) <= windows, (windows, result.stdout)


def test_it_serves_with_no_network(tmp_path):
    """In a network namespace of its own with only a loopback (``unshare -rn``), the proxy
    starts and answers: it needs nothing from outside."""
    program = venv_python()
    curl, unshare, ip = need("curl"), need("unshare"), need("ip")
    probe = subprocess.run([unshare, "-rn", ip, "link", "set", "lo", "up"],
                           capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"no network namespace here: {probe.stderr.decode().strip()}")
    (tmp_path / "config.yaml").write_text(
        "model_list:\n  - model_name: m\n    litellm_params:\n      model: openai/m\n"
        "      api_key: none\n      mock_response: offline\n", encoding="utf-8")
    port = free_port()
    script = textwrap.dedent(f"""\
        {ip} link set lo up
        {program} --config config.yaml --host 127.0.0.1 --port {port} > litellm.log 2>&1 &
        pid=$!
        trap 'kill $pid 2>/dev/null' EXIT
        for _ in $(seq 240); do
          {curl} -sf http://127.0.0.1:{port}/health/liveliness >/dev/null && break
          sleep 0.5
        done
        {curl} -s http://127.0.0.1:{port}/v1/chat/completions \\
          -H 'Authorization: Bearer {MASTER_KEY}' -H 'Content-Type: application/json' \\
          -d '{{"model": "m", "messages": [{{"role": "user", "content": "hi"}}]}}'
        kill $pid
        wait $pid
        """)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), **OFFLINE}
    done = subprocess.run([unshare, "-rn", "sh", "-c", script], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=180, check=False)
    reply = json.loads(done.stdout) if done.stdout.startswith("{") else None
    assert reply is not None, (done.stdout, (tmp_path / "litellm.log").read_text()[-2000:])
    assert reply["choices"][0]["message"]["content"] == "offline"
