"""The session's one-node Slurm on 127.0.0.1, for the package's tests and the CLI's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from overbrainer_slurm.localcluster import PROGRAMS, LocalSlurm


def need_slurm() -> None:
    """Skip (fail under CI) when a program of the test Slurm is missing."""
    try:
        from tests.helpers.tools import need
    except ImportError:  # the package's tests run alone, outside overbrainer's checkout
        from overbrainer_slurm.localcluster import find_program

        for program in PROGRAMS:
            if find_program(program) is None:
                pytest.skip(f"{program} is not installed (Debian: slurmctld slurmd munge)")
        return
    for program in ("munged", "slurmctld", "slurmd", "sbatch"):
        need(program)


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSlurm]:
    """A controller and a node, started once; every daemon stopped by pid at the end."""
    need_slurm()
    root: Path = tmp_path_factory.mktemp("slurm")
    cluster = LocalSlurm(root=root, kill_wait_s=30).start()
    try:
        yield cluster
    finally:
        cluster.stop()
        alive = [name for name, process in cluster.processes.items() if process.poll() is None]
        assert not alive, f"Slurm daemons outlived the cluster: {alive}"
