"""The SSH tests' bench: ``bench`` drives a ``HostExecutor`` over an ``SshHost`` like
``tests/job`` does locally (the sshd and its client: ``tests/fixtures/sshd.py``; helpers:
``tests/helpers/sshd.py``)."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tests.helpers.sshd import Bench, Sshd

from overbrainer.plugin.host import HostExecutor


@pytest.fixture
def make_bench(ssh_alias: str, sshd: Sshd, tmp_path: Path) -> Iterator[Callable[..., Bench]]:
    """``make_bench(**target)``: a ``Bench`` whose executor has its own ``SshHost`` to
    ``sshd`` and an ``SshTarget`` with the given keys (``runtime="docker"``, ...)."""
    from overbrainer_ssh import SshTarget
    from overbrainer_ssh.host import SshHost

    hosts: list[SshHost] = []

    def make(**options: str) -> Bench:
        target = SshTarget(kind="ssh", host=ssh_alias, **options)
        hosts.append(SshHost("box", ssh_alias))
        executor = HostExecutor("box", target.host_runtime(), hosts[-1], target.workdir)
        return Bench(executor, tmp_path)

    yield make
    for host in hosts:
        host.close()
    # Whatever a test left running is stopped by its process group.
    for pid_file in sshd.home.glob("overbrainer/*/job.pid"):
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.killpg(int(pid_file.read_text()), signal.SIGKILL)


@pytest.fixture
def bench(make_bench: Callable[..., Bench]) -> Bench:
    """A ``Bench`` over SSH with a native runtime, already connected."""
    bench = make_bench()
    bench.executor.host.connect()
    return bench


