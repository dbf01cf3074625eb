"""The README's quickstart shows the commands after training."""

from __future__ import annotations

from pathlib import Path

README = Path(__file__).parents[2] / "README.md"


def test_the_quickstart_section_shows_export_and_compare():
    text = README.read_text(encoding="utf-8")
    quickstart = text.split("**Run the quickstart**", 1)[1].split("**Run the tests**", 1)[0]
    assert "uv run overbrainer -C examples/quickstart export RUN_ID" in quickstart
    assert "uv run overbrainer -C examples/quickstart compare" in quickstart


def test_the_commands_exist_with_a_help_line(run_cli):
    result = run_cli("--help")
    for command in ("export", "push", "compare"):
        assert command in result.stdout
    for command in ("export", "push", "compare"):
        assert run_cli(command, "--help").exit_code == 0


def test_after_training_says_once_that_the_export_gets_the_hf_token():
    """The export job gets it (test_export proves it): "Limits" said it did not."""
    text = (README.parent / "docs" / "after-training.md").read_text(encoding="utf-8")
    assert "gets it as `HF_TOKEN` in its environment" in text
    limits = text.split("## Limits of this version", 1)[1]
    assert "HF_TOKEN" not in limits
