"""The slurm target (contrib/overbrainer-slurm) through the CLI, on a real one-node Slurm.

Runs in the core's environment: the target needs only Slurm's commands (``.ci/prereqs``
installs them with the daemons). The package's own tests (the executor contract, secrets,
cancel, the time limit) are collected here too.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from tests.train.conftest import trainer  # noqa: F401 - the fixture

PACKAGE = Path(__file__).parents[2] / "contrib" / "overbrainer-slurm"


def _package_tests():
    """The package's own tests, collected here too (they import its package)."""
    sys.path[:0] = [str(PACKAGE), str(PACKAGE / "tests")]
    modules = {}
    for name in ("test_cluster", "test_contract"):
        spec = importlib.util.spec_from_file_location(
            f"overbrainer_slurm_{name}", PACKAGE / "tests" / f"{name}.py"
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        modules[name] = module
    return modules


_tests = _package_tests()
TestSlurmExecutor = _tests["test_contract"].TestSlurmExecutor
test_a_batch_job_runs_and_a_held_one_is_cancelled_before_it_starts = _tests[
    "test_cluster"
].test_a_batch_job_runs_and_a_held_one_is_cancelled_before_it_starts
slurm_cluster = _tests["test_contract"].slurm_cluster
