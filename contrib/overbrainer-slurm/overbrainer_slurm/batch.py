"""What is submitted: sbatch's options and the batch script, both free of secrets.

The script only moves to the job directory and ``exec``s the runner, so the runner is the
batch shell Slurm signals (``--signal=B:TERM@N``). ``--export=NONE``: the job starts from
the user's environment on the node, not from this process's (which may hold secrets).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping

from overbrainer.plugin import layout
from overbrainer_slurm.target import SlurmTarget


def node_path(path: str) -> str:
    """``path`` quoted for the node's shell, a leading ``~/`` as the node's ``$HOME``."""
    if path.startswith("~/"):
        return '"$HOME"/' + shlex.quote(path[2:])
    return shlex.quote(path)


def sbatch_options(target: SlurmTarget, run_id: str, where: str) -> list[str]:
    """sbatch's options for the run ``run_id`` whose job directory is ``where``."""
    options = [
        f"--job-name=overbrainer-{run_id}",
        f"--chdir={where}",
        f"--output={where}/{layout.JOB_LOG}",
        "--open-mode=append",
        "--export=NONE",
        # A requeued job would run the runner again in a directory it already wrote (its
        # secrets read and gone): a node's failure ends the run instead.
        "--no-requeue",
        # Before the time limit (and Slurm's TERM to every process, then KILL after its
        # KillWait), the runner alone is asked to stop: it saves a snapshot.
        f"--signal=B:TERM@{target.snapshot_margin_s}",
    ]
    if target.partition:
        options.append(f"--partition={target.partition}")
    if target.account:
        options.append(f"--account={target.account}")
    if target.qos:
        options.append(f"--qos={target.qos}")
    if target.gpu_count:
        options.append(f"--gres=gpu:{target.gpu_count}")
    if target.cpus:
        options.append(f"--cpus-per-task={target.cpus}")
    if target.time_limit:
        options.append(f"--time={target.time_limit}")
    return [*options, *target.sbatch_args]


def batch_script(target: SlurmTarget, run_id: str, where: str, env: Mapping[str, str]) -> str:
    """The batch script: ``pass_env``'s variables, then the runner in its directory."""
    exports = "".join(
        f"export {name}={shlex.quote(value)}\n" for name, value in target.passed_env(env).items()
    )
    return (
        "#!/bin/sh\n"
        f"# overbrainer run {run_id}: the job's runner, in its directory on the node.\n"
        # A slurmd that is not root cannot load the user's environment: no PATH at all.
        'export PATH="${PATH:-/usr/local/bin:/usr/bin:/bin}"\n'
        f"{exports}"
        f"cd {shlex.quote(where)} || exit 1\n"
        f"exec {node_path(target.interpreter)} {layout.RUNNER}\n"
    )
