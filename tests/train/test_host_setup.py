"""A host target's `install` (Axolotl into the venv on first use) and `setup` command."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

from overbrainer.testing import fake_axolotl

WHEEL_MODULE = """\
import os, sys
def main():
    # The fake needs PyYAML: it runs with the tests' Python, not the new venv's.
    os.execv({python!r}, [{python!r}, {script!r}, *sys.argv[1:]])
"""


def make_wheel(directory: Path) -> Path:
    """A wheel whose console script `axolotl` is the fake trainer: pip installs it offline."""
    name, version = "fake_axolotl_cli", "0.1"
    wheel = directory / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}.py": WHEEL_MODULE.format(python=sys.executable, script=fake_axolotl.__file__),
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
        f"{info}/entry_points.txt": f"[console_scripts]\naxolotl = {name}:main\n",
    }
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
        archive.writestr(
            f"{info}/RECORD", "".join(f"{p},,\n" for p in files) + f"{info}/RECORD,,\n"
        )
    return wheel


def test_axolotl_is_installed_into_the_venv_on_first_use_then_reused(trainer, run_cli, tmp_path):
    wheel = make_wheel(tmp_path)
    trainer.venv = tmp_path / "managed-venv"
    trainer.configure()
    config = trainer.dir / "overbrainer.toml"
    config.write_text(config.read_text() + f"install = \"--no-index '{wheel}'\"\n")
    first = run_cli("train")
    assert first.exit_code == 0, first.stderr
    assert "install: installing Axolotl into" in first.stderr
    assert "install: Successfully installed fake-axolotl-cli-0.1" in first.stderr
    assert (trainer.venv / "bin" / "axolotl").is_file()
    assert trainer.run()["state"] == "succeeded"
    second = run_cli("train")
    assert second.exit_code == 0, second.stderr
    assert "install:" not in second.stderr


def test_a_failed_install_says_why_and_creates_no_run(trainer, run_cli, tmp_path):
    trainer.venv = tmp_path / "managed"
    trainer.configure()
    config = trainer.dir / "overbrainer.toml"
    config.write_text(config.read_text() + 'install = "--no-index no-such-package==9.9"\n')
    result = run_cli("train")
    assert result.exit_code == 1
    assert result.stderr.startswith("install: installing Axolotl into")
    assert "error: targets.local.install failed: exit code 1\n" in result.stderr
    assert "No matching distribution found for no-such-package==9.9" in result.stderr
    assert trainer.runs() == []


def test_setup_runs_in_the_project_with_the_venv_first_on_path(trainer, run_cli):
    config = trainer.dir / "overbrainer.toml"
    config.write_text(
        config.read_text()
        + "setup = \"command -v axolotl > setup.out && echo noise && echo 'model ready'\"\n"
    )
    result = run_cli("train")
    assert result.exit_code == 0, result.stderr
    assert (trainer.dir / "setup.out").read_text().strip() == str(trainer.venv / "bin" / "axolotl")
    assert "setup: model ready\n" in result.stderr
    assert "noise" not in result.stderr


def test_a_failed_setup_quotes_its_last_lines_and_creates_no_run(trainer, run_cli):
    config = trainer.dir / "overbrainer.toml"
    config.write_text(config.read_text() + "setup = \"echo 'cannot make the model' && exit 7\"\n")
    result = run_cli("train")
    assert result.exit_code == 1
    assert result.stderr.endswith(
        "error: targets.local.setup failed: exit code 7\n  cannot make the model\n"
    )
    assert trainer.runs() == []
