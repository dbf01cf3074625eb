"""What travels to the target (``overbrainer.job.target``): only a file reaches the target, so
each imports the standard library alone, but for the trainer's plugins, which add what the
trainer's venv holds; none imports ``overbrainer``."""

from __future__ import annotations

import ast
import sys
from importlib import resources

from overbrainer.job.layout import MACHINE_SAMPLER, RUNNER, TRAVELS

TRAINER = {"axolotl", "torch", "transformers"}
TRAINER_VENV = {"overbrainer_metrics.py": TRAINER, "overbrainer_kd.py": TRAINER}
"""The trainer's plugins run in its venv: what they may import besides the stdlib."""


def imported_roots(source: str) -> set[str]:
    tree = ast.parse(source)
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"a relative import: {ast.unparse(node)}"
            names.add((node.module or "").split(".")[0])
    return names


def test_every_file_that_travels_imports_the_stdlib_alone_and_nothing_of_the_core():
    files = [f for f in resources.files(TRAVELS).iterdir() if f.name.endswith(".py")]
    shipped = {f.name for f in files}
    assert {RUNNER, MACHINE_SAMPLER, "serve_watchdog.py", *TRAINER_VENV} <= shipped
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    for file in files:
        roots = imported_roots(file.read_text(encoding="utf-8"))
        assert "overbrainer" not in roots, file.name
        assert roots <= stdlib | TRAINER_VENV.get(file.name, set()), (file.name, roots - stdlib)


def test_the_files_the_core_reads_there_are_there():
    package = resources.files(TRAVELS)
    assert package.joinpath("deepspeed", "zero2.json").is_file()
    assert any(f.name.startswith("axolotl-") for f in package.joinpath("constraints").iterdir())
