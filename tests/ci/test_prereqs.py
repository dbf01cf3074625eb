""".ci/prereqs, the README's first test command: it installs what ``need`` asks for, only
what is missing, and touches nothing (not even ``apt-get update``) when nothing is. Run
with stand-ins of ``dpkg-query``, ``apt-get`` and ``id`` first on PATH."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from tests.helpers.tools import PACKAGES

ROOT = Path(__file__).parents[2]
PREREQS = ROOT / ".ci" / "prereqs"

STANDINS = {
    # Installed: the packages named in $INSTALLED.
    "dpkg-query": 'for p in $INSTALLED; do [ "$p" = "$3" ] && printf "install ok installed"'
    ' && exit 0; done\necho "dpkg-query: no packages found matching $3" >&2; exit 1\n',
    "apt-get": 'echo "apt-get $*" >> "$APT_LOG"\n',
    "id": 'echo "$UID_IS"\n',
}


def prereqs(tmp_path: Path, installed: set[str], uid: int = 0) -> tuple[int, list[str], str]:
    """Run the script: its exit code, the apt-get calls and its stderr."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, body in STANDINS.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}")
        (bin_dir / name).chmod(0o755)
    log = tmp_path / "apt.log"
    log.write_text("")
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "INSTALLED": " ".join(sorted(installed)),
        "APT_LOG": str(log),
        "UID_IS": str(uid),
    }
    done = subprocess.run(
        [str(PREREQS)], env=env, capture_output=True, text=True, timeout=30, check=False
    )
    return done.returncode, log.read_text().splitlines(), done.stderr


ALL = set(PACKAGES.values())


def test_nothing_is_done_when_everything_is_installed(tmp_path):
    assert prereqs(tmp_path, ALL) == (0, [], "")
    assert prereqs(tmp_path, ALL, uid=1000) == (0, [], ""), "no root needed to find nothing"


def test_on_a_fresh_machine_it_installs_every_package_the_tests_ask_for(tmp_path):
    code, apt, _ = prereqs(tmp_path, set())
    assert code == 0
    assert apt[0] == "apt-get update -qq"
    assert apt[1].startswith("apt-get install -y -qq ")
    assert set(apt[1].split()[4:]) == ALL
    assert len(apt) == 2


@pytest.mark.parametrize("package", sorted(ALL))
def test_only_what_is_missing_is_installed(tmp_path, package):
    code, apt, _ = prereqs(tmp_path, ALL - {package})
    assert (code, apt) == (0, ["apt-get update -qq", f"apt-get install -y -qq {package}"])


def test_a_user_is_told_to_run_it_as_root(tmp_path):
    code, apt, err = prereqs(tmp_path, ALL - {"busybox"}, uid=1000)
    assert (code, apt) == (1, [])
    assert err == f"prereqs: busybox to install: run it as root (sudo {PREREQS})\n"


def test_the_readme_names_it_beside_its_test_command_and_ci_runs_it():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "\n    sudo .ci/prereqs\n    uv run pytest\n" in readme
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert ".ci/prereqs" in ci
    assert not [line for line in ci if "apt-get" in line], "one place installs: .ci/prereqs"
