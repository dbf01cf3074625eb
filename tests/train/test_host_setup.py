"""A host target's `install` (Axolotl into the venv on first use) and `setup` command."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from tests.helpers.tools import need

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


def path_without_uv(tmp_path: Path) -> str:
    """PATH with every directory that holds `uv` replaced by a copy of links to the rest."""
    parts = []
    for number, directory in enumerate(os.environ["PATH"].split(os.pathsep)):
        if not (Path(directory) / "uv").exists():
            parts.append(directory)
            continue
        shadow = tmp_path / f"path-{number}"
        shadow.mkdir()
        for entry in Path(directory).iterdir():
            if entry.name != "uv":
                (shadow / entry.name).symlink_to(entry)
        parts.append(str(shadow))
    return os.pathsep.join(parts)


@pytest.fixture(params=["uv", "pip"])
def installer(request, tmp_path, monkeypatch) -> str:
    """Which installs the target's host can do: with uv (when it is on PATH and pip's
    settings name one index: none here), or with pip alone (uv taken off PATH)."""
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    for name in ("PIP_EXTRA_INDEX_URL", "PIP_INDEX_URL", "PIP_FIND_LINKS"):
        monkeypatch.delenv(name, raising=False)
    if request.param == "uv":
        need("uv")
    else:
        monkeypatch.setenv("PATH", path_without_uv(tmp_path))
        assert shutil.which("uv") is None
    return request.param


INSTALLED = {
    "uv": "install: Installed 1 package",
    "pip": "install: Successfully installed fake-axolotl-cli-0.1",
}
NOT_FOUND = {
    "uv": "no-such-package was not found in the provided package locations",
    "pip": "No matching distribution found for no-such-package==9.9",
}


def test_axolotl_is_installed_into_the_venv_on_first_use_then_reused(
    trainer, run_cli, tmp_path, installer
):
    wheel = make_wheel(tmp_path)
    trainer.venv = tmp_path / "managed-venv"
    trainer.configure()
    config = trainer.dir / "overbrainer.toml"
    config.write_text(config.read_text() + f"install = \"--no-index '{wheel}'\"\n")
    first = run_cli("train")
    assert first.exit_code == 0, first.stderr
    assert "install: installing Axolotl into" in first.stderr
    assert INSTALLED[installer] in first.stderr
    assert ("install: installing with uv" in first.stderr) == (installer == "uv")
    assert (trainer.venv / "bin" / "axolotl").is_file()
    assert trainer.run()["state"] == "succeeded"
    second = run_cli("train")
    assert second.exit_code == 0, second.stderr
    assert "install:" not in second.stderr


def test_a_failed_install_says_why_and_creates_no_run(trainer, run_cli, tmp_path, installer):
    trainer.venv = tmp_path / "managed"
    trainer.configure()
    config = trainer.dir / "overbrainer.toml"
    config.write_text(config.read_text() + 'install = "--no-index no-such-package==9.9"\n')
    result = run_cli("train")
    assert result.exit_code == 1
    assert result.stderr.startswith("install: installing Axolotl into")
    assert "error: targets.local.install failed: exit code 1\n" in result.stderr
    assert NOT_FOUND[installer] in result.stderr
    assert trainer.runs() == []


def test_pip_installs_when_its_settings_name_several_indexes_the_main_one_not_pypi(
    trainer, run_cli, tmp_path, monkeypatch
):
    """uv would take each version's files from the first index, where pip weighs them all:
    only PyPI, which holds every file of a version, may come first."""
    need("uv")
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", f"{tmp_path.as_uri()}/main")
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", f"{tmp_path.as_uri()}/a {tmp_path.as_uri()}/b")
    wheel = make_wheel(tmp_path)
    trainer.venv = tmp_path / "managed-venv"
    trainer.configure()
    config = trainer.dir / "overbrainer.toml"
    config.write_text(config.read_text() + f"install = \"--no-index '{wheel}'\"\n")
    result = run_cli("train")
    assert result.exit_code == 0, result.stderr
    assert "install: installing with pip: its settings name several package indexes" in (
        result.stderr
    )
    assert INSTALLED["pip"] in result.stderr


def uv_settings(tmp_path: Path, pip_conf: str, monkeypatch) -> str:
    """What the install script hands uv for these pip settings: the variables it sets, or
    its pip line when pip installs."""
    from overbrainer.job.install import install_script

    need("uv")
    need("python3")
    config = tmp_path / "pip.conf"
    config.write_text(pip_conf)
    monkeypatch.setenv("PIP_CONFIG_FILE", str(config))
    for name in (
        "PIP_EXTRA_INDEX_URL", "PIP_INDEX_URL", "PIP_FIND_LINKS", "PIP_NO_INDEX",
        "UV_FIND_LINKS", "UV_EXTRA_INDEX_URL", "UV_INDEX_URL", "UV_NO_INDEX",
    ):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    script = install_script(str(tmp_path / "v"), "v", ["x"]).replace(
        "if [ \"$installer\" = uv ]; then",
        'echo "$installer index=${UV_INDEX_URL:-} extra=${UV_EXTRA_INDEX_URL:-}"; exit 0\n'
        "if false; then",
    )
    return subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True).stdout


def test_uv_gets_pypi_first_then_the_extra_indexes_pip_weighs_alike(tmp_path, monkeypatch):
    """A mirror first would give uv its partial set of a version's files (a py310 wheel on
    3.11, where PyPI also has the py311 one pip picks)."""
    mirror = f"{tmp_path.as_uri()}/mirror"
    default = uv_settings(tmp_path, f"[global]\nextra-index-url = {mirror}\n", monkeypatch)
    assert f"uv index= extra=https://pypi.org/simple {mirror}\n" in default
    named = uv_settings(
        tmp_path,
        f"[global]\nindex-url = https://pypi.org/simple/\nextra-index-url = {mirror}\n",
        monkeypatch,
    )
    assert f"uv index= extra=https://pypi.org/simple {mirror}\n" in named
    other = uv_settings(
        tmp_path,
        f"[global]\nindex-url = {tmp_path.as_uri()}/main\nextra-index-url = {mirror}\n",
        monkeypatch,
    )
    assert "installing with pip: its settings name several package indexes" in other
    assert "uv index=" not in other
    alone = uv_settings(tmp_path, f"[global]\nindex-url = {mirror}\n", monkeypatch)
    assert f"uv index={mirror} extra=\n" in alone
    offline = uv_settings(
        tmp_path, f"[global]\nno-index = true\nextra-index-url = {mirror}\n", monkeypatch
    )
    assert "\nuv index=" in offline  # no index is read at all: uv as before


def test_uv_gets_pips_find_links_and_constraints(tmp_path, monkeypatch):
    """What a host's pip settings say reaches uv as its own variables."""
    from overbrainer.job.install import install_script

    need("uv")
    need("python3")
    config = tmp_path / "pip.conf"
    config.write_text(f"[global]\nfind-links = {tmp_path}/wheels\nconstraint = {tmp_path}/c.txt\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(config))
    for name in ("PIP_EXTRA_INDEX_URL", "PIP_INDEX_URL", "PIP_FIND_LINKS", "UV_FIND_LINKS"):
        monkeypatch.delenv(name, raising=False)
    script = install_script(str(tmp_path / "v"), "v", ["x"]).replace(
        "if [ \"$installer\" = uv ]; then",
        'echo "find-links=$UV_FIND_LINKS constraint=$UV_CONSTRAINT"; exit 0\nif false; then',
    )
    done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True)
    assert f"find-links={tmp_path}/wheels constraint={tmp_path}/c.txt" in done.stdout


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
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path(os.environ["HOME"]) / ".cache")
    log = cache / "overbrainer" / "logs" / "setup-local.log"
    assert result.stderr.endswith(
        "error: targets.local.setup failed: exit code 7\n  cannot make the model\n"
        f"  (the whole output: {log})\n"
    )
    assert log.read_text() == "cannot make the model\n"
    assert trainer.runs() == []


