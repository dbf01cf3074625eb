"""The real LiteLLM proxy, as users put it in front of their providers: started by the tests
on 127.0.0.1 from a venv of its own, serving ``mock_response`` models (no provider behind
it, nothing sent beyond this machine), stopped by its pid.

The venv is ``$OVERBRAINER_LITELLM_VENV``, else ``~/.cache/overbrainer/litellm-VERSION``
(``.ci/run`` makes it once). ``OVERBRAINER_*`` is read at import: the autouse fixture of
tests/conftest.py removes those variables from each test's environment.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.helpers.tools import in_ci

VERSION = "1.108.7"
"""Pinned: the newest whose ``[proxy]`` extra installs from PyPI (1.108.8 and later pin
``litellm-enterprise``/``litellm-proxy-extras``/``litellm-proxy`` versions not published)."""
VENV = Path(
    os.environ.get("OVERBRAINER_LITELLM_VENV")
    or Path.home() / ".cache" / "overbrainer" / f"litellm-{VERSION}"
)
INSTALL = (
    f"uv venv --python 3.11 {VENV} && uv pip install --python {VENV}/bin/python "
    f"'litellm[proxy]=={VERSION}' (or run .ci/run)"
)
MASTER_KEY = "sk-litellm-test-0123456789abcdef0123456789abcdef"
START_TIMEOUT = 120
"""Seconds the proxy may take to serve (about 17 on two busy cores)."""
CLOSED = "http://127.0.0.1:9/"
"""A loopback port nothing listens on: where LiteLLM's remote lookups are sent, if any."""

OFFLINE = {
    "LITELLM_TELEMETRY": "False",
    "LITELLM_LOG": "ERROR",
    "LITELLM_MASTER_KEY": MASTER_KEY,
    # Its cost map, Anthropic beta headers, router presets, blog posts and policy templates
    # are fetched from GitHub unless these say local; the URLs are closed ports besides.
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS": "True",
    "LITELLM_LOCAL_AUTOROUTER_PRESETS": "True",
    "LITELLM_LOCAL_BLOG_POSTS": "True",
    "LITELLM_LOCAL_POLICY_TEMPLATES": "True",
    "LITELLM_MODEL_COST_MAP_URL": CLOSED,
    "LITELLM_BLOG_POSTS_URL": CLOSED,
    "LITELLM_ANTHROPIC_BETA_HEADERS_URL": CLOSED,
    "LITELLM_AUTOROUTER_PRESETS_URL": CLOSED,
    "DO_NOT_TRACK": "1",
    "NO_PROXY": "127.0.0.1,localhost",
}
"""The proxy's environment: no telemetry, no remote lookup, a master key (it refuses to
start without one)."""

PRICE_IN, PRICE_OUT = 3e-6, 4e-6
"""USD per token of every model here, in its ``model_info``."""
DISCOUNT = 0.5
"""LiteLLM's ``cost_discount_config`` for the openai provider: what its replies say they
cost is half what ``/model/info`` lists."""
LIMITED_RPM = 3
LIMITED_TPM = 100_000


def _model(name: str, reply: str, **params: Any) -> str:
    extra = "".join(f"\n      {key}: {value}" for key, value in params.items())
    return f"""\
  - model_name: {name}
    litellm_params:
      model: openai/{name}
      api_key: none
      api_base: {CLOSED}v1
      mock_response: {json.dumps(reply)}{extra}
    model_info:
      input_cost_per_token: {PRICE_IN}
      output_cost_per_token: {PRICE_OUT}
"""


CONFIG = f"""\
model_list:
{_model("parent-model", "The answer, from the mock.")}\
{_model("limited-model", "A limited answer.", rpm=LIMITED_RPM, tpm=LIMITED_TPM)}\
litellm_settings:
  telemetry: false
  cost_discount_config:
    openai: {DISCOUNT}
router_settings:
  routing_strategy: usage-based-routing-v2
  num_retries: 0
"""
"""Two models answering with a fixed text: ``parent-model``, and ``limited-model`` with an
``rpm`` limit (and a ``tpm`` one no test reaches) that the router keeps (usage-based
routing; no retry of its own, so that its 429 reaches the client). The limits count per
wall-clock minute."""


def venv_python() -> Path:
    """The venv's ``litellm`` program; the test is skipped with the install command when
    it is missing (failed under CI, like a missing system program)."""
    program = VENV / "bin" / "litellm"
    if program.is_file():
        return program
    reason = f"the LiteLLM proxy is not installed in {VENV}: {INSTALL}"
    if in_ci():
        pytest.fail(f"{reason} [CI is set: a missing tool fails]", pytrace=False)
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class LiteLLMProxy:
    """A running proxy: ``url`` is the base URL to configure (``…/v1``)."""

    process: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def request(
        self, path: str, body: dict[str, Any] | None = None, headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], Any]:
        """Status, headers and JSON of one request to ``/v1/PATH`` (a POST with ``body``)."""
        data = None if body is None else json.dumps(body).encode()
        sent = {"Authorization": f"Bearer {MASTER_KEY}", "Content-Type": "application/json",
                **(headers or {})}
        request = urllib.request.Request(f"{self.url}/{path}", data=data, headers=sent)
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, dict(response.headers), json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, dict(error.headers), json.loads(error.read() or b"null")

    def stop(self) -> None:
        """TERM by its pid, KILL if it lingers."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait(15)


def start(directory: Path, config: str = CONFIG) -> LiteLLMProxy:
    """A proxy serving ``config`` on a free loopback port, its files (config, log, HOME)
    in ``directory``; returns once it answers its liveness probe."""
    program = venv_python()
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.yaml").write_text(config, encoding="utf-8")
    log = directory / "litellm.log"
    port = free_port()
    env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(directory), **OFFLINE}
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(program), "--config", "config.yaml", "--host", "127.0.0.1",
             "--port", str(port), "--num_workers", "1"],
            cwd=directory, env=env, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    proxy = LiteLLMProxy(process, port, log)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the LiteLLM proxy exited at start:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{port}/health/liveliness", timeout=2
            ):
                return proxy
        except OSError:
            time.sleep(0.3)
    proxy.stop()
    raise RuntimeError(f"the LiteLLM proxy did not serve within {START_TIMEOUT} s")
