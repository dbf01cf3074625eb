"""An exception's name says one thing: no two exception classes of the core, the targets
or contrib share a name unless one is the other made narrower (``pipeline.jsonl``'s
``DiskFull`` is ``files.DiskFull`` for a line)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).parents[2]
ROOTS = ("core", "plugins", "contrib")
STANDALONE = ROOT / "core" / "overbrainer" / "after" / "target"
"""Scripts that run alone on a target, importing nothing of ours: each names its own."""
EXCEPTIONS = {"Exception", "BaseException", "KeyboardInterrupt", "OSError", "RuntimeError",
              "ValueError"}


def _name(base: ast.expr) -> str:
    return base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")


def _classes() -> dict[str, list[tuple[Path, set[str]]]]:
    """Each class name: where it is defined, with the names of its bases."""
    found: dict[str, list[tuple[Path, set[str]]]] = defaultdict(list)
    for root in ROOTS:
        for path in (ROOT / root).rglob("*.py"):
            if "tests" in path.relative_to(ROOT).parts or path.is_relative_to(STANDALONE):
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ClassDef):
                    found[node.name].append((path, {_name(base) for base in node.bases}))
    return found


def test_no_two_unrelated_exception_classes_share_a_name():
    classes = _classes()
    exceptions = set(EXCEPTIONS)
    grown = True
    while grown:  # a class whose base is an exception is one
        more = {
            name for name, places in classes.items()
            if any(bases & exceptions for _, bases in places)
        }
        grown = not more <= exceptions
        exceptions |= more
    clashes = {
        name: sorted(str(path.relative_to(ROOT)) for path, _ in places)
        for name, places in classes.items()
        if name in exceptions
        and sum(name not in bases for _, bases in places) > 1  # two that stand alone
    }
    assert clashes == {}
