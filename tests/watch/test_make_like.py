"""`run` trains only when the inputs of training changed; `runs diff` says which."""

from __future__ import annotations

import json
import re

from tests.helpers.project import cached_model
from tests.helpers.watching import CYCLE, edit_answer_prompt, save


def runs_of(project_dir):
    return sorted(
        (json.loads(p.read_text()) for p in (project_dir / "runs").glob("*/run.json")),
        key=lambda r: r["id"],
    )


def test_a_second_run_is_up_to_date_and_asks_nothing(run_cli, project_dir, provider):
    first = run_cli("run")
    assert first.exit_code == 0, first.stderr
    [trained] = runs_of(project_dir)
    assert trained["state"] == "succeeded"
    asked = len(provider.requests)
    again = run_cli("run")
    assert again.exit_code == 0, again.stderr
    assert again.stdout.splitlines()[-1] == f"train: up to date with run {trained['id']}"
    assert len(runs_of(project_dir)) == 1
    assert len(provider.requests) == asked  # every stage had nothing left to do
    forced = run_cli("run", "--retrain")
    assert forced.exit_code == 0, forced.stderr
    assert len(runs_of(project_dir)) == 2


def test_a_changed_training_key_trains_again_and_diff_names_it(run_cli, project_dir):
    assert run_cli("run").exit_code == 0
    config = project_dir / "overbrainer.toml"
    save(config, config.read_text().replace("learning_rate = 0.0002", "learning_rate = 0.001"))
    result = run_cli("run")
    assert result.exit_code == 0, result.stderr
    first, second = runs_of(project_dir)
    assert second["state"] == "succeeded"
    diff = run_cli("runs", "diff", first["id"], second["id"])
    assert diff.stdout == "learning_rate: 0.0002 -> 0.001\n"


def test_a_key_that_cannot_change_the_model_keeps_it_up_to_date(run_cli, project_dir):
    assert run_cli("run").exit_code == 0
    config = project_dir / "overbrainer.toml"
    save(
        config,
        config.read_text().replace('adapter = "lora"', 'adapter = "lora"\nevals_per_epoch = 2'),
    )
    result = run_cli("run")
    assert result.stdout.splitlines()[-1].startswith("train: up to date with run ")
    assert len(runs_of(project_dir)) == 1


def test_changed_data_trains_again(run_cli, project_dir):
    assert run_cli("run").exit_code == 0
    answers = project_dir / "data" / "answers.jsonl"
    kept = answers.read_text().splitlines()[:-1]
    save(answers, "\n".join(kept) + "\n")  # one answer fewer: the split changes
    # The stages would ask for the missing answer again: compare the two runs' inputs.
    result = run_cli("split")
    assert result.exit_code == 0, result.stderr
    train = run_cli("train")
    assert train.exit_code == 0, train.stderr
    first, second = runs_of(project_dir)
    diff = run_cli("runs", "diff", first["id"], second["id"]).stdout.splitlines()
    assert "data/train.jsonl: changed" in diff or "data/eval.jsonl: changed" in diff


def test_diff_of_a_run_without_recorded_inputs_says_so(run_cli, project_dir):
    assert run_cli("run").exit_code == 0
    [run] = runs_of(project_dir)
    (project_dir / "runs" / run["id"] / "inputs.json").unlink()
    result = run_cli("runs", "diff", run["id"], run["id"])
    assert result.exit_code == 1
    assert result.stderr == f"error: run {run['id']} has no record of its inputs (inputs.json)\n"


def test_the_chat_template_warning_comes_only_with_a_run_that_trains(
    run_cli, project_dir, isolated_env
):
    cached_model(isolated_env, "meta-llama/Llama-3.2-1B")
    config = project_dir / "overbrainer.toml"
    save(config, config.read_text().replace('"Qwen/Qwen3-0.6B"', '"meta-llama/Llama-3.2-1B"'))
    warning = "training.chat_template is not set and the base model meta-llama/Llama-3.2-1B"
    first = run_cli("run")
    assert first.exit_code == 0, first.stderr
    assert warning in first.stderr
    again = run_cli("run")
    assert again.stdout.splitlines()[-1].startswith("train: up to date with run ")
    assert warning not in again.stderr


CPU_WARNING = (
    "warning: target `local` trains on a CPU: Qwen/Qwen3-0.6B (0.6B parameters) would take "
    "hours an epoch there; set training.base_model to a tiny model (as examples/quickstart "
    "does) or training.target to a GPU target"
)


def test_run_warns_before_the_stages_when_a_cpu_target_gets_a_gpu_sized_model(
    run_cli, project_dir, provider
):
    config = project_dir / "overbrainer.toml"
    save(config, config.read_text().replace('kind = "local"', 'kind = "local"\ndevice = "cpu"'))
    result = run_cli("run")
    assert result.exit_code == 0, result.stderr
    lines = result.stderr.splitlines()
    assert CPU_WARNING in lines
    first_stage = next(i for i, line in enumerate(lines) if "subtopics" in line)
    assert lines.index(CPU_WARNING) < first_stage


def test_run_stops_before_the_stages_when_the_target_cannot_train(run_cli, project_dir, provider):
    config = project_dir / "overbrainer.toml"
    save(config, re.sub(r'venv = ".*"', 'venv = "/nonexistent/venv"', config.read_text()))
    result = run_cli("run")
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == (
        "error: training.target `local` cannot train: targets.local.venv: /nonexistent/venv has "
        "no bin/axolotl: install Axolotl there, or set targets.local.install to have it "
        "installed; nothing was paid for yet"
    )
    assert [r for r in provider.requests if r.method != "GET"] == []


def test_a_changed_training_seed_trains_again_and_diff_names_it(run_cli, project_dir):
    assert run_cli("run").exit_code == 0
    config = project_dir / "overbrainer.toml"
    save(config, config.read_text().replace('adapter = "lora"', 'adapter = "lora"\nseed = 7'))
    result = run_cli("run")
    assert result.exit_code == 0, result.stderr
    assert not result.stdout.splitlines()[-1].startswith("train: up to date")
    first, second = runs_of(project_dir)
    diff = run_cli("runs", "diff", first["id"], second["id"])
    assert diff.stdout == "seed: 42 -> 7\n"


def test_run_makes_the_target_ready_once(run_cli, project_dir):
    """Issue 43: the preflight and the training each ran the target's setup (and said so)."""
    config = project_dir / "overbrainer.toml"
    save(config, config.read_text() + "setup = \"echo ran >> setup.count && echo 'model ready'\"\n")
    result = run_cli("run")
    assert result.exit_code == 0, result.stderr
    assert runs_of(project_dir)[0]["state"] == "succeeded"
    assert (project_dir / "setup.count").read_text().splitlines() == ["ran"]
    assert result.stderr.count("setup: model ready\n") == 1


def test_watch_says_the_cpu_warning_once_not_every_cycle(watch, project_dir):
    """Issue 43's probe: the same warning came back at each cycle, edits of prompts too."""

    config = project_dir / "overbrainer.toml"
    save(config, config.read_text().replace('kind = "local"', 'kind = "local"\ndevice = "cpu"'))
    watching = watch()
    watching.line(CYCLE.format(n=1))
    edit_answer_prompt(project_dir)
    watching.line(CYCLE.format(n=2))
    assert sum(CPU_WARNING in line for line in watching.err) == 1
