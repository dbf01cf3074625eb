"""Train on a Slurm cluster: ``kind = "slurm"``.

Each run's job directory is copied to ``spool/<run id>/`` (a directory every node and this
machine see) and submitted with ``sbatch``: a batch script that ``exec``s the runner there.
The job is followed through ``scontrol`` and the runner's files; a time limit ends in a
snapshot (``--signal=B:TERM@N``); ``train cancel`` kills every process of the job at once.
Secrets travel as ``.secrets.json`` in the job directory, never in what Slurm stores or
shows. Slurm's commands run here, or on a login node through ssh (``login``). It imports
only ``overbrainer.plugin``; ``plugin`` (its entry point) turns :class:`SlurmExecutor`'s
methods into the hooks.

    [targets.cluster]
    kind = "slurm"
    spool = "/shared/overbrainer"
    venv = "/shared/axolotl-venv"
    partition = "gpu"
    time_limit = "4:00:00"
"""

from __future__ import annotations

from pydantic import BaseModel

from overbrainer.plugin import ExecutorHooks, Project, RunRecord
from overbrainer_slurm.executor import SlurmExecutor
from overbrainer_slurm.target import SlurmJob, SlurmTarget

__all__ = ["SlurmExecutor", "SlurmJob", "SlurmTarget", "plugin"]


def create(name: str, target: BaseModel, project: Project, run: RunRecord | None) -> SlurmExecutor:
    assert isinstance(target, SlurmTarget)  # the adapter calls it for its own kind only
    return SlurmExecutor.create(name, target, project)


plugin = ExecutorHooks(SlurmExecutor, targets={"slurm": SlurmTarget}, create=create)
