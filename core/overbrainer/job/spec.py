"""The data the executor contract passes: the job to start, its status, the artifacts to fetch."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from pydantic import SecretStr


@dataclass(frozen=True)
class JobStage:
    """One command of the job, run in the job's root directory.

    ``argv[0]`` is a program name; a native runtime takes it from the target's venv.
    """

    name: str
    argv: tuple[str, ...]


@dataclass(frozen=True)
class JobSpec:
    """Everything a target needs to start a job from a prepared run directory.

    ``paths`` are environment variables whose values are relative to the job's root
    (the run directory as the job sees it), which only the executor knows; ``pythonpath``
    entries, also relative, are prepended to ``PYTHONPATH``. Secrets reach the job only
    through its environment.
    """

    run_id: str
    local_dir: Path
    stages: tuple[JobStage, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    paths: Mapping[str, str] = field(default_factory=dict)
    pythonpath: tuple[str, ...] = ()
    secrets: Mapping[str, SecretStr] = field(default_factory=dict)
    cpu_only: bool = False


class JobState(StrEnum):
    RUNNING = "running"
    EXITED = "exited"
    CANCELLED = "cancelled"
    LOST = "lost"


@dataclass(frozen=True)
class JobStatus:
    """What the target says of a job. ``exit_code`` is set only for ``exited``."""

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

    ``lines`` are complete ``metrics.jsonl`` lines, in order. ``snapshot_request`` is the
    reason word of a pending ``snapshot.request`` (None when there is none), ``snapshot``
    the raw text of ``snapshot.json`` once the job saved one.
    """

    status: JobStatus
    lines: tuple[str, ...] = ()
    snapshot_request: str | None = None
    snapshot: str | None = None


@dataclass(frozen=True)
class ArtifactSpec:
    """What to bring home from the job's directory, verified file by file.

    ``paths`` are relative to the job's root; a missing ``required`` one is an error;
    names matching an ``exclude`` glob (on any path component) are skipped.
    """

    paths: tuple[str, ...]
    required: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
