"""Train on a Ray cluster through the Ray Jobs API: ``kind = "ray"``.

Each run's job directory is copied to ``storage/<run id>/``, a directory every node of the
cluster and this machine see, and submitted as one Ray job whose entrypoint is the runner
(``python run_job.py``) started there. Status comes from Ray (the job's status and the
entrypoint's exit code) and from the runner's ``exit_code``; metric lines, snapshots and
results are read from ``storage``; the log is Ray's (``get_job_logs``). Secrets travel as
``.secrets.json`` in the job directory, never in what the dashboard publishes (the
entrypoint, ``runtime_env``, the metadata). It imports only ``overbrainer.plugin``.

    [targets.cluster]
    kind = "ray"
    address = "http://head:8265"
    storage = "/mnt/shared/overbrainer"
    venv = "/opt/axolotl"
"""

from __future__ import annotations

import contextlib
import os
import secrets as tokens
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path

from loguru import logger

from overbrainer.plugin import (
    CANCELLED,
    LOST,
    RUNNING,
    ArtifactSpec,
    Executor,
    ExecutorHooks,
    JobDirectory,
    JobHandle,
    JobPoll,
    JobSpec,
    JobState,
    JobStatus,
    LogChunk,
    Project,
    RunRecord,
    RunState,
    SecretsChannel,
    TargetInfo,
    UserError,
    layout,
)
from overbrainer_ray.client import JobNotFound, RayClient, RayJobInfo
from overbrainer_ray.target import RayJob, RayTarget
from overbrainer_ray.workers import ray_train_settings

__all__ = ["RayExecutor", "RayJob", "RayTarget"]

CAP = 1 << 20
"""The most bytes of log one call reads."""
CANCEL_WAIT_S = 60.0
STOP_WAIT_VARIABLE = "RAY_JOB_STOP_WAIT_TIME_S"


