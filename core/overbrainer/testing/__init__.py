"""The conformance kit for executor packages: the contract suite and a fake trainer.

``ExecutorContract`` holds every test an executor must pass (see
:mod:`overbrainer.testing.contract`); ``make_fake_venv`` makes a venv whose ``axolotl`` is
the fake trainer of :mod:`overbrainer.testing.fake_axolotl`, which drives the real metrics
plugin in seconds. ``runner_signaller`` delivers SIGTERM to the runner of a job on a POSIX
host of this machine, ``job_signaller`` to every process of it. Importing this module needs pytest.
"""

from __future__ import annotations

from overbrainer.testing.contract import ContractTarget, Driver, ExecutorContract
from overbrainer.testing.fake_axolotl import make_fake_venv
from overbrainer.testing.signals import job_signaller, runner_signaller

__all__ = [
    "ContractTarget",
    "Driver",
    "ExecutorContract",
    "job_signaller",
    "make_fake_venv",
    "runner_signaller",
]
