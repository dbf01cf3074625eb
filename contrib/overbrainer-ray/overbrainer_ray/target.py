"""The ``[targets.NAME]`` table of ``kind = "ray"``, and what a launched job records."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from overbrainer.plugin import NonEmpty, RemotePath, TargetBase
from overbrainer.plugin.settings import Finite

SECRET_NAME = re.compile(
    r"TOKEN|SECRET|PASS|AUTH|CREDENTIAL|PRIVATE|COOKIE|SESSION|SIGNATURE"
    r"|(?:^|_)(?:API_?)?KEY(?:$|_|S$)|APIKEY",
    re.I,
)
"""Names of variables that look like secrets: refused in ``runtime_env.env_vars``, which the
Ray dashboard serves to anyone who can reach it."""

MANAGED_RUNTIME_ENV = ("working_dir", "py_modules")
"""Keys of ``runtime_env`` this target owns: the job lives in ``storage``, not in a package."""


class RayTarget(TargetBase):
    """A Ray cluster reached through its Jobs API (the dashboard's HTTP address).

    ``storage``: a directory every node of the cluster *and* this machine see at the same
    path (a shared filesystem; for a local cluster, any local directory). Each run gets
    ``storage/<run id>/``; the job runs there, and its results are read from there.
    ``venv`` (or ``python``): the Python with Axolotl on the nodes; ``runtime_env``: Ray's
    own way to build one (``pip``, ``conda``, ``image_uri``...), passed as it is.
    ``num_cpus``/``num_gpus``: what Ray reserves for the job's entrypoint. ``workers``: more
    than one trains through Axolotl's Ray Train integration (``use_ray``) on that many
    workers, each holding one GPU (``device = "gpu"``) or one CPU. ``local_paths``: the
    nodes see this machine's files too (a local cluster), so a project-relative
    ``base_model`` is made absolute. ``stop_wait_s``: how long Ray waits, after its own
    stop (``ray job stop``, the dashboard's button), for the snapshot before it kills.
    """

    kind: Literal["ray"]
    address: NonEmpty = "http://127.0.0.1:8265"
    storage: RemotePath
    venv: RemotePath | None = None
    python: RemotePath | None = None
    runtime_env: dict[str, Any] = Field(default_factory=dict)
    num_cpus: Finite = Field(default=0.0, ge=0)
    num_gpus: Finite = Field(default=0.0, ge=0)
    workers: int = Field(default=1, ge=1)
    device: Literal["cpu", "gpu"] = "gpu"
    local_paths: bool = False
    stop_wait_s: int = Field(default=1800, ge=1)

    @field_validator("address")
    @classmethod
    def _http(cls, address: str) -> str:
        if not address.startswith(("http://", "https://")):
            raise ValueError("must be the dashboard's http:// or https:// address")
        return address

    @field_validator("runtime_env")
    @classmethod
    def _published(cls, runtime_env: dict[str, Any]) -> dict[str, Any]:
        problems = [
            f"{key} is managed by the ray target: the job runs in storage"
            for key in MANAGED_RUNTIME_ENV
            if key in runtime_env
        ]
        env_vars = runtime_env.get("env_vars", {})
        if not isinstance(env_vars, dict):
            problems.append("env_vars must be a table of names and values")
        else:
            problems += [
                f"env_vars.{name} looks like a secret: the Ray dashboard shows runtime_env "
                "to anyone; keep secrets in overbrainer's environment (HF_TOKEN reaches the "
                "job by file)"
                for name in env_vars
                if SECRET_NAME.search(str(name))
            ]
        if problems:
            raise ValueError("; ".join(problems))
        return runtime_env

    @model_validator(mode="after")
    def _one_python(self) -> RayTarget:
        if self.venv is not None and self.python is not None:
            raise ValueError("give venv or python, not both")
        return self

    @property
    def interpreter(self) -> str:
        """The Python that runs ``run_job.py`` on the node."""
        if self.venv is not None:
            return f"{self.venv.rstrip('/')}/bin/python"
        return self.python or "python3"


class RayJob(BaseModel):
    """What ``launch_job`` records in ``JobHandle.data`` to find the job again."""

    submission_id: str
    directory: str
