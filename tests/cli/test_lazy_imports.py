"""The function-local imports kept under ruff's PLC0415 (``# noqa: PLC0415``) each say
what they spare a command: importing the module must not load that library.

Each module is imported alone in a fresh interpreter, as the command that uses it would.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

SPARED = {
    # The package root: `--help` imports it.
    "overbrainer": {"pluggy"},
    # `--help` reads the plugin commands' cache: a write alone needs files (tempfile).
    "overbrainer.plugincmds": {"overbrainer.files", "tempfile"},
    # `runs ls` warns through loguru only when a run is skipped.
    "overbrainer.runs.listing": {"loguru"},
    # split asks no provider; a stage that asks one starts without split.
    "overbrainer.pipeline.runner": {"aiohttp", "overbrainer.pipeline.split"},
    # A plain template is rendered without jinja2.
    "overbrainer.pipeline.prompts": {"jinja2"},
    # Reading verdicts (a report, an export) asks no provider.
    "overbrainer.after.report": {"aiohttp"},
    "overbrainer.after.export": {"aiohttp"},
    "overbrainer.after.parent_answers": {"aiohttp"},
    # The model card (tomlkit, yaml) only when a push is asked for.
    "overbrainer.after.chain": {"tomlkit", "yaml"},
    # The logits (numpy) only for distillation from them, axolotl.yaml (yaml) only to write it.
    "overbrainer.train.prepare": {"numpy"},
    "overbrainer.train.new_run": {"numpy", "yaml"},
    "overbrainer.train.start": {"numpy", "yaml"},
}


@pytest.mark.parametrize("module", sorted(SPARED))
def test_a_module_leaves_what_its_lazy_imports_spare_unloaded(module: str) -> None:
    code = f"import json, sys\nimport {module}\nprint(json.dumps(sorted(sys.modules)))"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    loaded = set(json.loads(result.stdout)) & SPARED[module]
    assert not loaded, f"importing {module} loads {sorted(loaded)}"
