"""``run``: the stages in order, the configuration reloaded between them."""

from __future__ import annotations

import os
import time

from tests.helpers.fake_provider import Reply
from tests.helpers.pipeline_data import PIPELINE_CONFIG, lines

from overbrainer.config.env import Environment
from overbrainer.config.load import load_settings
from overbrainer.config.reload import Reloader


def save(path, text):
    """As editors do: a new file renamed over the old one."""
    temp = path.with_name(path.name + ".tmp")
    temp.write_text(text)
    os.replace(temp, path)


def on_first_questions_ask(provider, action):
    """Run ``action`` when the questions stage asks its first batch, then answer it slowly
    enough for the change to be seen while the stage runs."""
    def script(seen):
        action()
        return Reply(delay=0.8)

    provider.on(lambda s: s.prompt.startswith("questions|"), script)


def test_run_goes_from_an_empty_project_to_train_and_eval(run_cli, project_dir, provider):
    result = run_cli("run")
    assert result.exit_code == 0, result.stderr
    assert [line.split(":")[0] for line in result.stdout.splitlines()] == [
        "plan", "subtopics", "questions", "answers", "split"
    ]
    assert result.stdout.splitlines()[-1] == "split: 7 train, 1 eval, 0 excluded, 0 orphaned"
    assert len(lines(project_dir, "train.jsonl")) == 7
    assert len(lines(project_dir, "eval.jsonl")) == 1
    assert result.stderr.endswith(
        "no [training] section in overbrainer.toml: run stops after split\n"
    )
    assert "config reloaded" not in result.stderr


def test_a_stage_with_failures_stops_the_chain(run_cli, project_dir, provider):
    provider.on(lambda s: s.prompt.startswith("questions|lifetimes"),
                Reply({"error": {"message": "bad"}}, status=400), times=None)
    result = run_cli("run")
    assert result.exit_code == 1
    assert [line.split(":")[0] for line in result.stdout.splitlines()] == [
        "plan", "subtopics", "questions"
    ]
    assert result.stderr.endswith(
        "error: 1 questions item(s) failed; run the command again to retry them\n"
    )
    assert provider.chats("parent-model") == []


def test_a_model_changed_mid_run_is_used_by_the_next_stage(run_cli, project_dir, provider):
    config = project_dir / "overbrainer.toml"
    on_first_questions_ask(
        provider, lambda: save(config, PIPELINE_CONFIG.replace("parent-model", "parent-2"))
    )
    result = run_cli("run")
    assert result.exit_code == 0, result.stderr
    assert result.stderr.count("config reloaded") == 1
    assert provider.chats("parent-model") == []
    assert len(provider.chats("parent-2")) == 8
    assert {r["meta"]["model"] for r in lines(project_dir, "answers.jsonl")} == {"parent-2"}
    # the stage that was running kept its settings: it finished with the generator it had
    assert "answers: 8 done" in result.stdout
    assert result.stdout.splitlines()[3].endswith("; cost unknown")  # parent-2 has no price


def test_a_changed_env_file_is_reloaded(run_cli, project_dir, provider):
    env = project_dir / ".env"
    on_first_questions_ask(
        provider,
        lambda: save(env, env.read_text() + "OVERBRAINER_ROLES__PARENT__MODEL=parent-3\n"),
    )
    result = run_cli("run")
    assert result.exit_code == 0, result.stderr
    assert result.stderr.count("config reloaded") == 1
    assert len(provider.chats("parent-3")) == 8


def test_an_invalid_change_stops_the_run(run_cli, project_dir, provider):
    config = project_dir / "overbrainer.toml"
    on_first_questions_ask(
        provider,
        lambda: save(config, PIPELINE_CONFIG.replace("concurrency = 4", "concurrency = 0")),
    )
    result = run_cli("run")
    assert result.exit_code == 1
    assert result.stderr.endswith(
        "error: the configuration changed and cannot be used; the run stops\n"
        "  pipeline.concurrency: must be at least 1\n"
    )
    assert [line.split(":")[0] for line in result.stdout.splitlines()] == [
        "plan", "subtopics", "questions"
    ]
    assert provider.chats("parent-model") == []


def test_a_toml_syntax_error_mid_run_stops_it(run_cli, project_dir, provider):
    config = project_dir / "overbrainer.toml"
    on_first_questions_ask(provider, lambda: save(config, "[project\n"))
    result = run_cli("run")
    assert result.exit_code == 1
    assert result.stderr.endswith(
        "error: the configuration changed and cannot be used; the run stops\n"
        "  TOML syntax error in overbrainer.toml at line 1, column 9\n"
    )


def wait_for(condition, seconds=5.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = condition()
        if found is not None:
            return found
        time.sleep(0.02)
    raise AssertionError("timed out")


def test_the_reloaded_environment_drops_what_env_no_longer_sets(project_dir, monkeypatch):
    monkeypatch.setenv("OVERBRAINER_PIPELINE__SEED", "5")
    env_file = project_dir / ".env"
    base = env_file.read_text()
    env_file.write_text(
        base + "OVERBRAINER_PIPELINE__SEED=6\nOVERBRAINER_PIPELINE__CONCURRENCY=3\n"
    )
    env = Environment.load(project_dir)
    settings = load_settings(project_dir, env, {})
    assert (settings.pipeline.seed, settings.pipeline.concurrency) == (5, 3)  # the shell wins
    with Reloader(project_dir, env, {}, settings) as reloader:
        assert reloader.changed() is None
        save(env_file, base + "OVERBRAINER_PIPELINE__MAX_RETRIES=9\n")
        new = wait_for(reloader.changed)
        assert (new.pipeline.seed, new.pipeline.concurrency, new.pipeline.max_retries) == (5, 4, 9)
        assert "OVERBRAINER_PIPELINE__CONCURRENCY" not in reloader.env.merged
        # the same content saved again is no change
        save(env_file, base + "OVERBRAINER_PIPELINE__MAX_RETRIES=9\n")
        time.sleep(0.3)
        assert reloader.changed() is None
