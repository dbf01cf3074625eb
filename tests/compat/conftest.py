"""The reference tool's project (``tests/helpers/reference_project.py``) as a fixture."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.helpers.reference_project import write_reference_project

from overbrainer.testing.fake_axolotl import make_fake_venv


@pytest.fixture
def reference_project(tmp_path: Path, provider) -> Path:
    venv = make_fake_venv(tmp_path / "fake-venv")
    return write_reference_project(tmp_path / "reference", provider.url, venv)


