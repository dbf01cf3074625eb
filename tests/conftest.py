"""Fixtures every test shares: an isolated environment, a project, the CLI, installed plugins."""

from __future__ import annotations

import importlib
import logging
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

# The helpers' asserts explain themselves as a conftest's do: registered before any is imported.
pytest.register_assert_rewrite("tests.helpers")

from tests.helpers.fake_provider import FakeProvider  # noqa: E402
from tests.helpers.plugin_site import Site  # noqa: E402
from tests.helpers.project import (  # noqa: E402
    CLOSED_HUB,
    DEFAULT_BASE_MODEL,
    MINIMAL_CONFIG,
    OUR_PLUGINS,
    Cli,
    cached_model,
)
from tests.helpers.real import AXOLOTL_VENV, REAL_TIMEOUT, TINY_MODEL  # noqa: E402

from overbrainer import redact  # noqa: E402

# Fixtures that tests of several directories use, as plugins: pytest's way to share fixtures
# beyond a conftest's directory (importing a fixture by name registers a copy where imported).
pytest_plugins = [
    "tests.fixtures.finished_run",
    "tests.fixtures.llama_cpp",
    "tests.fixtures.runpod",
    "tests.fixtures.sshd",
    "tests.fixtures.training",
    "tests.fixtures.vault",
]


def pytest_configure(config: pytest.Config) -> None:
    """Let Ctrl-C reach the tests and what they start: a runner started in the background
    (``cmd &`` in a script, ``nohup``) ignores SIGINT, and an ignored signal stays ignored
    across exec, so every Ctrl-C test would see nothing. A handler of Python's own is
    reset to the default in each child instead."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """No test sees the developer's settings, keys, ~/.ssh or third-party plugins."""
    for name in list(os.environ):
        if name.startswith(("OVERBRAINER_", "VAULT_", "RUNPOD_")) or name in (
            "NO_COLOR",
            "HF_TOKEN",
            "HF_TOKEN_PATH",  # where push finds `hf auth login`'s token: never the user's
            "HF_HOME",
            "XDG_CACHE_HOME",
        ):
            monkeypatch.delenv(name)
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    # Where a target keeps sockets (an ssh master connection's): never the user's.
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path_factory.mktemp("run")))
    monkeypatch.setenv("OVERBRAINER_LOAD_PLUGINS", OUR_PLUGINS)
    monkeypatch.setenv("NO_COLOR", "1")
    # No test reaches the Hub: a closed port on this machine. The base model most projects
    # here name is in the home's Hugging Face cache, as after a first download, so that
    # ``run``'s base-model check passes where it would for a user who trained once.
    monkeypatch.setenv("HF_ENDPOINT", CLOSED_HUB)
    cached_model(home, DEFAULT_BASE_MODEL)
    return home


@pytest.fixture(autouse=True)
def isolated_logging(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Secrets a test registers and the log sinks the CLI sets up end with the test."""
    monkeypatch.setattr(redact, "_known", set())
    monkeypatch.setattr(redact, "_longest_first", [])
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    from loguru import logger

    logger.remove()
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture(autouse=True)
def fresh_limiters(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's providers start unthrottled: the limiters are the process's."""
    from overbrainer.providers import limiter

    monkeypatch.setattr(limiter, "_LIMITERS", {})


@pytest.fixture
def project_dir(tmp_path: Path) -> Path:
    """A project directory with a minimal, valid overbrainer.toml."""
    directory = tmp_path / "project"
    directory.mkdir()
    (directory / "overbrainer.toml").write_text(MINIMAL_CONFIG, encoding="utf-8")
    return directory


@pytest.fixture
def run_cli(project_dir: Path) -> Cli:
    return Cli(project_dir)


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    directory = tmp_path / "site-packages"
    directory.mkdir()
    monkeypatch.syspath_prepend(str(directory))
    installed = Site(directory)
    yield installed
    for module in installed.modules:
        sys.modules.pop(module, None)
    importlib.invalidate_caches()


@pytest.fixture
def minimal_config() -> str:
    """The text of the minimal, valid overbrainer.toml of ``project_dir``."""
    return MINIMAL_CONFIG


@pytest.fixture
def write_config(project_dir: Path):
    """Writes overbrainer.toml: the minimal configuration followed by ``extra``."""

    def write(extra: str = "", base: str = MINIMAL_CONFIG) -> Path:
        path = project_dir / "overbrainer.toml"
        path.write_text(base + textwrap.dedent(extra), encoding="utf-8")
        return path

    return write


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    """A loopback LLM provider (OpenAI and Anthropic protocols), stopped at teardown."""
    server = FakeProvider().start()
    yield server
    server.stop()


# The real trainer (tests marked `real`): one venv and one tiny model for the session.


@pytest.fixture(scope="session")
def venv() -> Path:
    if not AXOLOTL_VENV:
        pytest.skip(
            "OVERBRAINER_AXOLOTL_VENV is not set: point it at an Axolotl 0.19 venv "
            "(the directory holding bin/axolotl) to run the real trainer"
        )
    venv = Path(AXOLOTL_VENV)
    if not (venv / "bin" / "axolotl").is_file():
        pytest.fail(f"OVERBRAINER_AXOLOTL_VENV={AXOLOTL_VENV} holds no bin/axolotl")
    return venv


@pytest.fixture(scope="session")
def hf_home(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A Hugging Face cache of the tests' own, so datasets never land in the user's."""
    return str(tmp_path_factory.mktemp("hf-home"))


@pytest.fixture(scope="session")
def tiny_model(venv: Path, hf_home: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    model = tmp_path_factory.mktemp("models") / "tiny"
    env = {**os.environ, "HF_HOME": hf_home, "HF_HUB_OFFLINE": "1", "DO_NOT_TRACK": "1"}
    subprocess.run(
        [str(venv / "bin" / "python"), str(TINY_MODEL), str(model)],
        check=True,
        timeout=REAL_TIMEOUT,
        env=env,
    )
    return model