def test_pips_collecting_lines_are_one_count_and_its_lists_a_number(trainer, run_cli):
    lines = "".join(f"echo 'Collecting package{n}'; " for n in range(60))
    setup = (f"{lines}echo 'Installing collected packages: a, b, c, d, e'; "
             "echo 'Successfully installed a-1 b-1 c-1 d-1 e-1'")
    config = trainer.dir / "overbrainer.toml"
    config.write_text(config.read_text() + f'setup = "{setup}"\n')
    result = run_cli("train")
    assert result.exit_code == 0, result.stderr
    setup_lines = [line for line in result.stderr.splitlines() if line.startswith("setup: ")]
    assert "Collecting" not in result.stderr
    assert setup_lines[0] == "setup: 1 package(s) collected so far, 0 s"
    assert "setup: Installing 5 collected packages" in setup_lines
    assert "setup: Successfully installed 5 packages" in setup_lines
    assert setup_lines[-1].startswith("setup: done in ")
    assert setup_lines[-1].endswith(" (60 packages collected)")
    assert len(setup_lines) <= 6


def test_uvs_list_of_packages_is_not_shown_and_the_install_ends_with_its_time(trainer, run_cli):
    listing = "".join(f"echo ' + package{n}==1.0'; " for n in range(40))
    setup = (
        "echo 'Resolved 40 packages in 1.2s'; echo 'Prepared 40 packages in 3.4s'; "
        f"echo 'Installed 40 packages in 0.5s'; {listing}"
    )
    config = trainer.dir / "overbrainer.toml"
    config.write_text(config.read_text() + f'setup = "{setup}"\n')
    result = run_cli("train")
    assert result.exit_code == 0, result.stderr
    setup_lines = [line for line in result.stderr.splitlines() if line.startswith("setup: ")]
    assert "package39==" not in result.stderr
    assert setup_lines[:3] == [
        "setup: Resolved 40 packages in 1.2s",
        "setup: Prepared 40 packages in 3.4s",
        "setup: Installed 40 packages in 0.5s",
    ]
    assert setup_lines[-1].startswith("setup: done in ")
    assert len(setup_lines) == 4


