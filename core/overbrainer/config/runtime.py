"""How Axolotl runs on a POSIX host: the runtime keys ``HostExecutor`` reads.

``HostRuntime`` is their one definition. A ``HostTarget`` (``local``, ``ssh``, a third
party's machine) carries them as settings and gives its ``HostRuntime``
(``host_runtime()``); a target with settings of its own that drives the job protocol on a
machine it makes for the run builds one directly, so that no target builds another kind's
settings to reuse the host executor. Both are checked by the same rules.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

_ENV_PATTERN = re.compile(r"^[A-Za-z_*?][A-Za-z0-9_*?]*$")


def env_pattern(value: str) -> str:
    """``value`` if it names variables of the environment a job may get, else ValueError."""
    if not _ENV_PATTERN.match(value):
        raise ValueError("a variable name, or a glob of names (* and ?)")
    if value.upper().startswith(("OVERBRAINER_", "VAULT_")):
        raise ValueError("overbrainer's own settings and Vault credentials never reach a job")
    return value


def runtime_problems(
    runtime: str,
    *,
    engine: str | None,
    image: str | None,
    venv: str | None,
    install: str | None,
) -> list[str]:
    """What is wrong with a set of runtime keys: those of the other runtime, an ``install``
    with nowhere to install into. Empty when they hold together."""
    if runtime == "native":
        problems = [
            f'{key} applies only to runtime = "docker"'
            for key, value in (("engine", engine), ("image", image))
            if value is not None
        ]
        if install is not None and venv is None:
            problems.append("install needs venv: the directory to install Axolotl into")
        return problems
    return [
        f'{key} applies only to runtime = "native"'
        for key, value in (("venv", venv), ("install", install))
        if value is not None
    ]


DEEPSPEED_PRESETS = ("zero1", "zero2", "zero3")
"""``deepspeed``: DeepSpeed's ZeRO stages 1 to 3 (optimizer state; and gradients; and
weights sharded across the GPUs), each a JSON file overbrainer ships."""
FSDP_PRESETS = ("full_shard", "shard_grad_op", "full_shard_offload")
"""``fsdp``: PyTorch FSDP2 sharding weights, gradients and optimizer state (weights gathered
again after the forward pass with ``shard_grad_op``; parameters offloaded to the CPU with
``full_shard_offload``)."""

Gpus = int | Literal["all"] | None


def gpus_value(value: object) -> int | Literal["all"]:
    """A target's ``gpus``: a count of 1 or more (a number's text from the environment
    too), or ``"all"``; ValueError saying so otherwise."""
    if value == "all":
        return "all"
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    raise ValueError('a number of GPUs (1 or more), or "all"')


def sharding_problems(gpus: Gpus, deepspeed: str | None, fsdp: str | None) -> list[str]:
    """What is wrong with a target's ``gpus``, ``deepspeed`` and ``fsdp`` together: a
    preset needs several GPUs, and only one preset applies."""
    problems = []
    if isinstance(gpus, int) and not isinstance(gpus, bool) and gpus < 1:
        problems.append(f"gpus = {gpus}: needs 1 or more, or \"all\"")
    if deepspeed is not None and fsdp is not None:
        problems.append("deepspeed and fsdp are both set: choose one of them")
    for key, value in (("deepspeed", deepspeed), ("fsdp", fsdp)):
        if value is None:
            continue
        if gpus is None:
            problems.append(
                f'{key} = "{value}" needs gpus: set gpus = N (2 or more) or gpus = "all"'
            )
        elif gpus == 1:
            problems.append(
                f'{key} = "{value}" shards across GPUs, and gpus = 1: set gpus = N (2 or '
                f'more) or gpus = "all", or remove {key}'
            )
    return problems


@dataclass(frozen=True)
class HostRuntime:
    """The runtime keys of a host target, with their defaults; ``device`` is what the
    machine is known to have (``gpu`` for a machine made with one). ValueError when they
    do not hold together or ``pass_env`` names what never reaches a job."""

    runtime: Literal["native", "docker"] = "native"
    engine: Literal["docker", "podman"] | None = None
    image: str | None = None
    venv: str | None = None
    device: Literal["auto", "gpu", "cpu"] = "auto"
    install: str | None = None
    setup: str | None = None
    pass_env: tuple[str, ...] = ()
    gpus: Gpus = None
    deepspeed: str | None = None
    fsdp: str | None = None

    def __post_init__(self) -> None:
        problems = runtime_problems(
            self.runtime, engine=self.engine, image=self.image, venv=self.venv,
            install=self.install,
        )  # fmt: skip
        problems += sharding_problems(self.gpus, self.deepspeed, self.fsdp)
        for key, value, known in (
            ("deepspeed", self.deepspeed, DEEPSPEED_PRESETS),
            ("fsdp", self.fsdp, FSDP_PRESETS),
        ):
            if value is not None and value not in known:
                problems.append(f"{key} = {value!r}: not a preset ({', '.join(known)})")
        for pattern in self.pass_env:
            try:
                env_pattern(pattern)
            except ValueError as error:
                problems.append(f"pass_env {pattern!r}: {error}")
        if problems:
            raise ValueError("; ".join(problems))
