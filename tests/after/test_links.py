"""Issue 26: push and export never write through a link, never send what a link points
at, and never trust the run record's paths on this machine."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

CARD_TARGET = b"my own notes, not a card"


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    """A directory out of the project, holding files that must stay as they are."""
    directory = tmp_path / "elsewhere"
    directory.mkdir()
    (directory / "notes.md").write_bytes(CARD_TARGET)
    (directory / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nfake\n")
    return directory


def test_dry_run_never_writes_the_card_through_a_linked_readme(pushable, run_cli, elsewhere):
    (pushable.run_dir / "hub").mkdir()
    (pushable.run_dir / "hub" / "README.md").symlink_to(elsewhere / "notes.md")
    result = run_cli("push", pushable.run_id, "--dry-run")
    assert result.exit_code == 0, result.stderr
    assert (elsewhere / "notes.md").read_bytes() == CARD_TARGET
    readme = pushable.run_dir / "hub" / "README.md"
    assert not readme.is_symlink() and readme.read_text().startswith("---\nbase_model:")


def test_a_linked_hub_directory_is_refused_before_anything_is_sent(
    pushable, hub, run_cli, elsewhere
):
    (pushable.run_dir / "hub").symlink_to(elsewhere, target_is_directory=True)
    for args in (("--dry-run",), ()):
        result = run_cli("push", pushable.run_id, *args)
        assert result.exit_code == 1
        assert result.stderr == (
            f"error: runs/{pushable.run_id}/hub is a symbolic link: refusing to use it\n"
        )
    assert sorted(p.name for p in elsewhere.iterdir()) == ["id_rsa", "notes.md"]
    assert hub.commits() == []


def test_an_output_that_is_a_link_is_never_listed_nor_sent(pushable, hub, run_cli, elsewhere):
    output = pushable.run_dir / "output"
    for name in ("config.json", "adapter_config.json"):
        shutil.copy(output / name, elsewhere / name)
    shutil.rmtree(output)
    output.symlink_to(elsewhere, target_is_directory=True)
    for args in (("--dry-run",), ()):
        result = run_cli("push", pushable.run_id, *args)
        assert result.exit_code == 1
        assert result.stderr == (
            f"error: runs/{pushable.run_id}/output is a symbolic link: refusing to use it\n"
        )
        assert "id_rsa" not in result.stdout
    assert hub.commits() == []


def test_only_regular_files_of_output_are_sent(pushable, run_cli, elsewhere):
    output = pushable.run_dir / "output"
    os.mkfifo(output / "pipe.bin")
    (output / "key").symlink_to(elsewhere / "id_rsa")
    result = run_cli("push", pushable.run_id, "--dry-run")
    assert result.exit_code == 0, result.stderr
    assert "pipe.bin" not in result.stdout and "key" not in result.stdout.split()


def test_the_card_never_publishes_a_local_path_of_the_base_model(pushable, run_cli, tmp_path):
    local = tmp_path / "home" / "someone" / "models" / "tiny-base"
    (pushable.run_dir / "axolotl.yaml").write_text(f"base_model: {local}\nsequence_len: 384\n")
    config = pushable.dir / "overbrainer.toml"
    config.write_text(config.read_text().replace('"models/tiny"', f'"{local}"'))
    result = run_cli("push", pushable.run_id, "--dry-run")
    assert result.exit_code == 0, result.stderr
    card = (pushable.run_dir / "hub" / "README.md").read_text()
    assert str(tmp_path) not in card
    # A local base is no Hub repo: named in the text, kept out of the front matter.
    assert card.startswith("---\nlibrary_name: peft\n")
    assert "into a local model (`tiny-base`) with" in card
    assert 'base_model = "tiny-base"' in card


def test_export_never_writes_through_a_linked_output(finished, run_cli, elsewhere):
    output = finished.run_dir / "output"
    for path in output.iterdir():
        shutil.copy(path, elsewhere / path.name)
    shutil.rmtree(output)
    output.symlink_to(elsewhere, target_is_directory=True)
    result = run_cli("export", finished.run_id)
    assert result.exit_code == 1
    assert result.stderr == (
        f"error: runs/{finished.run_id}/output is a symbolic link: refusing to use it\n"
    )
    assert not (elsewhere / "gguf").exists()
    assert not (finished.run_dir / "exports").exists()


def test_export_never_writes_through_a_linked_gguf_directory(finished, run_cli, elsewhere):
    (finished.run_dir / "output" / "gguf").symlink_to(elsewhere, target_is_directory=True)
    result = run_cli("export", finished.run_id)
    assert result.exit_code == 1
    assert "output/gguf is a symbolic link: refusing to write through it" in result.stderr
    assert sorted(p.name for p in elsewhere.iterdir()) == ["id_rsa", "notes.md"]


def test_export_refuses_a_remote_dir_that_is_not_the_projects_own(finished, run_cli, tmp_path):
    # A copied project's record names the original's run directory; an edited one, any.
    original = tmp_path / "original" / "runs" / finished.run_id
    original.mkdir(parents=True)
    for remote in (original, tmp_path / "anywhere"):
        finished.record(remote_dir=str(remote))
        result = run_cli("export", finished.run_id)
        assert result.exit_code == 1
        assert result.stderr.startswith(
            f"error: remote_dir of run {finished.run_id} ({remote}) is not inside "
        )
        assert result.stderr.endswith(": refusing to use it\n")
        assert "Traceback" not in result.stderr
    assert list(original.iterdir()) == []
    assert not (tmp_path / "anywhere").exists()
    assert json.loads((finished.run_dir / "run.json").read_text())["state"] == "succeeded"