@dataclass
class RayExecutor(Executor):
    """The target ``name``: its settings, its Jobs client, and what it read of each job."""

    capabilities = frozenset({"prepare", "release"})

    name: str
    target: RayTarget
    client: RayClient
    offsets: dict[str, int] = field(default_factory=dict)
    warned: set[str] = field(default_factory=set)

    @property
    def storage(self) -> Path:
        return Path(self.target.storage).expanduser()

    def job(self, run: RunRecord) -> RayJob:
        if run.job is None:
            raise UserError(f"run {run.id} has no job on target `{self.name}`")
        return run.job.data_as(RayJob)

    def files(self, run: RunRecord) -> JobDirectory:
        return JobDirectory(Path(self.job(run).directory))

    def describe(self) -> TargetInfo:
        # The dashboard serves every job's entrypoint, runtime_env and metadata without
        # authentication: secrets go as a 0600 file in the job directory, read and deleted by
        # the runner as it starts.
        return TargetInfo(
            device=self.target.device,
            local_paths=self.target.local_paths,
            secrets=SecretsChannel.FILE,
        )

    def prepare(self) -> None:
        if self.target.workers > 1 and self.target.device == "cpu":
            logger.warning(
                f"target `{self.name}`: workers = {self.target.workers} on the CPU: "
                "Axolotl 0.19 asks Ray Train for one GPU per worker whatever the device "
                "(use_gpu=True), so on a cluster without GPUs the workers never start"
            )
        try:
            self.storage.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise UserError(
                f"target `{self.name}`: cannot create storage {self.target.storage}: "
                f"{error.strerror}"
            ) from None

    def claim(self, run_id: str) -> str:
        self.storage.mkdir(parents=True, exist_ok=True)
        try:
            (self.storage / run_id).mkdir()  # exclusive: a second owner gets FileExistsError
        except FileExistsError:
            return ""
        return str(self.storage / run_id)

    def launch(self, run: RunRecord, job: JobSpec) -> JobHandle:
        target = self.target
        where = Path(run.remote_dir)
        secrets = JobDirectory(where).fill(job)
        if target.workers > 1:
            config = where / layout.CONFIG_FILE
            with config.open("a", encoding="utf-8") as file:
                file.write(ray_train_settings(target.workers, target.device))
        submission_id = f"overbrainer-{run.id}-{tokens.token_hex(4)}"
        try:
            self.client.submit(
                submission_id=submission_id,
                entrypoint=entrypoint(target, str(where)),
                runtime_env=_runtime_env(target),
                metadata={"overbrainer_run": run.id, "overbrainer_target": self.name},
                num_cpus=target.num_cpus,
                num_gpus=target.num_gpus,
            )
        except BaseException:
            # The answer may be what was lost: a job submitted but not recorded would run on
            # unseen, so it is stopped (best effort: the cluster may be what failed).
            with contextlib.suppress(Exception):
                self.client.stop(submission_id)
            secrets.unlink(missing_ok=True)  # never left behind by a job that did not start
            raise
        return JobHandle().with_data(RayJob(submission_id=submission_id, directory=str(where)))

    def poll(self, run: RunRecord) -> JobPoll:
        files = self.files(run)
        status = _status(self, run)
        if status.state is not JobState.RUNNING:
            files.forget_secrets()  # a job that ended before its runner started left them
        found, self.offsets[run.id] = files.poll(status, self.offsets.get(run.id, 0))
        return found

    def request_snapshot(self, run: RunRecord, reason: str) -> None:
        # The request file carries the reason and leaves Ray's stop free for a cancel; Ray's
        # own stop (SIGTERM to the runner) reaches the same request, with reason `requested`.
        self.files(run).request_snapshot(reason)

    def cancel(self, run: RunRecord) -> JobStatus:
        submission_id = self.job(run).submission_id
        if not submission_id.startswith(f"overbrainer-{run.id}-"):
            # run.json is a file anyone may edit: its id must name this run's own job.
            raise UserError(
                f"run {run.id}: Ray job {submission_id} is not this run's (its id does not "
                f"start with overbrainer-{run.id}-): nothing was stopped; the run's record "
                "may have been edited"
            )
        status = _status(self, run)
        if status.state in (JobState.EXITED, JobState.CANCELLED):
            return status  # a finished job is never signalled
        files = self.files(run)
        submission_id = self.job(run).submission_id
        if status.state is JobState.RUNNING:
            # The marker turns the SIGTERM of Ray's stop into "kill the job's process group".
            files.mark(layout.CANCELLING)
            self.client.stop(submission_id)
            deadline = time.monotonic() + CANCEL_WAIT_S
            while True:
                try:
                    if self.client.info(submission_id).terminal:
                        break
                except JobNotFound:
                    break
                if time.monotonic() > deadline:
                    raise UserError(
                        f"run {run.id}: Ray has not stopped job {submission_id} after "
                        f"{CANCEL_WAIT_S:.0f} s (a stop asked earlier through Ray waits up to "
                        f"stop_wait_s = {self.target.stop_wait_s} s); try again later"
                    )
                time.sleep(0.2)
            if (code := files.exit_code()) is not None:
                return JobStatus.exited(code)  # it ended on its own first
        files.forget_secrets()
        files.mark(layout.CANCELLED)
        return CANCELLED

    def collect(self, run: RunRecord, artifacts: ArtifactSpec, dest: Path) -> list[str]:
        files = self.files(run)
        if layout.JOB_LOG in artifacts.paths:
            # Ray keeps the entrypoint's output on the head node: put it beside the results.
            log = files.path / layout.JOB_LOG
            temporary = log.with_name(f"{log.name}.tmp.{os.getpid()}")
            temporary.write_bytes(_final_log(self, run))
            temporary.replace(log)
        return files.collect(dest, artifacts)

    def read_log(self, run: RunRecord, offset: int) -> LogChunk:
        # Ray's API returns the whole log: fine for a training log (a few MiB at most).
        data = _job_log(self, run)[offset : offset + CAP]
        return LogChunk(data, offset + len(data))

    def release(self, run: RunRecord | None, outcome: RunState | None) -> None:
        self.offsets.clear()
        self.client.close()