def test_an_axolotl_release_named_exactly_installs_with_its_shipped_constraints(tmp_path):
    """pip and uv are handed the exact versions: nothing left to resolve."""
    from overbrainer.job.install import constraints_of, install_script

    need("python3")
    shipped = constraints_of(["torch==2.13.0", "axolotl==0.19.0"])
    assert "\ntransformers==" in shipped
    assert "\ntorch==" not in shipped and "axolotl==0.19.0\n" in shipped
    for installer in ("uv", "pip"):
        script = install_script(str(tmp_path / "v"), "v", ["torch==2.13.0", "axolotl==0.19.0"])
        script = script.replace("\ninstaller=pip\n", f"\ninstaller={installer}\n").replace(
            "if command -v uv", "if false"
        )
        fake = tmp_path / "bin"
        fake.mkdir(exist_ok=True)
        for name in ("uv", "pip"):  # each says what it was given, and the constraints' lines
            (fake / name).write_text(
                "#!/bin/sh\n[ \"$1\" = venv ] && exit 0\necho \"$@\"\n"
                'while [ "$1" != -c ]; do shift; done; grep -c == "$2" || true\n'
            )
            (fake / name).chmod(0o755)
        (tmp_path / "v" / "bin").mkdir(parents=True, exist_ok=True)
        target = tmp_path / "v" / "bin" / "pip"
        target.unlink(missing_ok=True)
        target.symlink_to(fake / "pip")
        # The venv's Python says whether it is the one the constraints were resolved on.
        (tmp_path / "v" / "bin" / "python").write_text('#!/bin/sh\nexit "$FAKE_FIT"\n')
        (tmp_path / "v" / "bin" / "python").chmod(0o755)
        for fits, lines in (("0", sum("==" in line for line in shipped.splitlines())), ("1", 0)):
            done = subprocess.run(
                ["sh", "-c", script.replace("uv pip install", f"{fake}/uv pip install")],
                capture_output=True, text=True, check=True, env={**os.environ, "FAKE_FIT": fits},
            )
            said = done.stdout.splitlines()
            assert said[-2].endswith("torch==2.13.0 axolotl==0.19.0 -c " + said[-2].split()[-1])
            assert int(said[-1]) == lines, (fits, done.stderr)
    assert constraints_of(["axolotl==0.20.0"]) == ""
    assert constraints_of(["torch==2.12.0", "axolotl==0.19.0"]) == ""  # another torch
    assert constraints_of(["axolotl"]) == ""
    assert " -c " not in install_script("v", "v", ["axolotl==0.20.0"])
