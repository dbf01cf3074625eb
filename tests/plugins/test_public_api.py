"""``overbrainer.plugin`` and its tiers are the whole face for plugin authors, and the
layers say so."""

from __future__ import annotations

import ast
import importlib
import tomllib
from pathlib import Path

import overbrainer
from overbrainer import hookspecs

ROOT = Path(__file__).parents[2]
CORE = Path(overbrainer.__file__).parent
TIERS = ("", ".host", ".operations", ".settings", ".files", ".commands")
FACE = {f"overbrainer.plugin{tier}" for tier in TIERS}
PUBLIC = FACE | {"overbrainer.testing"}


def _names(module: str) -> set[str]:
    found = importlib.import_module(module)
    assert all(hasattr(found, name) for name in found.__all__), module
    return set(found.__all__)


def _contract(name_start: str) -> dict:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    return next(c for c in contracts if c["name"].startswith(name_start))


def test_every_private_part_of_the_core_is_forbidden_to_targets():
    # A module added to the core later is private too: the contract must name it.
    parts = {
        f"overbrainer.{path.stem if path.is_file() else path.name}"
        for path in CORE.iterdir()
        if (path.suffix == ".py" and path.stem != "__init__")
        or (path.is_dir() and (path / "__init__.py").exists())
    }
    forbidden = set(_contract("Targets and contrib reach the core only")["forbidden_modules"])
    assert forbidden == parts - {"overbrainer.plugin"}


def test_every_type_a_hook_names_is_public():
    tree = ast.parse(Path(hookspecs.__file__).read_text())
    named = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("overbrainer")
        for alias in node.names
    }
    public = set().union(*(_names(module) for module in FACE))
    assert named <= public


def test_each_public_name_is_in_one_tier_and_the_base_tier_is_small():
    tiers = [_names(module) for module in sorted(FACE)]
    assert sum(len(names) for names in tiers) == len(set().union(*tiers))
    assert len(_names("overbrainer.plugin")) <= 25


def test_the_executor_template_needs_the_base_tier_alone():
    source = ROOT / "contrib" / "executor-template" / "overbrainer_spool" / "__init__.py"
    modules = {
        node.module
        for node in ast.walk(ast.parse(source.read_text()))
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("overbrainer")
    }
    assert modules == {"overbrainer.plugin"}


def test_targets_and_contrib_import_only_the_public_face():
    sources = [
        *ROOT.glob("plugins/*/overbrainer_*/**/*.py"),
        *ROOT.glob("contrib/*/overbrainer_*/**/*.py"),
    ]
    assert sources
    for source in sources:
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                module = node.module or ""
                if module == "overbrainer" or module.startswith("overbrainer."):
                    assert module in PUBLIC, f"{source.relative_to(ROOT)} imports {module}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    assert not alias.name.startswith("overbrainer."), source


def test_every_core_package_is_in_the_layers():
    # A package added to the core later must find its place among the layers.
    packages = {
        f"overbrainer.{path.name}"
        for path in CORE.iterdir()
        if path.is_dir() and (path / "__init__.py").exists()
    }
    layers = _contract("The core is layered")["layers"]
    placed = {name.strip() for layer in layers for name in layer.split("|")}
    assert placed == packages


def test_the_hook_contract_is_below_every_feature():
    forbidden = set(_contract("The hook contract depends on nothing above")["forbidden_modules"])
    layers = _contract("The core is layered")["layers"]
    above_job = {name.strip() for layer in layers[:-2] for name in layer.split("|")}
    assert above_job <= forbidden
