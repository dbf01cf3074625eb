"""The first quickstart `run` from a fresh clone, Axolotl's install included.

A fresh clone of this repository (its committed HEAD), its own uv cache (nothing
downloaded before), the quickstart's Axolotl venv pointed at a new directory (the user's
``~/.cache/overbrainer/axolotl-0.19.0`` is never touched), then
`uv run overbrainer -C examples/quickstart run` timed whole, each output line stamped
with its second so the install, the stages and the training are apart. The yardstick,
in the same run and with a cache of its own too: `uv pip install torch==2.13.0
axolotl==0.19.0` into a new venv, handed the same package sources as the install script
hands uv (PyPI first, then pip's extra indexes and find-links). Goal: the whole run in
2 minutes or less.

    uv run python benchmarks/quickstart.py [--keep]

Each side downloads torch and Axolotl's tree (about 1 GB): it needs the package
registries, and a few minutes.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUIET = {"AXOLOTL_DO_NOT_TRACK": "1", "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1"}
INSTALL = ["torch==2.13.0", "axolotl==0.19.0"]
CONSTRAINTS = ROOT / "core/overbrainer/job/target/constraints/axolotl-0.19.0.txt"


def uv_sources() -> dict[str, str]:
    """The variables the install script would give uv on this machine (its pip settings
    read the same way), so that both sides fetch from the same places."""
    sys.path.insert(0, str(ROOT / "core"))
    from overbrainer.job.install import _PIP_TO_UV

    said = subprocess.run(
        [sys.executable, "-"], input=_PIP_TO_UV, capture_output=True, text=True, check=True
    ).stdout
    return dict(re.findall(r"export (UV_[A-Z_]+|SSL_CERT_FILE)='?([^'\n]*)'?", said))


def quickstart(work: Path) -> tuple[float, list[tuple[float, str]]]:
    """The whole first run, and its stamped lines."""
    clone = work / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    config = clone / "examples/quickstart/overbrainer.toml"
    text = config.read_text(encoding="utf-8")
    venv = work / "axolotl-venv"
    text, count = re.subn(r'(?m)^venv = ".*"$', f'venv = "{venv}"', text)
    assert count == 1, "the quickstart names no venv"
    config.write_text(text, encoding="utf-8")
    env = {**os.environ, **QUIET, "UV_CACHE_DIR": str(work / "uv-cache-run")}
    env.pop("VIRTUAL_ENV", None)
    started = time.monotonic()
    lines: list[tuple[float, str]] = []
    with subprocess.Popen(
        ["uv", "run", "overbrainer", "-C", "examples/quickstart", "run"],
        cwd=clone, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    ) as process:  # fmt: skip
        assert process.stdout is not None
        for line in process.stdout:
            lines.append((time.monotonic() - started, line.rstrip("\n")))
    wall = time.monotonic() - started
    if process.returncode != 0:
        sys.exit("\n".join(text for _, text in lines[-20:]) + "\nthe quickstart failed")
    return wall, lines


def yardstick(work: Path) -> float:
    """`uv pip install` of torch and Axolotl into a new venv, from a cold cache."""
    env = {**os.environ, **uv_sources(), "UV_CACHE_DIR": str(work / "uv-cache-bare")}
    env.setdefault("UV_INDEX_STRATEGY", "unsafe-best-match")
    venv = work / "bare-venv"
    subprocess.run(["uv", "venv", "-q", "--python", "3.11", str(venv)], env=env, check=True)
    started = time.monotonic()
    subprocess.run(
        ["uv", "pip", "install", "-q", "--python", str(venv / "bin/python"), *INSTALL,
         "-c", str(CONSTRAINTS)],
        env=env, check=True,
    )  # fmt: skip
    return time.monotonic() - started


def first_at(lines: list[tuple[float, str]], prefix: str) -> float | None:
    return next((at for at, text in lines if text.startswith(prefix)), None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ob-quickstart-"))
    try:
        bare = yardstick(work)
        wall, lines = quickstart(work)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    install = first_at(lines, "install: installing Axolotl")
    installed = first_at(lines, "install: done in")
    train = first_at(lines, "train: run ")
    print(f"yardstick, uv pip install of torch + Axolotl (cold cache): {bare:6.1f} s")
    print(f"first quickstart run, whole:                              {wall:6.1f} s "
          f"({wall / bare:.2f}x the yardstick; goal 120 s)")
    if install is not None and installed is not None:
        print(f"  before the install (project sync, plan):            {install:6.1f} s")
        print(f"  Axolotl's install:                                  {installed - install:6.1f} s")
    if installed is not None and train is not None:
        print(f"  setup and the stages:                               {train - installed:6.1f} s")
    if train is not None:
        print(f"  training, from the run's start to the end:          {wall - train:6.1f} s")
    if args.keep:
        print(f"kept: {work}")


if __name__ == "__main__":
    main()
