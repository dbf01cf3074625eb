"""Fixtures of the served-provider tests (helpers: ``tests/helpers/serving.py``)."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.helpers.serving import make_engine_venv, watchdog_pids, write_served_project


@pytest.fixture
def engine_venv(tmp_path: Path) -> Path:
    return make_engine_venv(tmp_path / "engine-venv")


@pytest.fixture
def served_dir(tmp_path: Path, engine_venv: Path) -> Iterator[Path]:
    """A project served by the stand-in vLLM on the local target; every watchdog it left
    is stopped, by its process group, at the end."""
    directory = write_served_project(tmp_path / "project", engine_venv)
    yield directory
    for pid in watchdog_pids(tmp_path):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
