"""``run`` exports its run after training when ``[export] after_training`` says so, once: a
later ``run`` that is up to date does not export again."""

from __future__ import annotations

import sys

from click.testing import CliRunner
from tests.helpers.pipeline_data import PIPELINE_CONFIG, write_project
from tests.helpers.stand_ins import FAKE_TORCH, FAKE_TRANSFORMERS
from tests.helpers.watching import TRAINING

from overbrainer.cli import cli
from overbrainer.testing.fake_axolotl import make_fake_venv


def test_run_exports_after_training_once(tmp_path, provider, finished, monkeypatch):
    monkeypatch.setenv("OVERBRAINER_LLAMA_CPP", str(finished.toolchain))
    monkeypatch.setenv("FAKE_AXOLOTL_STEP_SECONDS", "0.01")
    monkeypatch.setenv("FAKE_AXOLOTL_STEPS", "3")
    venv = make_fake_venv(tmp_path / "fake-venv")
    site = next(venv.glob(f"lib/python3.{sys.version_info.minor}/site-packages"))
    stand_ins = {"torch": FAKE_TORCH, "transformers": FAKE_TRANSFORMERS}  # the verification's
    for module in ("torch", "numpy", "transformers", "yaml"):  # what the converter needs
        (site / module).mkdir()
        (site / module / "__init__.py").write_text(stand_ins.get(module, ""))
    extra = '\n[export]\nafter_training = true\nquantize = "Q8_0"\n'
    # Merged by the (fake) trainer: the export converts output/merged, no peft needed.
    training = TRAINING.format(venv=venv).replace(
        'adapter = "lora"', 'adapter = "lora"\nmerge = true'
    )
    project = write_project(tmp_path / "chain", provider.url, PIPELINE_CONFIG + training + extra)

    def run() -> str:
        result = CliRunner().invoke(cli, ["-C", str(project), "run"], catch_exceptions=False)
        assert result.exit_code == 0, result.stderr
        return result.stdout

    first = run()
    [run_dir] = [p for p in (project / "runs").iterdir() if (p / "run.json").exists()]
    gguf = f"runs/{run_dir.name}/output/gguf/{run_dir.name}-Q8_0.gguf"
    assert f"train: GGUF in {gguf} (Q8_0, " in first
    assert "train: verified on " in first  # on the run's eval prompts
    assert (project / gguf).read_bytes().startswith(b"GGUF converted auto from ../../output/merged")
    again = run()
    assert f"train: up to date with run {run_dir.name}" in again
    assert "GGUF" not in again
    assert len(list(run_dir.glob("exports/*/export.json"))) == 1
