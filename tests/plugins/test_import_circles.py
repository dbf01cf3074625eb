"""No two modules of one package import each other, not even inside a function or for
types only: a circle closed by a deferred import hides a layer the contracts cannot see."""

from __future__ import annotations

from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).parents[2]
CONTRIB = {
    "overbrainer_nice": "plugin-template",
    "overbrainer_spool": "executor-template",
    "overbrainer_ray": "overbrainer-ray",
    "overbrainer_slurm": "overbrainer-slurm",
}
PACKAGES = ["overbrainer", "overbrainer_local", "overbrainer_ssh", "overbrainer_runpod", *CONTRIB]


def _circles(graph: grimp.ImportGraph) -> list[str]:
    """Each pair of sibling modules that import each other, as ``a <-> b``."""
    found = []
    for module in sorted(graph.modules):
        parent = module.rpartition(".")[0]
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            if (
                module < imported
                and imported.rpartition(".")[0] == parent
                and module in graph.find_modules_directly_imported_by(imported)
            ):
                found.append(f"{module} <-> {imported}")
    return found


def test_no_sibling_modules_import_each_other(monkeypatch: pytest.MonkeyPatch) -> None:
    for folder in CONTRIB.values():
        monkeypatch.syspath_prepend(str(ROOT / "contrib" / folder))
    graph = grimp.build_graph(
        *PACKAGES,
        include_external_packages=False,
        exclude_type_checking_imports=False,
        cache_dir=None,
    )
    assert _circles(graph) == []
