"""`overbrainer init`: a new project that passes `config check`, or nothing written at all."""

from __future__ import annotations

import re
import tomllib

import pytest
from tests.helpers.project import OPENROUTER

from overbrainer.cli import cli

PROMPTS = [
    "answer_system.txt", "judge.txt", "judge_reference.txt", "questions.txt", "subtopics.txt"
]
NOTE = (
    "# overbrainer: secrets, runs (models) and local state stay out; data/ (the answers you "
    "paid for) is meant to be committed"
)


@pytest.fixture
def empty_dir(tmp_path):
    directory = tmp_path / "my Distill"
    directory.mkdir()
    return directory


def init(run_cli, directory, *args):
    run_cli.project_dir = directory
    return run_cli("init", *args)


def tree(directory):
    return sorted(str(path.relative_to(directory)) for path in directory.rglob("*"))


def test_init_writes_a_project_that_passes_config_check(run_cli, empty_dir):
    result = init(run_cli, empty_dir)
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout.splitlines()[0] == f"init: created a project in {empty_dir}"
    assert tree(empty_dir) == [
        ".env.example",
        ".gitignore",
        ".overbrainer",
        ".overbrainer/version",
        "overbrainer.toml",
        "prompts",
        *[f"prompts/{name}" for name in PROMPTS],
    ]
    assert (empty_dir / ".overbrainer" / "version").read_text() == "1\n"
    assert (empty_dir / ".gitignore").read_text() == f"{NOTE}\n.env\n/runs/\n/.overbrainer/\n"
    config = tomllib.loads((empty_dir / "overbrainer.toml").read_text())
    assert config["project"] == {"name": "my Distill"}
    assert config["training"]["target"] == "local"
    assert config["targets"] == {"local": {"kind": "local", "runtime": "native"}}
    assert "base_url" not in config["providers"]["openrouter"]
    check = run_cli("config", "check")  # before its provider is set: says what to set
    assert check.exit_code == 1
    assert check.stderr.splitlines()[0] == (
        "problem: providers.openrouter (used by roles.generator) has no URL: set "
        "OVERBRAINER_PROVIDERS__OPENROUTER__BASE_URL"
    )
    check = run_cli("config", "check", env=OPENROUTER)
    assert check.exit_code == 0, check.stderr
    assert "project.name = my Distill" in check.stdout.splitlines()
    assert "training = Qwen/Qwen3-0.6B on local (lora)" in check.stdout.splitlines()


def test_the_commented_examples_are_valid_targets(run_cli, empty_dir):
    init(run_cli, empty_dir)
    config = empty_dir / "overbrainer.toml"
    text = config.read_text()
    start = text.index("# [targets.gpu_box]")
    examples = "\n".join(
        line.removeprefix("# ")
        for line in text[start:].splitlines()
        if re.match(r"# (\[|\w+ = )", line)
    )
    config.write_text(text + "\n" + examples + "\n")
    result = run_cli("config", "check", env=OPENROUTER)
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "targets.gpu_box.kind = ssh" in lines
    assert "targets.pod.gpu_types = NVIDIA RTX A6000, NVIDIA A40" in lines


def test_env_example_names_the_env_only_keys_and_holds_no_secret(run_cli, empty_dir):
    init(run_cli, empty_dir)
    text = (empty_dir / ".env.example").read_text()
    assert "OVERBRAINER_PROVIDERS__OPENROUTER__BASE_URL=\n" in text
    assert "OVERBRAINER_PROVIDERS__OPENROUTER__API_KEY=\n" in text
    (empty_dir / ".env").write_text(text)  # copied as is, it still parses
    result = run_cli("config", "check")
    assert result.exit_code == 1  # and says what to fill in
    assert "cannot parse" not in result.stderr
    assert "set OVERBRAINER_PROVIDERS__OPENROUTER__BASE_URL" in result.stderr


def test_the_prompts_are_the_built_in_defaults(run_cli, empty_dir):
    from importlib.resources import files

    init(run_cli, empty_dir)
    defaults = files("overbrainer") / "pipeline" / "prompts"
    for name in PROMPTS:
        assert (empty_dir / "prompts" / name).read_text() == (defaults / name).read_text()


def test_init_creates_the_directory_argument(run_cli, tmp_path):
    result = init(run_cli, tmp_path, str(tmp_path / "new" / "project"))
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "new" / "project" / "overbrainer.toml").is_file()
    name = tomllib.loads((tmp_path / "new" / "project" / "overbrainer.toml").read_text())
    assert name["project"] == {"name": "project"}


def test_gitignore_lines_are_appended_without_duplicates(run_cli, empty_dir):
    (empty_dir / ".gitignore").write_text("*.pyc\n/runs/\n.env")
    result = init(run_cli, empty_dir)
    assert result.exit_code == 0, result.stderr
    assert (empty_dir / ".gitignore").read_text() == (
        f"*.pyc\n/runs/\n.env\n{NOTE}\n/.overbrainer/\n"
    )


def test_gitignore_already_complete_is_left_alone(run_cli, empty_dir):
    text = "/.overbrainer/\n/data/\n.env\n/runs/\nnode_modules/\n"
    (empty_dir / ".gitignore").write_text(text)
    init(run_cli, empty_dir)
    assert (empty_dir / ".gitignore").read_text() == text


@pytest.mark.parametrize("existing", ["overbrainer.toml", ".env.example", "prompts/mine.txt"])
def test_init_refuses_an_existing_project_and_writes_nothing(run_cli, empty_dir, existing):
    path = empty_dir / existing
    path.parent.mkdir(exist_ok=True)
    path.write_text("keep me\n")
    before = tree(empty_dir)
    result = init(run_cli, empty_dir)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == f"error: {path} already exists\n"
    assert tree(empty_dir) == before
    assert path.read_text() == "keep me\n"


