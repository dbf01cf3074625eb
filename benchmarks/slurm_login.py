"""Slurm's commands on a login node: one shared ssh connection against one login a command.

    uv run python benchmarks/slurm_login.py [--commands 50] [--repeat 3]

A real sshd on 127.0.0.1 (the tests' fixture) stands for the login node; the slurm target's
``SshCommands`` runs ``--commands`` short commands there (``true``, the cost of a poll's
``scontrol show job`` without Slurm's own time) through its shared master connection, then
the same number with sharing off (a fresh login each: what every poll cost before).
Alternated ``--repeat`` times; printed: the median time a command each way, their ratio
(shared / fresh), and the logins the server saw.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "contrib" / "overbrainer-slurm")]

from benchmarks._harness import median, stopwatch  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commands", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ob-bench-") as work:
        root = Path(work)
        home = root / "home"
        home.mkdir()
        os.environ["HOME"] = str(home)
        os.environ["XDG_RUNTIME_DIR"] = str(root)
        os.environ.pop("SSH_AUTH_SOCK", None)
        from tests.helpers.sshd import Sshd, make_keys, write_client_config

        from overbrainer_slurm import transport

        (root / "keys").mkdir()
        (root / "sshd").mkdir()
        server = Sshd(root / "sshd", make_keys(root / "keys"))
        server.start()
        try:
            alias = write_client_config(home, server)
            shared: list[float] = []
            fresh: list[float] = []
            logins = {"shared": 0, "fresh": 0}
            sharing = transport.control_path
            for _ in range(args.repeat):
                for way, times in (("shared", shared), ("fresh", fresh)):
                    transport.control_path = sharing if way == "shared" else _none  # type: ignore[assignment]
                    before = server.log.read_text().count("Accepted publickey")
                    times.append(_per_command(transport.SshCommands(alias, dict(os.environ)),
                                              args.commands))  # fmt: skip
                    logins[way] += server.log.read_text().count("Accepted publickey") - before
        finally:
            server.stop()
    one, each = median(shared), median(fresh)
    print(f"{args.commands} commands x {args.repeat} on a login node (sshd on 127.0.0.1)")
    print(f"  shared connection: {one * 1000:7.1f} ms a command, {logins['shared']} logins")
    print(f"  a login each:      {each * 1000:7.1f} ms a command, {logins['fresh']} logins")
    print(f"  ratio shared / a login each: {one / each:.2f}")


def _none(login: str, env: object) -> None:
    return None


def _per_command(commands: object, count: int) -> float:
    """The mean wall time of ``count`` commands, the connection closed after them."""
    with stopwatch() as watch:
        for _ in range(count):
            done = commands.run(["true"])  # type: ignore[attr-defined]
            assert done.code == 0, done.err
    commands.close()  # type: ignore[attr-defined]
    return watch.wall / count


if __name__ == "__main__":
    main()
