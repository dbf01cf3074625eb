"""Fixtures of the provider tests: llama-cpp-python's server of the real llama.cpp toolchain."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.helpers.litellm_proxy import free_port
from tests.helpers.real import REAL_TIMEOUT
from tests.helpers.tools import in_ci

from overbrainer.after.toolchain import LLAMA_CPP_PYTHON

TOOLCHAIN = Path(os.environ.get("OVERBRAINER_LLAMA_CPP") or (
    Path.home() / ".cache" / "overbrainer" / f"llama-cpp-python-{LLAMA_CPP_PYTHON}"
))
TINY_GGUF = Path(__file__).parents[1] / "helpers" / "tiny_gguf.py"


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The server's base URL (``…/v1``), serving the tiny model as ``parent-model``."""
    python = TOOLCHAIN / "bin" / "python"
    if not python.is_file():
        reason = (f"no llama.cpp toolchain in {TOOLCHAIN}: build it with "
                  f"core/overbrainer/after/target/install_llama_cpp.sh {TOOLCHAIN} "
                  f"{LLAMA_CPP_PYTHON}")
        if in_ci():
            pytest.fail(f"{reason} [CI is set: a missing tool fails]", pytrace=False)
        pytest.skip(reason)
    directory = tmp_path_factory.mktemp("llama-server")
    model = directory / "tiny.gguf"
    subprocess.run(
        [str(python), str(TINY_GGUF), str(model)], check=True, timeout=REAL_TIMEOUT,
        env={**os.environ, "PYTHONPATH": str(TOOLCHAIN / "llama.cpp" / "gguf-py")},
    )
    port = free_port()
    with (directory / "server.log").open("wb") as log:
        server = subprocess.Popen(
            [str(python), "-m", "llama_cpp.server", "--model", str(model),
             "--model_alias", "parent-model", "--host", "127.0.0.1", "--port", str(port),
             "--n_ctx", "512", "--logits_all", "true"],
            cwd=directory, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            env={"PATH": os.environ.get("PATH", os.defpath), "HOME": str(directory)},
        )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + REAL_TIMEOUT
        while True:
            assert server.poll() is None, (directory / "server.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "llama-cpp-python's server did not start"
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=2):
                    break
            except OSError:
                time.sleep(0.3)
        yield url
    finally:
        os.kill(server.pid, signal.SIGTERM)
        try:
            server.wait(15)
        except subprocess.TimeoutExpired:
            os.kill(server.pid, signal.SIGKILL)
            server.wait(15)
