"""The ``[targets.NAME]`` table of ``kind = "slurm"``, and what a submitted job records."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, Field, field_validator, model_validator

from overbrainer.plugin import NonEmpty, RemotePath, TargetBase
from overbrainer.plugin.files import redact
from overbrainer.plugin.settings import EnvPattern, comma_list

SECRET_NAME = re.compile(r"TOKEN|SECRET|PASS|KEY|CREDENTIAL|PRIVATE|AUTH|COOKIE|SESSION", re.I)
"""Names that look like secrets (``KEY`` or ``PASS`` anywhere: ``SIGNING_KEY``, ``DB_PASS``):
refused in ``pass_env``, whose values are written in the batch script (``scontrol write
batch_script`` prints it to anyone allowed to see the job)."""

TIME_LIMIT = re.compile(r"^(\d+|\d+:\d{1,2}|\d+:\d{1,2}:\d{1,2}|\d+-\d+(:\d{1,2}(:\d{1,2})?)?)$")
"""Slurm's ``--time`` formats: minutes, minutes:seconds, hours:minutes:seconds,
days-hours, days-hours:minutes, days-hours:minutes:seconds."""

MANAGED_OPTIONS = (
    "--export", "--output", "--error", "--chdir", "--signal", "--parsable", "--wrap",
    "--job-name", "--open-mode", "--requeue", "--no-requeue", "-o", "-e", "-D", "-J",
)  # fmt: skip
"""sbatch options this target sets itself: ``sbatch_args`` may not change them."""


def _managed(arg: str) -> bool:
    """Whether ``arg`` sets one of ``MANAGED_OPTIONS``: sbatch takes any unambiguous prefix
    of a long option (``--requ`` is ``--requeue``), and a short one glued to its value."""
    if arg.startswith("--"):
        name = arg.split("=", 1)[0]
        return len(name) > 2 and any(
            option.startswith("--") and option.startswith(name) for option in MANAGED_OPTIONS
        )
    return any(arg.startswith(short) for short in ("-o", "-e", "-D", "-J"))


class SlurmTarget(TargetBase):
    """A Slurm cluster: jobs submitted with ``sbatch``, followed with ``scontrol``.

    ``spool``: a directory every node *and* this machine see at the same path (a shared
    filesystem); each run gets ``spool/<run id>/``, where the job runs and its results are
    read. ``venv`` (or ``python``): the nodes' Python with Axolotl. ``partition``,
    ``account``, ``qos``, ``gpus`` (``--gres=gpu:N``), ``cpus`` (``--cpus-per-task``),
    ``time_limit`` (``--time``, Slurm's format) and ``sbatch_args`` go to ``sbatch``.
    ``snapshot_margin_s``: how long before the time limit Slurm sends the runner SIGTERM
    (``--signal=B:TERM@N``), which ends in a snapshot: a step and a checkpoint must fit.
    ``pass_env``: names (or globs) of overbrainer's environment written into the batch
    script (never secrets: ``HF_TOKEN`` reaches the job by file). ``login``: submit through
    ``ssh`` to this login node (``user@host`` or an alias of ``~/.ssh/config``) instead of
    running Slurm's commands here. ``local_paths``: the nodes see this machine's files.
    """

    kind: Literal["slurm"]
    spool: RemotePath
    venv: RemotePath | None = None
    python: RemotePath | None = None
    device: Literal["cpu", "gpu"] = "gpu"
    partition: NonEmpty | None = None
    account: NonEmpty | None = None
    qos: NonEmpty | None = None
    gpus: int | None = Field(default=None, ge=0)
    cpus: int | None = Field(default=None, ge=1)
    time_limit: NonEmpty | None = None
    snapshot_margin_s: int = Field(default=300, ge=1, le=65535)
    sbatch_args: Annotated[list[str], BeforeValidator(comma_list)] = Field(default_factory=list)
    pass_env: Annotated[list[EnvPattern], BeforeValidator(comma_list)] = Field(default_factory=list)
    login: NonEmpty | None = None
    local_paths: bool = False

    @field_validator("time_limit")
    @classmethod
    def _slurm_time(cls, value: str | None) -> str | None:
        if value is not None and not TIME_LIMIT.match(value):
            raise ValueError(
                "must be in Slurm's --time format: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM "
                "or D-HH:MM:SS"
            )
        return value

    @field_validator("sbatch_args")
    @classmethod
    def _not_managed(cls, args: list[str]) -> list[str]:
        taken = [arg for arg in args if _managed(arg)]
        if taken:
            raise ValueError(f"{', '.join(taken)}: set by the slurm target itself")
        return args

    @field_validator("pass_env")
    @classmethod
    def _no_secrets(cls, names: list[str]) -> list[str]:
        secret = [name for name in names if SECRET_NAME.search(name)]
        if secret:
            raise ValueError(
                f"{', '.join(secret)} looks like a secret: pass_env values are written in the "
                "batch script, which Slurm shows (`scontrol write batch_script`); secrets "
                "reach the job by file"
            )
        return names

    @field_validator("login")
    @classmethod
    def _one_word(cls, login: str | None) -> str | None:
        if login is not None and (login.startswith("-") or any(c.isspace() for c in login)):
            raise ValueError("must be user@host or an ssh alias, without spaces or options")
        return login

    @model_validator(mode="after")
    def _one_python(self) -> SlurmTarget:
        if self.venv is not None and self.python is not None:
            raise ValueError("give venv or python, not both")
        return self

    @property
    def interpreter(self) -> str:
        """The Python that runs ``run_job.py`` on the node."""
        if self.venv is not None:
            return f"{self.venv.rstrip('/')}/bin/python"
        return self.python or "python3"

    @property
    def gpu_count(self) -> int:
        """GPUs asked per job: ``gpus``, or one on a GPU target."""
        if self.gpus is not None:
            return self.gpus
        return 1 if self.device == "gpu" else 0

    def passed_env(self, env: Mapping[str, str]) -> dict[str, str]:
        """The variables of ``env`` that ``pass_env`` names, less any that looks like or holds a
        secret."""
        return {
            name: value
            for name, value in sorted(env.items())
            if any(fnmatch.fnmatchcase(name, pattern) for pattern in self.pass_env)
            and not SECRET_NAME.search(name)
            and redact(value) == value  # nor a value holding a secret, whatever its name
        }


class SlurmJob(BaseModel):
    """What ``launch_job`` records in ``JobHandle.data`` to find the job again."""

    job_id: str
    directory: str
