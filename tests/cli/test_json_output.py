"""`--json` on `history` and `config check`: stable keys, secrets masked."""

from __future__ import annotations

import json

from tests.helpers.history import entry
from tests.helpers.project import LOCAL_PROVIDER

from overbrainer.pipeline.history import append_history


def test_history_json_totals_per_stage(run_cli, project_dir):
    append_history(project_dir, entry("answers", cost=0.0001))
    append_history(project_dir, entry("answers", cost=0.0007))  # float noise: 0.0007999…
    append_history(project_dir, entry("subtopics", cost=None))
    result = run_cli("history", "--json")
    assert result.exit_code == 0, result.stderr
    shown = json.loads(result.stdout)
    assert list(shown) == ["stages", "total"]
    assert list(shown["stages"]) == ["subtopics", "answers"]
    assert shown["stages"]["answers"] == {
        "runs": 2,
        "done": 4,
        "skipped": 2,
        "failed": 0,
        "excluded": 2,
        "input_tokens": 20,
        "output_tokens": 40,
        "cost": 0.0008,
        "cost_unknown": False,
    }
    assert shown["stages"]["subtopics"]["cost"] is None
    assert shown["stages"]["subtopics"]["cost_unknown"] is True
    assert shown["total"]["runs"] == 3 and shown["total"]["cost"] == 0.0008


def test_history_json_all_is_the_entries(run_cli, project_dir):
    append_history(project_dir, entry("answers"))
    result = run_cli("history", "--all", "--json")
    assert json.loads(result.stdout) == [entry("answers")]


def test_history_json_with_nothing_run(run_cli):
    shown = json.loads(run_cli("history", "--json").stdout)
    assert shown["stages"] == {} and shown["total"]["runs"] == 0


def test_config_check_json_masks_secrets(run_cli):
    key = "sk-test-abcdefghijklmnop0123"
    result = run_cli(
        "config",
        "check",
        "--json",
        env={**LOCAL_PROVIDER, "OVERBRAINER_PROVIDERS__MAIN__API_KEY": key},
    )
    assert result.exit_code == 0, result.stderr
    assert key not in result.stdout
    shown = json.loads(result.stdout)
    assert list(shown) == ["settings", "problems", "secrets", "ok"]
    assert shown["settings"]["project.name"] == "Demo Project"
    assert shown["settings"]["providers.main.api_key"] == "***"
    assert (shown["problems"], shown["secrets"], shown["ok"]) == ([], {}, True)


def test_config_check_json_lists_problems_and_exits_1(run_cli):
    result = run_cli("config", "check", "--json")  # the provider has no URL
    assert result.exit_code == 1
    shown = json.loads(result.stdout)
    assert shown["ok"] is False and shown["problems"]
    assert result.stderr.startswith("error: ")


def test_config_check_json_resolve(run_cli):
    result = run_cli(
        "config",
        "check",
        "--json",
        "--resolve",
        env={**LOCAL_PROVIDER, "OVERBRAINER_HF_TOKEN": "hf_abcdefghijklmnopqrstuvwx"},
    )
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["secrets"] == {"hf_token": "resolved"}
    assert "hf_abcdefghijklmnopqrstuvwx" not in result.stdout
