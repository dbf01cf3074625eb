"""``need``: a test whose system program is missing skips, saying how to install it, and
fails under CI. Checked in a pytest of its own whose PATH hides one program at a time."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest
from tests.helpers.tools import OTHERS, PACKAGES, find, in_ci, install_hint, need, search_path

ROOT = Path(__file__).parents[2]
PROGRAMS = sorted({*PACKAGES, *OTHERS})
WATCHDOG_ON_BUSYBOX = (
    "tests/runpod/test_runpod_lifecycle.py::"
    "test_the_watchdog_asks_for_a_snapshot_before_its_deadline_then_deletes[busybox]"
)


def path_hiding(program: str, directory: Path) -> str:
    """A PATH of one directory: a link to every program this one finds (the sbin dirs
    beside PATH included), but ``program``. The sbin beside it does not exist."""
    shown = directory / "bin"
    shown.mkdir()
    for entry in map(Path, search_path(os.environ["PATH"]).split(os.pathsep)):
        for item in entry.iterdir() if entry.is_dir() else ():
            link = shown / item.name
            if item.name != program and not link.is_symlink():
                link.symlink_to(item)
    return str(shown)


def run_pytest(
    args: list[str], path: str, ci: str | None, tmp: Path, cwd: Path = ROOT, plugins: bool = True
) -> dict[str, str]:
    """Run pytest on ``args`` in ``cwd`` with ``PATH=path`` and ``CI=ci`` (unset: None), its
    installed plugins loaded or not (a second of its start), its files in ``tmp``; the
    outcome of each test (``passed``, ``skipped``, ``failed``, ``error``) with its message."""
    tmp.mkdir(parents=True)
    env = {key: value for key, value in os.environ.items() if key != "CI"}
    env |= {"PATH": path, "PYTHONPATH": str(ROOT)} | ({} if ci is None else {"CI": ci})
    if not plugins:
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    # Its own basetemp: in the shared one it would clean away this run's directories.
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         f"--basetemp={tmp / 'basetemp'}", f"--junitxml={tmp / 'report.xml'}", *args],
        cwd=cwd, env=env, capture_output=True, timeout=120, check=False,
    )  # fmt: skip
    outcomes = {}
    for case in ElementTree.parse(tmp / "report.xml").iter("testcase"):
        result = next((e for e in case if e.tag in ("failure", "skipped", "error")), None)
        tag = "passed" if result is None else "failed" if result.tag == "failure" else result.tag
        message = "" if result is None else result.get("message", "").removeprefix("Failed: ")
        outcomes[case.get("name", "")] = f"{tag}: {message}"
    return outcomes


def run_needing(programs: list[str], path: str, ci: str | None, tmp: Path) -> dict[str, str]:
    """The outcomes of a test file whose test ``test_<program>`` needs ``program``, for each
    one, run with ``PATH=path`` and ``CI=ci``: pytest alone, its plugins not loaded."""
    suite = tmp / "suite"
    suite.mkdir(parents=True)
    (suite / "pytest.ini").write_text("[pytest]\n")
    (suite / "test_needs.py").write_text("from tests.helpers.tools import need\n" + "".join(
        f"\n\ndef test_{program.replace('-', '_')}():\n"
        f"    assert need({program!r}).endswith('/{program}')\n"
        for program in programs
    ))  # fmt: skip
    outcomes = run_pytest(["test_needs.py"], path, ci, tmp / "run", cwd=suite, plugins=False)
    return {name.removeprefix("test_").replace("_", "-"): outcome for name, outcome in
            outcomes.items()}  # fmt: skip


def test_every_program_it_knows_says_how_to_install_it():
    for program in PACKAGES:
        assert install_hint(program) == f"apt-get install {PACKAGES[program]} (or run .ci/prereqs)"
    for program in OTHERS:
        assert install_hint(program) == OTHERS[program]


@pytest.mark.parametrize("program", PROGRAMS)
def test_a_hidden_program_skips_with_how_to_install_it_and_fails_under_ci(program, tmp_path):
    path = path_hiding(program, tmp_path)
    reason = f"{program} is not installed: {install_hint(program)}"
    skipped = run_needing([program], path, None, tmp_path / "no-ci")
    assert skipped == {program: f"skipped: {reason}"}
    failed = run_needing([program], path, "true", tmp_path / "ci")
    assert failed == {program: f"failed: {reason} [CI is set: a missing tool fails]"}


def test_every_program_found_passes_under_ci_and_ci_false_is_no_ci(tmp_path):
    for program in PROGRAMS:
        need(program)
    everything = run_needing(PROGRAMS, os.environ["PATH"], "true", tmp_path / "all")
    assert everything == dict.fromkeys(PROGRAMS, "passed: ")
    no_busybox = run_needing(["busybox"], path_hiding("busybox", tmp_path), "false", tmp_path / "f")
    assert no_busybox["busybox"].startswith("skipped: busybox is not installed")


def test_the_watchdog_under_busybox_names_busybox_when_it_is_missing(tmp_path):
    """The case that failed with an IndexError, no pod made: now a skip that says why."""
    need("sshd")  # what its fixture needs, there
    need("curl")
    path = path_hiding("busybox", tmp_path)
    reason = "busybox is not installed: apt-get install busybox (or run .ci/prereqs)"
    skipped = run_pytest([WATCHDOG_ON_BUSYBOX], path, None, tmp_path / "no-ci")
    assert list(skipped.values()) == [f"skipped: {reason}"]
    [failed] = run_pytest([WATCHDOG_ON_BUSYBOX], path, "true", tmp_path / "ci").values()
    assert failed.startswith(f"failed: {reason}"), failed


def test_sshd_is_found_in_the_sbin_beside_a_bin_of_path(tmp_path):
    (tmp_path / "bin").mkdir()
    (tmp_path / "sbin").mkdir()
    sshd = tmp_path / "sbin" / "sshd"
    sshd.write_text("#!/bin/sh\n")
    sshd.chmod(0o755)
    assert find("sshd", path=str(tmp_path / "bin")) == str(sshd)
    assert find("sshd", path=str(tmp_path / "sbin" / "nowhere")) is None
    assert find("curl", path=str(tmp_path / "bin")) is None


def test_relative_entries_of_path_give_absolute_paths(tmp_path, monkeypatch):
    (tmp_path / "bin").mkdir()
    curl = tmp_path / "bin" / "curl"
    curl.write_text("#!/bin/sh\n")
    curl.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    assert find("curl", path="bin") == str(curl)


@pytest.mark.parametrize(
    ("value", "ci"),
    [("", False), ("0", False), ("false", False), ("False", False), ("true", True),
     ("1", True), ("yes", True)],
)  # fmt: skip
def test_ci_is_any_value_but_empty_0_or_false(value, ci):
    assert in_ci({"CI": value}) is ci
    assert in_ci({}) is False
