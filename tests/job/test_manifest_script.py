"""The manifest script's two ways (Python when the host has it, find + sha256sum when not)
print the same records."""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
from pathlib import Path

from tests.helpers.tools import need

from overbrainer.job import scripts
from overbrainer.job.manifest import parse_manifest
from overbrainer.plugin.host import LocalHost

NAMES = ["plain.txt", "with space.txt", "quote'and\"double.txt", "new\nline.txt", "ünï.txt",
         "back\\slash", "-dash", "empty"]


def make_tree(root: Path) -> None:
    deep = root / "output" / "sub dir" / "deeper"
    deep.mkdir(parents=True)
    for i, name in enumerate(NAMES):
        (deep / name).write_bytes(name.encode() * i)
    (root / "output" / "big.bin").write_bytes(os.urandom(3 << 20))
    (root / "output" / "checkpoint-3").mkdir()
    (root / "output" / "checkpoint-3" / "w").write_text("excluded")
    (root / "output" / "sub dir" / "checkpoint-9.bin").write_text("excluded file")
    (root / "output" / "link").symlink_to(root / "output" / "big.bin")
    (root / "output" / "dirlink").symlink_to(deep)
    (root / "metrics.jsonl").write_text("{}\n")
    (root / "outside").mkdir()
    (root / "outside" / "secret").write_text("never listed")
    (root / "linked-out").symlink_to(root / "outside")


def bin_dir(path: Path, programs: list[str], python_marker: Path | None) -> str:
    path.mkdir()
    for program in programs:
        (path / program).symlink_to(shutil.which(program))
    if python_marker is not None:
        wrapper = path / "python3"
        python3 = shlex.quote(need("python3"))
        wrapper.write_text(f"#!/bin/sh\n: > {python_marker}\nexec {python3} \"$@\"\n")
        wrapper.chmod(0o755)
    return str(path)


def test_python_and_sh_manifests_agree(tmp_path):
    root = tmp_path / "run"
    make_tree(root)
    paths = ("output", "metrics.jsonl", "job.log", "linked-out")
    script = scripts.manifest_script(str(root), paths, ("checkpoint-*",))
    tools = ["sh", "find", "sha256sum", "wc"]
    marker = tmp_path / "python-ran"
    with_python = LocalHost({"PATH": bin_dir(tmp_path / "py", tools, marker)}).run(script)
    without = LocalHost({"PATH": bin_dir(tmp_path / "sh", tools, None)}).run(script)
    assert marker.exists()
    assert with_python.code == 0, with_python.stderr
    assert without.code == 0, without.stderr
    fast, slow = parse_manifest(with_python.stdout), parse_manifest(without.stdout)
    assert fast == slow
    expected = {f"output/sub dir/deeper/{name}" for name in NAMES}
    expected |= {"output/big.bin", "metrics.jsonl"}
    assert set(fast) == expected
    for path, entry in fast.items():
        data = (root / path).read_bytes()
        assert (entry.sha256, entry.size) == (hashlib.sha256(data).hexdigest(), len(data))
