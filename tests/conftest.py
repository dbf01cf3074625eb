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
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from tests.fixtures.real import AXOLOTL_VENV, REAL_TIMEOUT, TINY_MODEL

from fake_provider import FakeProvider
from overbrainer import redact
from overbrainer.cli import cli

OUR_PLUGINS = "local,ssh,runpod"
CLOSED_HUB = "http://127.0.0.1:9"
DEFAULT_BASE_MODEL = "Qwen/Qwen3-0.6B"

LOCAL_PROVIDER = {"OVERBRAINER_PROVIDERS__MAIN__BASE_URL": "http://127.0.0.1:9/v1"}
"""A URL for MINIMAL_CONFIG's provider that needs no key (a server on this machine, never
asked), so that ``config check`` has no provider problem to report."""
OPENROUTER = {
    "OVERBRAINER_PROVIDERS__OPENROUTER__BASE_URL": "https://openrouter.example.invalid/api/v1",
    "OVERBRAINER_PROVIDERS__OPENROUTER__API_KEY": "sk-or-test-0123456789",
}
"""The URL and key of the provider ``init`` writes."""

MINIMAL_CONFIG = """\
[project]
name = "Demo Project"

[[topics]]
name = "ownership"
subtopics = 2
questions_per_subtopic = 3

[providers.main]
protocol = "openai"

[roles.generator]
provider = "main"
model = "gen-model"

[roles.parent]
provider = "main"
model = "parent-model"
reasoning = true
"""


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


def cached_model(home: Path, model: str) -> Path:
    """Put ``model`` in the Hugging Face cache under ``home`` (its config only)."""
    snapshot = home / ".cache/huggingface/hub" / f"models--{model.replace('/', '--')}"
    config = snapshot / "snapshots" / ("0" * 40) / "config.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("{}", encoding="utf-8")
    return config


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


@dataclass
class Cli:
    """Runs the CLI in-process on one project directory."""

    project_dir: Path

    def __call__(
        self, *args: str, input: str | None = None, env: dict[str, str] | None = None
    ) -> Result:
        runner = CliRunner()
        return runner.invoke(
            cli, ["-C", str(self.project_dir), *args], input=input, env=env, catch_exceptions=False
        )


@pytest.fixture
def run_cli(project_dir: Path) -> Cli:
    return Cli(project_dir)


@dataclass
class Site:
    """A directory on ``sys.path`` where tests install plugin distributions for real: a
    module and a ``.dist-info`` with ``METADATA`` and ``entry_points.txt``."""

    path: Path
    modules: list[str] = field(default_factory=list)

    def install(self, name: str, source: str, version: str = "1.0") -> str:
        """Install the plugin ``name`` (entry point and module ``obtest_<name>``) from
        ``source``; returns its distribution name."""
        module = f"obtest_{name}"
        distribution = f"overbrainer-{name}"
        (self.path / f"{module}.py").write_text(textwrap.dedent(source), encoding="utf-8")
        info = self.path / f"{distribution.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n", encoding="utf-8"
        )
        (info / "entry_points.txt").write_text(
            f"[overbrainer]\n{name} = {module}\n", encoding="utf-8"
        )
        self.modules.append(module)
        importlib.invalidate_caches()  # importlib.metadata caches what each path holds
        return distribution


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