def _node_path(path: str) -> str:
    """``path`` quoted for the node's shell, a leading ``~/`` as the node's ``$HOME``."""
    if path.startswith("~/"):
        return '"$HOME"/' + shlex.quote(path[2:])
    return shlex.quote(path)


def entrypoint(target: RayTarget, where: str) -> str:
    """The job's one command on the node: the runner, in its directory, under Ray's shell.
    ``exec``: the runner is the process Ray signals on a stop."""
    return f"cd {shlex.quote(where)} && exec {_node_path(target.interpreter)} {layout.RUNNER}"


def _runtime_env(target: RayTarget) -> dict[str, object]:
    env = dict(target.runtime_env)
    variables = {str(k): str(v) for k, v in dict(env.get("env_vars", {})).items()}
    # Ray's stop (`ray job stop`, the dashboard) sends SIGTERM, which the runner turns into
    # a snapshot; Ray kills what is left after this many seconds (its default is 3).
    variables.setdefault(STOP_WAIT_VARIABLE, str(target.stop_wait_s))
    env["env_vars"] = variables
    if target.workers > 1 and (target.venv or target.python):
        # Ray Train's workers are Ray workers: they run the job's Python (Axolotl's), not
        # the cluster's, only if the job's runtime_env says so.
        env.setdefault("py_executable", target.interpreter)
    return env


def _status(executor: RayExecutor, run: RunRecord) -> JobStatus:
    """The runner's own word first (``exit_code``), then Ray's."""
    files = executor.files(run)
    if (ended := files.ended()) is not None:
        return ended
    try:
        info = executor.client.info(executor.job(run).submission_id)
    except JobNotFound:
        return LOST
    if not info.terminal:
        return RUNNING
    code = files.exit_code()  # written just before Ray saw the runner end
    return JobStatus.exited(code) if code is not None else _ended_early(executor, run, info)


def _ended_early(executor: RayExecutor, run: RunRecord, info: RayJobInfo) -> JobStatus:
    """A job Ray ended before its runner wrote ``exit_code``."""
    if info.status == "STOPPED":
        return CANCELLED  # stopped (killed) before the runner could write its exit code
    if info.exit_code is not None:
        return JobStatus.exited(info.exit_code)  # the runner never ran (no such python)
    if run.id not in executor.warned:
        executor.warned.add(run.id)
        logger.warning(f"target `{executor.name}`: Ray ended the job: {_reason(info)}")
    return LOST  # failed before its entrypoint started (a runtime_env that did not build)


def _reason(info: RayJobInfo) -> str:
    """Ray's message, on one line: its first lines say why (the rest is a traceback)."""
    lines = [line.strip() for line in info.message.splitlines() if line.strip()]
    return " ".join(lines[:3])[:500] or f"status {info.status}, no message"


def _job_log(executor: RayExecutor, run: RunRecord) -> bytes:
    try:
        return executor.client.logs(executor.job(run).submission_id).encode("utf-8", "replace")
    except JobNotFound:
        return b""


def _final_log(executor: RayExecutor, run: RunRecord) -> bytes:
    """The log kept at home: Ray's, and Ray's reason when the entrypoint never ran."""
    log = _job_log(executor, run)
    try:
        info = executor.client.info(executor.job(run).submission_id)
    except JobNotFound:
        return log
    if info.status == "FAILED" and info.exit_code is None and info.message:
        log += f"\n[ray] job failed before its entrypoint ran:\n{info.message}\n".encode(
            "utf-8", "replace"
        )
    return log


def _create(name: str, target: RayTarget, project: Project, run: RunRecord | None) -> RayExecutor:
    return RayExecutor(name, target, RayClient(name, target.address))


plugin = ExecutorHooks(RayExecutor, targets={"ray": RayTarget}, create=_create)
"""What the entry point names: the hooks of every ``RayExecutor``."""
