"""The contrib templates installed as a third party's distribution would be."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

CONTRIB = Path(__file__).parents[2] / "contrib"


def installed(
    template: str, name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """``contrib/<template>`` (package ``overbrainer_<name>``) on sys.path with a .dist-info
    declaring its entry point; yields the PYTHONPATH a subprocess needs to see it too."""
    module = f"overbrainer_{name}"
    info = tmp_path / "site" / f"{module}-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: overbrainer-{name}\nVersion: 0.1.0\n"
    )
    (info / "entry_points.txt").write_text(f"[overbrainer]\n{name} = {module}\n")
    monkeypatch.syspath_prepend(str(CONTRIB / template))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    importlib.invalidate_caches()
    yield f"{CONTRIB / template}:{tmp_path / 'site'}"
    sys.modules.pop(module, None)


@pytest.fixture
def nice_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    yield from installed("plugin-template", "nice", tmp_path, monkeypatch)


@pytest.fixture
def spool_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    yield from installed("executor-template", "spool", tmp_path, monkeypatch)


@pytest.fixture
def ray_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The ray target's package (it imports Ray only when it talks to a cluster)."""
    yield from installed("overbrainer-ray", "ray", tmp_path, monkeypatch)


@pytest.fixture
def slurm_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The slurm target's package, seen by this process and the CLI processes it starts."""
    for path in installed("overbrainer-slurm", "slurm", tmp_path, monkeypatch):
        monkeypatch.setenv("PYTHONPATH", path)
        yield path
