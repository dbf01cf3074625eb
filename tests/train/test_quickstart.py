"""The quickstart project: `overbrainer run` finds the dataset done, splits it, and trains.

The fast test trains with the fake trainer; the real one (marker `real`) runs the README's
main command as it is, on a copy of the project, with the Axolotl venv the tests use.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from overbrainer.cli import cli

QUICKSTART = Path(__file__).parents[2] / "examples" / "quickstart"


@pytest.fixture
def quickstart(tmp_path: Path) -> Path:
    copy = tmp_path / "quickstart"
    shutil.copytree(
        QUICKSTART,
        copy,
        ignore=shutil.ignore_patterns(
            "runs", "models", ".overbrainer", "train.jsonl", "eval.jsonl"
        ),
    )
    return copy


def run(project: Path, env: dict[str, str]):
    return CliRunner().invoke(cli, ["-C", str(project), "run"], env=env, catch_exceptions=False)


def test_the_quickstart_runs_with_no_provider_and_trains(quickstart, trainer):
    env = {
        "OVERBRAINER_TARGETS__LOCAL__VENV": str(trainer.venv),
        "OVERBRAINER_TARGETS__LOCAL__INSTALL": "unused",
        # A stand-in for the tiny model `setup` makes: the fake trainer reads none, and
        # `run` checks the base model is there before it pays.
        "OVERBRAINER_TARGETS__LOCAL__SETUP": (
            "mkdir -p models/tiny-llama && echo {} > models/tiny-llama/config.json"
        ),
    }
    result = run(quickstart, env)
    assert result.exit_code == 0, result.stderr
    plan, *lines = result.stdout.splitlines()
    # Every stage done, training on this machine: nothing to pay for.
    assert plan == "plan: $0.0000 to spend; spent so far $0.0000 (`overbrainer plan` shows how)"
    assert lines[:3] == [
        "subtopics: 0 done, 2 skipped, 0 failed, 0 excluded; tokens 0 in, 0 out; cost $0.0000",
        "questions: 0 done, 8 skipped, 0 failed, 0 excluded; tokens 0 in, 0 out; cost $0.0000",
        "answers: 0 done, 48 skipped, 0 failed, 0 excluded; tokens 0 in, 0 out; cost $0.0000",
    ]
    assert lines[3].startswith("split: 43 train, 5 eval, 0 excluded")
    run_id = json.loads(next((quickstart / "runs").glob("*/run.json")).read_text())["id"]
    assert lines[4].startswith(f"train: run {run_id} succeeded; ")
    assert lines[-1] == f"train: loss chart in runs/{run_id}/loss.png"
    assert (quickstart / "runs" / run_id / "loss.png").is_file()


@pytest.mark.real
def test_the_readme_main_command_trains_the_quickstart_on_the_cpu(quickstart, venv):
    env = {"OVERBRAINER_TARGETS__LOCAL__VENV": str(venv)}
    result = run(quickstart, env)
    assert result.exit_code == 0, result.stderr
    run_id = json.loads(next((quickstart / "runs").glob("*/run.json")).read_text())["id"]
    output = quickstart / "runs" / run_id / "output"
    assert (output / "model.safetensors").is_file()
    assert (output / "config.json").is_file()
    # The quickstart shows learning: eval loss falls clearly from its first evaluation.
    evals = [
        event["eval_loss"]
        for event in map(json.loads, (output.parent / "metrics.jsonl").read_text().splitlines())
        if event.get("event") == "log" and event.get("eval_loss") is not None
    ]
    assert evals[-1] < evals[0] - 1.0, evals
    assert (output.parent / "loss.png").is_file()
    assert result.stdout.splitlines()[-1] == f"train: loss chart in runs/{run_id}/loss.png"
    assert (quickstart / "models" / "tiny-llama" / "tokenizer.json").is_file()
    assert "setup: tiny model written to models/tiny-llama" in result.stderr