def test_init_refuses_a_dangling_symlink(run_cli, empty_dir, tmp_path):
    (empty_dir / "overbrainer.toml").symlink_to(tmp_path / "elsewhere.toml")
    result = init(run_cli, empty_dir)
    assert result.exit_code == 1
    assert result.stderr == f"error: {empty_dir / 'overbrainer.toml'} already exists\n"
    assert not (tmp_path / "elsewhere.toml").exists()


def test_init_then_init_again_refuses(run_cli, empty_dir):
    assert init(run_cli, empty_dir).exit_code == 0
    result = init(run_cli, empty_dir)
    assert result.exit_code == 1
    assert result.stderr == f"error: {empty_dir / 'overbrainer.toml'} already exists\n"


def test_init_never_loads_plugins_or_configuration(empty_dir):
    from click.testing import CliRunner

    result = CliRunner().invoke(
        cli,
        ["-C", str(empty_dir), "init"],
        env={"OVERBRAINER_LOAD_PLUGINS": "", "OVERBRAINER_PIPELINE__BOGUS": "1"},
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.stderr


def test_init_refuses_a_prompts_file_writing_nothing(tmp_path, run_cli):
    target = tmp_path / "fresh"
    target.mkdir()
    (target / "prompts").write_text("a file, not a directory")
    result = run_cli("init", str(target))
    assert result.exit_code == 1
    assert result.stderr == f"error: {target / 'prompts'} exists and is not a directory\n"
    assert sorted(p.name for p in target.iterdir()) == ["prompts"]


def test_init_in_a_clone_never_writes_through_a_link(run_cli, empty_dir, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("kept")
    (empty_dir / ".gitignore").symlink_to(outside)
    result = init(run_cli, empty_dir)
    assert result.exit_code == 0, result.stderr
    assert outside.read_text() == "kept"
    assert not (empty_dir / ".gitignore").is_symlink()
    assert (empty_dir / ".gitignore").read_text() == (
        f"kept\n{NOTE}\n.env\n/runs/\n/.overbrainer/\n"
    )


def test_init_says_what_the_local_target_and_the_base_model_need(run_cli, empty_dir):
    init(run_cli, empty_dir)
    text = (empty_dir / "overbrainer.toml").read_text()
    assert "# Without venv, `axolotl` must be on PATH" in text
    assert '# venv = "~/.cache/overbrainer/axolotl-0.19.0"' in text
    assert "# Qwen/Qwen3-0.6B is sized for a GPU" in text


def test_a_first_run_of_an_init_project_stops_before_paying_when_it_cannot_train(
    run_cli, empty_dir, provider, monkeypatch
):
    init(run_cli, empty_dir)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no axolotl anywhere
    env = {
        "OVERBRAINER_PROVIDERS__OPENROUTER__BASE_URL": provider.url,
        "OVERBRAINER_PROVIDERS__OPENROUTER__API_KEY": "sk-or-test-0123456789",
    }
    result = run_cli("run", env=env)
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == (
        "error: training.target `local` cannot train: target `local`: `axolotl` is not on "
        "PATH: set targets.local.venv to a venv that holds Axolotl; nothing was paid for yet"
    )
    assert [r.path for r in provider.requests if r.method != "GET"] == []  # a price list only
    assert not (empty_dir / "data").exists()


def test_init_takes_the_topics_and_the_base_model(run_cli, empty_dir):
    result = init(run_cli, empty_dir, "--topic", "SQL query optimisation", "--topic",
                  "indexes", "--base-model", "HuggingFaceTB/SmolLM2-135M")
    assert result.exit_code == 0, result.stderr
    config = tomllib.loads((empty_dir / "overbrainer.toml").read_text())
    assert [topic["name"] for topic in config["topics"]] == ["SQL query optimisation", "indexes"]
    assert config["training"]["base_model"] == "HuggingFaceTB/SmolLM2-135M"
    assert "rust" not in (empty_dir / "overbrainer.toml").read_text().lower()
    check = run_cli("config", "check", env=OPENROUTER)
    assert check.exit_code == 0, check.stderr
    assert "training = HuggingFaceTB/SmolLM2-135M on local (lora)" in check.stdout.splitlines()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--topic", " "], "error: --topic is empty: name the topic to distill\n"),
        (["--topic", "a", "--topic", "a"], "error: --topic 'a' is given twice\n"),
        (["--base-model", ""],
         "error: --base-model is empty: give a Hub id (org/name) or a directory\n"),
    ],
)
def test_init_refuses_an_empty_or_repeated_option_and_writes_nothing(
    run_cli, empty_dir, args, message
):
    result = init(run_cli, empty_dir, *args)
    assert result.exit_code == 1
    assert result.stderr == message
    assert tree(empty_dir) == []


def test_a_new_project_keeps_its_data_in_git(run_cli, empty_dir):
    """data/ holds what the parent was paid for: git sees it; secrets and runs it does not."""
    import shutil
    import subprocess

    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    assert init(run_cli, empty_dir).exit_code == 0
    (empty_dir / "data").mkdir()
    (empty_dir / "data" / "answers.jsonl").write_text("{}\n")
    (empty_dir / ".env").write_text("OVERBRAINER_PROVIDERS__OPENROUTER__API_KEY=sk-x\n")
    (empty_dir / "runs").mkdir()
    (empty_dir / "runs" / "model.bin").write_text("x")
    subprocess.run(["git", "init", "-q", str(empty_dir)], check=True)
    ignored = subprocess.run(
        ["git", "-C", str(empty_dir), "check-ignore", "data/answers.jsonl", ".env",
         "runs/model.bin"], capture_output=True, text=True, check=False,
    )
    assert ignored.stdout.splitlines() == [".env", "runs/model.bin"]
