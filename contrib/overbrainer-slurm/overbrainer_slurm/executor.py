"""The Slurm executor: each hook of the contract is one method of :class:`SlurmExecutor`.

A run's job directory is copied to ``spool/<run id>/`` and submitted with ``sbatch`` as a
batch script that ``exec``s the runner there. Status is the runner's own word first (its
``exit_code``, written last), then Slurm's (``scontrol show job``); metric lines,
snapshots, the log (sbatch's ``--output``) and the results are read from the spool.
"""

from __future__ import annotations

import contextlib
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
    TransientError,
    UserError,
    layout,
)
from overbrainer.plugin.files import write_atomic
from overbrainer.plugin.host import LocalHost
from overbrainer_slurm.batch import batch_script, sbatch_options
from overbrainer_slurm.scheduler import Slurm, SlurmState
from overbrainer_slurm.target import SlurmJob, SlurmTarget
from overbrainer_slurm.transport import LocalCommands, SshCommands

CANCEL_WAIT_S = 60.0
KILL_AGAIN_S = 1.0


@dataclass
class SlurmExecutor(Executor):
    """The target ``name``: its settings, its cluster, and what it read of each job."""

    capabilities = frozenset({"prepare", "wait", "release"})

    name: str
    target: SlurmTarget
    project: Project
    slurm: Slurm
    offsets: dict[str, int] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    warned: set[str] = field(default_factory=set)
    watcher: LocalHost | None = None

    @classmethod
    def create(cls, name: str, target: SlurmTarget, project: Project) -> SlurmExecutor:
        env = project.env
        commands = (
            SshCommands(target.login, env) if target.login is not None else LocalCommands(env)
        )
        return cls(name, target, project, Slurm(name, commands))

    @property
    def spool(self) -> Path:
        return Path(self.target.spool).expanduser()

    def job(self, run: RunRecord) -> SlurmJob:
        if run.job is None:
            raise UserError(f"run {run.id} has no job on target `{self.name}`")
        return run.job.data_as(SlurmJob)

    def job_dir(self, run: RunRecord) -> Path:
        return Path(self.job(run).directory)

    def files(self, run: RunRecord) -> JobDirectory:
        return JobDirectory(self.job_dir(run))

    # Before a run.

    def describe(self) -> TargetInfo:
        # `scontrol show job` and sbatch's stored environment are readable by others on
        # many clusters: secrets go as a 0600 file in the job directory, which the runner
        # reads and deletes as it starts.
        return TargetInfo(
            device=self.target.device,
            local_paths=self.target.local_paths,
            secrets=SecretsChannel.FILE,
        )

    def prepare(self) -> None:
        try:
            self.spool.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise UserError(
                f"target `{self.name}`: cannot create spool {self.target.spool}: {error.strerror}"
            ) from None
        try:
            done = self.slurm.commands.run(["sbatch", "--version"])
        except TransientError as error:
            raise UserError(f"target `{self.name}`: {error}") from None
        if done.code != 0:
            raise UserError(
                f"target `{self.name}`: `sbatch --version` failed on "
                f"{self.slurm.commands.where}: {(done.err or done.out).strip()[:300]}"
            )

    def claim(self, run_id: str) -> str:
        self.spool.mkdir(parents=True, exist_ok=True)
        try:
            (self.spool / run_id).mkdir()  # exclusive: a second owner gets FileExistsError
        except FileExistsError:
            return ""
        return str(self.spool / run_id)

    # The job.

    def launch(self, run: RunRecord, job: JobSpec) -> JobHandle:
        where = Path(run.remote_dir)
        secrets = JobDirectory(where).fill(job)
        options = sbatch_options(self.target, run.id, str(where))
        script = batch_script(self.target, run.id, str(where), self.project.env)
        try:
            job_id = self.slurm.submit(options, script)
        except BaseException:
            # The answer may be what was lost (a dropped ssh): a job submitted but not
            # recorded would run unseen, so the run's jobs are cancelled by name.
            with contextlib.suppress(Exception):
                self.slurm.commands.run(["scancel", "--me", f"--name=overbrainer-{run.id}"])
            secrets.unlink(missing_ok=True)  # never left behind by a job that did not start
            raise
        self._note(run.id, f"slurm job {job_id} submitted")
        return JobHandle().with_data(SlurmJob(job_id=job_id, directory=str(where)))

    def status(self, run: RunRecord) -> JobStatus:
        """The runner's own word first (``exit_code``), then Slurm's."""
        files = self.files(run)
        if (ended := files.ended()) is not None:
            return ended
        job_id = self.job(run).job_id
        state = self.slurm.show(job_id)
        if state is not None:
            self._note(run.id, f"slurm job {job_id} {state.describe()}")
            if state.active:
                return RUNNING
        code = files.exit_code()  # written just before Slurm saw the runner end
        if code is not None:
            return JobStatus.exited(code)
        return self._ended_early(run, state)

    def _ended_early(self, run: RunRecord, state: SlurmState | None) -> JobStatus:
        """A job Slurm ended (or forgot) before its runner wrote ``exit_code``."""
        if state is not None and state.state == "CANCELLED":
            return CANCELLED  # scancel'ed, queued or running, outside overbrainer
        if state is not None and state.state == "FAILED" and state.exit_code and not state.signal:
            return JobStatus.exited(state.exit_code)  # the batch script failed: no python
        if run.id not in self.warned:
            self.warned.add(run.id)
            why = state.describe() if state is not None else "forgotten by the controller"
            logger.warning(
                f"target `{self.name}`: Slurm ended job {self.job(run).job_id} before its "
                f"runner finished: {why}"
            )
        return LOST

    def poll(self, run: RunRecord) -> JobPoll:
        files = self.files(run)
        status = self.status(run)
        if status.state is not JobState.RUNNING:
            # A job that ended before its runner started (cancelled while queued, a node
            # that failed) left its secrets file: it goes too.
            files.forget_secrets()
            self._note_end(run, status)
        found, self.offsets[run.id] = files.poll(status, self.offsets.get(run.id, 0))
        return found

    def wait(self, run: RunRecord, timeout: float) -> bool | None:
        """Until the runner's files say the job changed (inotify on the job directory), or
        ``timeout``. On a network filesystem a node's writes may raise no event here: the
        wait then ends at ``timeout``, as a poll would."""
        if self.watcher is None:
            self.watcher = LocalHost(self.project.env)
        return self.watcher.wait_for_change(str(self.job_dir(run)), timeout)

    def request_snapshot(self, run: RunRecord, reason: str) -> None:
        # The request file carries the reason; Slurm's own signal (the time limit's
        # --signal, `scancel --signal=TERM --batch`) reaches the same request through the
        # runner, with reason `requested`.
        self.files(run).request_snapshot(reason)

    def cancel(self, run: RunRecord) -> JobStatus:
        status = self.status(run)
        if status.state in (JobState.EXITED, JobState.CANCELLED):
            return status  # a finished job is never signalled
        files = self.files(run)
        job_id = self.job(run).job_id
        name = f"overbrainer-{run.id}"
        found = self.slurm.show(job_id)
        if found is not None and found.name != name:
            # run.json is a file anyone may edit: its job id is checked against the job.
            raise UserError(
                f"run {run.id}: Slurm job {job_id} is not this run's (it is named "
                f"`{found.name}`, not `{name}`): nothing was cancelled; the run's record "
                "may have been edited"
            )
        if status.state is JobState.RUNNING:
            # The marker turns a TERM that reaches the runner meanwhile (a job that just
            # started, Slurm's plain cancel) into "kill the job's process group".
            files.mark(layout.CANCELLING)
            self.slurm.kill(job_id, name)  # every process now, not after KillWait
            self.slurm.cancel(job_id, name)  # and a queued job never starts
            self._wait_ended(run, job_id)
            if (code := files.exit_code()) is not None:
                return JobStatus.exited(code)  # it ended on its own first
        files.forget_secrets()
        files.mark(layout.CANCELLED)
        self._note_end(run, CANCELLED)
        return CANCELLED

    def _wait_ended(self, run: RunRecord, job_id: str) -> None:
        deadline = time.monotonic() + CANCEL_WAIT_S
        again = time.monotonic() + KILL_AGAIN_S
        while (state := self.slurm.show(job_id)) is not None and state.active:
            self._note(run.id, f"slurm job {job_id} {state.describe()}")
            if time.monotonic() > deadline:
                raise UserError(
                    f"run {run.id}: Slurm job {job_id} is still {state.describe()} "
                    f"{CANCEL_WAIT_S:.0f} s after its cancel; try again later"
                )
            if time.monotonic() > again and state.state == "RUNNING":
                self.slurm.kill(job_id, f"overbrainer-{run.id}")  # not started at the first
                again = time.monotonic() + KILL_AGAIN_S
            time.sleep(0.1)

    # After it.

    def collect(self, run: RunRecord, artifacts: ArtifactSpec, dest: Path) -> list[str]:
        return self.files(run).collect(dest, artifacts)

    def read_log(self, run: RunRecord, offset: int) -> LogChunk:
        return self.files(run).read_log(offset)

    def release(self, run: RunRecord | None, outcome: RunState | None) -> None:
        self.offsets.clear()
        self.slurm.commands.close()
        if self.watcher is not None:
            self.watcher.close()
            self.watcher = None

    def _note_end(self, run: RunRecord, status: JobStatus) -> None:
        """The note of an ended job, from the runner's word (Slurm may still be finishing
        the batch step): its exit code, or its cancel."""
        job_id = self.job(run).job_id
        if status.state is JobState.EXITED:
            self._note(run.id, f"slurm job {job_id} ended, exit code {status.exit_code}")
        elif status.state is JobState.CANCELLED:
            self._note(run.id, f"slurm job {job_id} CANCELLED")

    def _note(self, run_id: str, text: str) -> None:
        """``runs ls``'s word on the run: its Slurm job and state, kept when it changes."""
        if self.notes.get(run_id) == text:
            return
        home = self.project.runs_dir / run_id
        if not home.is_dir():
            return  # a run this project does not keep (the kit's runs live elsewhere)
        write_atomic(home / layout.TARGET_NOTE, (text + "\n").encode(), f"runs/{run_id}")
        self.notes[run_id] = text

