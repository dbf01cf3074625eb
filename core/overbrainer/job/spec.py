"""The data the executor contract passes: the job to start, its status, the artifacts to fetch."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Literal

from pydantic import SecretStr

from overbrainer.job.layout import RUNNER


@dataclass(frozen=True)
class JobStage:
    """One command of the job, run by the runner in the job's directory.

    ``argv[0]`` is a program name, looked up first beside the runner's Python (a venv).
    """

    name: str
    argv: tuple[str, ...]


@dataclass(frozen=True)
class JobSpec:
    """A job ready to start: its directory at home, prepared by the core, and its secrets.

    ``local_dir`` holds everything the job needs (see :mod:`overbrainer.job.layout`),
    the runner among it: a target copies the directory where the job will run (leaving out
    ``layout.HOME_ONLY``) and starts :meth:`command` there. The job's stages, environment
    and paths are in ``job.json``, read by the runner; a target never needs them.

    ``secrets`` reach the job only through the channel the target declared (see
    :class:`SecretsChannel`), never a command line, a record or a log. ``keep_machine``: a
    machine made for this run (``per_run``) is kept after it, for the user to look at.
    """

    run_id: str
    local_dir: Path
    secrets: Mapping[str, SecretStr] = field(default_factory=dict)
    keep_machine: bool = False

    def command(self, python: str = "python3") -> tuple[str, ...]:
        """The one command that runs the whole job, in its directory: ``python run_job.py``
        with a Python that has Axolotl (or any Python 3.7+ when ``axolotl`` is on PATH)."""
        return (python, RUNNER)

    def secrets_file(self) -> bytes:
        """The content of ``.secrets.json`` for the ``file`` channel: write it into the job
        directory with mode 0600 just before the start; the runner reads and deletes it."""
        values = {name: secret.get_secret_value() for name, secret in self.secrets.items()}
        return json.dumps(values).encode("utf-8")


class SecretsChannel(StrEnum):
    """How a target hands the job its secrets.

    ``env``: in the job's process environment (on this machine, or over a channel like SSH
    stdin), never on a command line. ``file``: as ``.secrets.json`` (mode 0600) in the job
    directory, which the runner reads and deletes before any stage starts; for platforms
    that publish a job's environment (Ray's dashboard serves ``runtime_env``). ``own``: the
    plugin's own way (a platform secret store).
    """

    ENV = "env"
    FILE = "file"
    OWN = "own"


@dataclass(frozen=True)
class Launch:
    """How the job starts Axolotl over several GPUs of one machine.

    Attributes:
        processes: how many processes ``accelerate launch`` starts, one a GPU.
        deepspeed: the DeepSpeed preset (``zero1``..``zero3``), or None.
        fsdp: the FSDP preset (``full_shard``...), or None.
    """

    processes: int
    deepspeed: str | None = None
    fsdp: str | None = None


@dataclass(frozen=True)
class TargetInfo:
    """What the core needs to know of a target, from ``describe_target``.

    Attributes:
        device: where Axolotl trains: ``gpu``, or ``cpu`` (then ``--launcher python``, no
            bf16/fp16/tf32 and no fused CUDA kernels).
        local_paths: whether the job sees this machine's files as they are, so that a
            ``base_model`` given as a path relative to the project can be made absolute.
        per_run: whether the machine exists for one run only (a pod): ``--keep-machine``
            (alias ``--keep-pod``) and ``JobSpec.keep_machine`` apply.
        secrets: the channel the target uses for the job's secrets.
        launch: Axolotl over several GPUs (the target's ``gpus``), or None: Axolotl's own
            launch.
    """

    device: Literal["cpu", "gpu"]
    local_paths: bool = False
    per_run: bool = False
    secrets: SecretsChannel = SecretsChannel.ENV
    launch: Launch | None = None

    @property
    def cpu(self) -> bool:
        return self.device == "cpu"


@dataclass(frozen=True)
class TargetPrice:
    """What a target's machine would cost, from ``estimate_price``: the basis of ``plan``'s
    training estimate and of the budget's check before a run.

    Attributes:
        usd_per_hour: the machine's price, all its GPUs together, in USD per hour.
        gpu_type: the GPU type priced (``NVIDIA A40``): it picks the throughput of
            ``plan``'s table.
        gpu_count: how many of them the machine has.
    """

    usd_per_hour: float
    gpu_type: str
    gpu_count: int = 1


@dataclass(frozen=True)
class LogChunk:
    """Bytes of the job's log from an offset, and the offset to read from next time.

    ``offset`` may jump (a log rotated or served as a tail); ``data`` is raw bytes, to be
    redacted before it is shown.
    """

    data: bytes
    offset: int


@dataclass(frozen=True, kw_only=True)
class MachineLogQuery:
    """What ``runs logs RUN --pod`` asks of the log of the machine a run ran on.

    ``source``: a part of that log the target names (``container`` or ``system``, the
    reference's), None for all; ``tail``: the last lines of each part; ``follow``: keep
    printing until the machine is gone.
    """

    source: str | None = None
    tail: int | None = None
    follow: bool = False


class JobState(StrEnum):
    """Where a job stands on its target."""

    RUNNING = "running"
    EXITED = "exited"
    CANCELLED = "cancelled"
    LOST = "lost"


@dataclass(frozen=True)
class JobStatus:
    """What the target says of a job. ``exit_code`` is set only for ``exited``.

    ``lost``: the job is gone without an exit code (its machine or directory vanished).
    """

    state: JobState
    exit_code: int | None = None

    @classmethod
    def exited(cls, code: int) -> JobStatus:
        return cls(JobState.EXITED, code)

    def describe(self) -> str:
        """The status as the progress lines say it."""
        match self.state:
            case JobState.EXITED:
                return f"exited with code {self.exit_code}"
            case JobState.LOST:
                return "lost (stopped without an exit code)"
            case _:
                return self.state.value


RUNNING = JobStatus(JobState.RUNNING)
CANCELLED = JobStatus(JobState.CANCELLED)
LOST = JobStatus(JobState.LOST)


@dataclass(frozen=True)
class JobPoll:
    """One look at a job: its status and what it wrote since the last look.

    ``lines`` are complete ``metrics.jsonl`` lines, in order, without their terminators
    (cut them with :func:`~overbrainer.job.metrics.complete_lines`, which keeps a partial
    last line for the next look). ``snapshot_request`` is the reason word of a pending
    ``snapshot.request`` (None when there is none), ``snapshot`` the raw text of
    ``snapshot.json`` (at most 64 KiB + 1 byte) once the job saved one. ``machine`` is
    the raw text of the runner's latest ``machine.json`` (at most 64 KiB), the gauges of
    the machine the job runs on, when the target reads it (None otherwise: no gauges).
    """

    status: JobStatus
    lines: tuple[str, ...] = ()
    snapshot_request: str | None = None
    snapshot: str | None = None
    machine: str | None = None


@dataclass(frozen=True)
class ArtifactSpec:
    """What to bring home from the job's directory, verified file by file.

    ``paths`` are relative to the job directory; a ``required`` one that is missing raises
    :class:`~overbrainer.errors.MissingArtifact`; names matching an ``exclude`` glob (on
    any path component) are skipped.
    """

    paths: tuple[str, ...]
    required: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
