"""Artifact retrieval over SSH: overbrainer's verified collect against tar over ssh and scp.

About 1 GB (a few large files and 1,000 small ones) in a run's ``output/`` on a loopback
sshd (the test suite's fixture: its own keys, a temporary HOME, never ~/.ssh), fetched by

- ``collect``: ``HostExecutor.collect`` over ``SshHost``: the target's SHA-256 manifest,
  one tar stream, every file verified at home (also shown phase by phase);
- ``tar|ssh``: ``ssh box 'tar c output' | tar x`` with the OpenSSH client;
- ``scp -r``: OpenSSH's scp (SFTP protocol), no verification.

    uv run python benchmarks/transfer.py [--mb 1024] [--small 1000] [--repeat 3]

Prints the median time of each method, its throughput, and its ratio to ``tar|ssh``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.helpers, benchmarks._harness

from benchmarks._harness import median, timed  # noqa: E402

CHUNK = 8 << 20


def make_tree(root: Path, total_mb: int, small: int) -> tuple[int, int]:
    """Random (incompressible) files under ``root/output``: 1,000 small ones (1-64 KiB)
    and four large ones sharing what is left of ``total_mb``. Returns (files, bytes)."""
    import random

    rng = random.Random(1)
    out = root / "output"
    (out / "small").mkdir(parents=True)
    written = 0
    for i in range(small):
        size = rng.randint(1 << 10, 64 << 10)
        (out / "small" / f"part {i:04d}.json").write_bytes(os.urandom(size))
        written += size
    large = max(total_mb * (1 << 20) - written, 0) // 4
    for i in range(4):
        with (out / f"model-{i:05d}-of-00004.safetensors").open("wb") as file:
            left = large
            while left:
                block = os.urandom(min(CHUNK, left))
                file.write(block)
                left -= len(block)
        written += large
    (root / "metrics.jsonl").write_text('{"event":"end"}\n')
    return small + 4 + 1, written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=1024, help="total size in MiB")
    parser.add_argument("--small", type=int, default=1000, help="number of small files")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each method")
    args = parser.parse_args()

    from loguru import logger

    logger.remove()  # the library's debug lines would interleave with the table
    from tests.helpers import sshd as fixture  # the tests' sshd harness (it needs pytest)

    work = Path(tempfile.mkdtemp(prefix="overbrainer-transfer-"))
    home = work / "client-home"
    home.mkdir()
    os.environ["HOME"] = str(home)  # the client's ~/.ssh is the benchmark's own
    os.environ.pop("SSH_AUTH_SOCK", None)
    (work / "keys").mkdir()
    server = fixture.Sshd(work / "sshd", fixture.make_keys(work / "keys"))
    server.dir.mkdir()
    server.start()
    try:
        run_bench(fixture, server, home, work, args)
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


def run_bench(fixture, server, home: Path, work: Path, args: argparse.Namespace) -> None:
    from overbrainer.job.executor import HostExecutor
    from overbrainer.job.record import RunRecord
    from overbrainer.job.spec import ArtifactSpec
    from overbrainer_ssh import SshTarget
    from overbrainer_ssh.host import SshHost

    alias = fixture.write_client_config(home, server)
    config = str(home / ".ssh" / "config")
    remote = server.home / "overbrainer" / "bench_20260101-000000"
    files, size = make_tree(remote, args.mb, args.small)
    print(f"{files} files, {size / 1e6:.0f} MB, on sshd 127.0.0.1:{server.port}; "
          f"{os.cpu_count()} CPUs; median of {args.repeat} runs each")

    host = SshHost("bench", alias)
    host.connect()
    executor = HostExecutor("bench", SshTarget(kind="ssh", host=alias), host, "overbrainer")
    run = RunRecord(id=remote.name, target="bench", created="2026-01-01T00:00:00Z",
                    remote_dir=str(remote))
    spec = ArtifactSpec(paths=("output", "metrics.jsonl"), required=("output",))

    phases: dict[str, list[float]] = {"manifest": [], "download": [], "verify": []}
    real_run, real_download = host.run, host.download

    def run_timed(script: str, input: bytes = b"", timeout: float | None = 60):
        started = time.perf_counter()
        done = real_run(script, input=input, timeout=timeout)
        if "sha256sum" in script:
            phases["manifest"].append(time.perf_counter() - started)
        return done

    def download_timed(root: str, names: list[str], dest: Path) -> None:
        phases["download"].append(timed(lambda: real_download(root, names, dest))[0])

    host.run, host.download = run_timed, download_timed

    def fresh(name: str) -> Path:
        dest = work / "dest" / name
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        return dest

    def ours() -> None:
        dest = fresh("collect")
        total, _ = timed(lambda: executor.collect(run, spec, dest))
        phases["verify"].append(total - phases["manifest"][-1] - phases["download"][-1])

    ssh = ["ssh", "-F", config, "-o", "BatchMode=yes"]

    def tar_ssh() -> None:
        dest = fresh("tar")
        reader = subprocess.Popen([*ssh, alias, f"cd {remote} && tar cf - output metrics.jsonl"],
                                  stdout=subprocess.PIPE)
        subprocess.run(["tar", "xf", "-", "-C", str(dest)], stdin=reader.stdout, check=True)
        assert reader.wait() == 0

    def scp() -> None:
        dest = fresh("scp")
        subprocess.run(["scp", "-q", "-r", "-F", config, f"{alias}:{remote}/output",
                        f"{alias}:{remote}/metrics.jsonl", str(dest)], check=True)

    methods = {"collect": ours, "tar|ssh": tar_ssh, "scp -r": scp}
    times: dict[str, list[float]] = {name: [] for name in methods}
    for _ in range(args.repeat):
        for name, method in methods.items():
            times[name].append(timed(method)[0])
    host.close()

    base = median(times["tar|ssh"])
    print(f"{'method':<22}{'seconds':>9}{'MB/s':>8}{'vs tar|ssh':>12}")
    for name, values in times.items():
        seconds = median(values)
        print(f"{name:<22}{seconds:>9.2f}{size / 1e6 / seconds:>8.0f}{seconds / base:>11.2f}x")
    for name, values in phases.items():
        seconds = median(values)
        print(f"  collect: {name:<11}{seconds:>9.2f}{size / 1e6 / seconds:>8.0f}")


if __name__ == "__main__":
    sys.exit(main())
