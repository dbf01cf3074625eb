"""The llama.cpp engine for real: llama-cpp-python's server of the toolchain ``export``
builds serves a tiny random Llama (``tests/helpers/tiny_gguf.py``, written in a second)
as the parent of a real project, on the local target, on the ssh target (a real
sshd) and on a pod of the fake Runpod (deleted with the serve), started by the stage and
ended with the command.

Run with ``OVERBRAINER_LLAMA_CPP=<toolchain dir> uv run pytest -m real tests/serve``
(``.ci/run`` builds the toolchain under ~/.cache/overbrainer).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from tests.helpers.fake_runpod import FakeRunpod
from tests.helpers.pipeline_data import lines
from tests.helpers.real import REAL_TIMEOUT
from tests.helpers.serving import (
    llama_toolchain,
    serving,
    watchdog_pids,
    write_llama_project,
    write_tiny_gguf,
)
from tests.helpers.tools import in_ci

from overbrainer.cli import cli

pytestmark = pytest.mark.real

TOOLCHAIN = llama_toolchain()
QUESTIONS = 3


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    python = TOOLCHAIN / "bin" / "python"
    if not python.is_file():
        reason = f"no llama.cpp toolchain in {TOOLCHAIN}: build it as .ci/run does"
        if in_ci():
            pytest.fail(f"{reason} [CI is set: a missing tool fails]", pytrace=False)
        pytest.skip(reason)
    return write_tiny_gguf(TOOLCHAIN, tmp_path_factory.mktemp("gguf") / "tiny.gguf", REAL_TIMEOUT)


def served_project(
    directory: Path, model: Path, target: str, kind: str, more: str = ""
) -> Path:
    questions = [f"q{n}" for n in range(QUESTIONS)]
    return write_llama_project(
        directory, TOOLCHAIN, model, questions, target=target, kind=kind, more=more
    )


def answers_then_nothing_left(
    project: Path, where: Path, model: Path, *, machine_deleted: bool = False
) -> None:
    """``answers`` starts the engine, every question gets its reply, and the command's end
    leaves no process of the serve, nor its directory (nor the machine, when it was made
    for the serve: its files are then gone with it)."""
    try:
        result = CliRunner().invoke(cli, ["-C", str(project), "answers"], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        assert "providers.local_llama: llama.cpp answers (" in result.stderr
        assert len(lines(project, "answers.jsonl")) == QUESTIONS
        deadline = time.monotonic() + 10  # a deleted pod's processes end just after
        while serving(model) and machine_deleted and time.monotonic() < deadline:
            time.sleep(0.1)
        assert serving(model) == [], "the engine outlived the command"
        if not machine_deleted:
            assert list(where.rglob(".serve/*")) == [], "the serve's directory outlived it"
        assert not list((project / ".overbrainer" / "serve").glob("*.json"))
    finally:
        for pid in watchdog_pids(where) + serving(model):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)


def test_llama_cpp_serves_the_parent_on_the_local_target(tmp_path, tiny_gguf):
    project = served_project(tmp_path / "project", tiny_gguf, "box", "local")
    answers_then_nothing_left(project, project, tiny_gguf)


def test_llama_cpp_serves_the_parent_on_the_ssh_target(tmp_path, tiny_gguf, sshd, ssh_target_env):
    ssh_target_env("gpu")
    project = served_project(tmp_path / "project", tiny_gguf, "gpu", "ssh")
    answers_then_nothing_left(project, sshd.home, tiny_gguf)


def test_llama_cpp_serves_the_parent_on_a_runpod_pod(
    tmp_path: Path,
    tiny_gguf: Path,
    fake_runpod: FakeRunpod,
) -> None:
    more = 'gpu_types = ["NVIDIA A40"]\nmax_hours = 1\n'
    project = served_project(tmp_path / "project", tiny_gguf, "gpu", "runpod", more)
    answers_then_nothing_left(project, fake_runpod.root, tiny_gguf, machine_deleted=True)
    assert fake_runpod.alive() == [], "the serve's pod outlived it"
    (pod,) = fake_runpod.deleted.values()
    assert fake_runpod.terminated_by[pod.id] == "client"
