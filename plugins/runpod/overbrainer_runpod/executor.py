"""The runpod executor: a pod per run, and the job on it through the ssh target's transport.

``claim_run_dir`` places the pod (the run id names it), waits until it is ready and claims
the run's directory there; every later hook finds the run's pod by its id (from
``pod.json`` when a later command attaches) and hands the job protocol to a
``HostExecutor`` over ``SshHost``. ``release_executor`` ends the pod: its logs home,
``.pod/retrieved``, deleted and confirmed; or kept (``--keep-pod``); or left to its
watchdog when the results are not home (``awaiting_retrieval``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from shlex import quote as _q

from loguru import logger

from overbrainer.plugin import (
    LOST,
    ArtifactSpec,
    Executor,
    JobHandle,
    JobPoll,
    JobSpec,
    JobStatus,
    LogChunk,
    Project,
    RunRecord,
    RunState,
    TargetInfo,
    TransientError,
    UserError,
)
from overbrainer.plugin.host import HostError
from overbrainer.plugin.operations import ServeHandle, ServeSpec, ServeState, TargetShell
from overbrainer_runpod import record
from overbrainer_runpod.after import AfterPod, after_record
from overbrainer_runpod.api import RunpodApi
from overbrainer_runpod.pods import SERVE_TAG, STATE_DIR, PodLifecycle, alias, connect
from overbrainer_runpod.record import PodState
from overbrainer_runpod.serve import ServePods
from overbrainer_runpod.session import PodSession, PodSite
from overbrainer_runpod.settings import RunpodTarget, rest_url
from overbrainer_runpod.timing import Timing, timing

ENDED = (RunState.SUCCEEDED, RunState.FAILED, RunState.CANCELLED, RunState.STOPPED)


@dataclass
class RunpodExecutor(Executor):
    """A pod per run on Runpod, its job driven over the ssh target's transport."""

    capabilities = frozenset({"prepare", "open_shell", "release", "serve"})

    name: str
    target: RunpodTarget
    project: Project
    api: RunpodApi
    timing: Timing = field(default_factory=timing)
    sessions: dict[str, PodSession] = field(default_factory=dict)
    run: RunRecord | None = None
    """The run a command after training works on (``open_shell``)."""
    after_pod: AfterPod | None = None
    """The pod of that command, until it is released."""
    serves: ServePods | None = None
    """The pods of this command's serves (``overbrainer_runpod.serve``), once it has one."""

    def describe(self) -> TargetInfo:
        return TargetInfo(device="gpu", local_paths=False, per_run=True)

    def run_dir(self, run_id: str) -> Path:
        return self.site.run_dir(run_id)

    @property
    def site(self) -> PodSite:
        """What this executor's pods are made and reached with (an ``AfterPod`` gets it)."""
        return PodSite(self.name, self.target, self.project, self.api, self.timing)

    def __post_init__(self) -> None:
        if self.api.rest_url is None:  # where the pods' log stream is read
            self.api.rest_url = rest_url(self.project)

    # Starting.

    def prepare(self) -> None:
        self.warn_orphans()

    def warn_orphans(self) -> None:
        """Warn about overbrainer pods whose run of this project is over, or unknown."""
        try:
            pods = self.api.pods()
        except (TransientError, UserError) as error:
            logger.warning(f"runpod: cannot list the pods: {error}")
            return
        for pod in pods:
            name = str(pod.get("name") or "")
            if not name.startswith("overbrainer-"):
                continue
            run_id = name.removeprefix("overbrainer-").rpartition("-")[0]
            try:
                mine = record.load(self.run_dir(run_id)) if self.run_dir(run_id).is_dir() else None
            except UserError:  # another run's broken record: the pod is warned about
                mine = None
            if mine is not None and mine.pod_id == pod.get("id") and mine.state in (
                PodState.RUNNING, PodState.READY, PodState.PROVISIONING, PodState.KEPT,
            ):  # fmt: skip
                continue
            if self._after_pod_of(run_id, pod.get("id")) or self._serving().live(
                run_id, pod.get("id")
            ):
                continue
            what = "serve" if name.rpartition("-")[2].startswith(SERVE_TAG) else "run"
            logger.warning(
                f"runpod: pod {pod.get('id')} ({name}, ${pod.get('costPerHr', '?')}/h) is an "
                f"overbrainer pod no {what} of this project follows: delete it with "
                f"`overbrainer pod rm {run_id}` or in Runpod's console"
            )

    def _after_pod_of(self, run_id: str, pod_id: object) -> bool:
        """Whether ``pod_id`` is the live after-training pod of run ``run_id`` here."""
        try:
            found = after_record(self.run_dir(run_id)) if run_id else None
        except UserError:
            return False
        return found is not None and found.pod_id == pod_id and found.state in (
            PodState.READY, PodState.PROVISIONING, PodState.KEPT,
        )  # fmt: skip

    def claim(self, run_id: str) -> str:
        """Place the run's pod, reach it, claim the run's directory there."""
        run_dir = self.run_dir(run_id)
        existing = record.load(run_dir) if run_dir.is_dir() else None
        if existing is not None and existing.pod_id is not None:
            return ""  # this id has its pod already
        life = PodLifecycle(self.api, run_dir, self.timing)
        try:
            life.place(self.target, self.site.placement(), api_url=self.api.base_url)
            host = life.wait_ready(lambda config: connect(self.name, run_id, config))
            life.drop_secret()
            session = self.site.session_on(life, host)
            self._cost_cap(session)
            remote = session.inner.claim(run_id)
            session.check_venv()
        except BaseException:
            life.abandon()
            raise
        self.sessions[run_id] = session
        return remote

    def _cost_cap(self, session: PodSession) -> None:
        """Tell the watchdog when the cost cap asks for a snapshot."""
        pod = session.life.pod
        if self.target.max_cost_usd is None or not pod.cost_per_hour:
            return
        created = record.parse_time(pod.created or record.now_text()).timestamp()
        at = int(
            created + 0.95 * self.timing.seconds(60 * self.target.max_cost_usd / pod.cost_per_hour)
        )
        session.host.check(f'echo "{at} cost" > "$HOME/{STATE_DIR}/snapshot_at"\n')

    def session(self, run_id: str) -> PodSession | None:
        """The run's pod, reached (from ``pod.json`` in a later command); None once it is
        deleted."""
        found = self.sessions.get(run_id)
        if found is not None:
            return found
        run_dir = self.run_dir(run_id)
        life = PodLifecycle(self.api, run_dir, self.timing)
        pod = life.pod
        if pod.pod_id is None or pod.state is PodState.DELETED or pod.workdir is None:
            return None
        host = connect(self.name, run_id, life.ssh_dir / "config", now=False)
        session = self.site.session_on(life, host)
        session.launched = True
        self.sessions[run_id] = session
        return session

    def launch(self, run: RunRecord, job: JobSpec) -> JobHandle:
        session = self._need(run)
        handle = session.inner.launch(run, job)
        session.launched = True
        keep = "mkdir -p .pod && touch .pod/keep && " if job.keep_machine else ""
        session.host.check(f"cd {_q(run.remote_dir)} && {keep}mkdir -p .pod && touch .pod/lease\n")
        session.lease_at = time.monotonic()
        session.life.save(state=PodState.RUNNING, keep=job.keep_machine)
        return handle

    def _need(self, run: RunRecord) -> PodSession:
        session = self.session(run.id)
        if session is None:
            raise UserError(f"run {run.id} has no pod any more (see runs/{run.id}/pod.json)")
        return session

    # Following.

    def poll(self, run: RunRecord) -> JobPoll:
        session = self.session(run.id)
        if session is None:
            return JobPoll(LOST)
        try:
            poll = session.inner.poll(run)
        except HostError as error:
            if self._gone(session):
                return JobPoll(LOST)
            raise TransientError(str(error)) from None
        self._renew(session, run, bool(poll.lines))
        return poll

    def _renew(self, session: PodSession, run: RunRecord, progress: bool) -> None:
        """Touch ``.pod/lease`` while metrics flow; stop past the deadline + the guard."""
        pod = session.life.pod
        guard = (pod.delete_at or 0) + self.timing.seconds(self.timing.client_guard_minutes)
        if pod.delete_at and time.time() > guard:
            if not session.guard_warned:
                session.guard_warned = True
                logger.warning(
                    f"runpod: run {run.id} is past max_hours: the lease is no longer renewed "
                    "and the pod's watchdog deletes it"
                )
            return
        every = self.timing.seconds(self.timing.lease_renew_minutes)
        if progress and time.monotonic() - session.lease_at >= every:
            session.host.check(f"cd {_q(run.remote_dir)} && mkdir -p .pod && touch .pod/lease\n")
            session.lease_at = time.monotonic()

    def _gone(self, session: PodSession) -> bool:
        """Whether the pod is gone (deleted by its watchdog): recorded if so."""
        pod_id = session.life.pod.pod_id
        try:
            gone = pod_id is None or self.api.pod(pod_id) is None
        except (TransientError, UserError):
            return False
        if gone and session.life.pod.state is not PodState.DELETED:
            try:
                session.life.confirm_gone("watchdog")
            except UserError:
                return False
        return gone

    def request_snapshot(self, run: RunRecord, reason: str) -> None:
        self._need(run).inner.request_snapshot(run, reason)

    def cancel(self, run: RunRecord) -> JobStatus:
        session = self.session(run.id)
        if session is None:
            return LOST
        try:
            return session.inner.cancel(run)
        except HostError:
            if self._gone(session):
                return LOST
            raise

    def collect(self, run: RunRecord, artifacts: ArtifactSpec, dest: Path) -> list[str]:
        session = self._need(run)
        # A fresh lease keeps the watchdog from deleting the pod during the download.
        session.host.check(f"cd {_q(run.remote_dir)} && mkdir -p .pod && touch .pod/lease\n")
        session.lease_at = time.monotonic()
        return session.inner.collect(run, artifacts, dest)

    def read_log(self, run: RunRecord, offset: int) -> LogChunk:
        session = self.session(run.id)
        if session is None:
            return LogChunk(b"", offset)
        return session.inner.read_log(run, offset)

    # Serving (docs/serving.md): a pod of its own per serve.

    def _serving(self) -> ServePods:
        if self.serves is None:
            self.serves = ServePods(self.site)
        return self.serves

    def serve(self, spec: ServeSpec) -> ServeHandle:
        self.warn_orphans()
        return self._serving().start(spec)

    def reach(self, handle: ServeHandle) -> str:
        return self._serving().reach(handle)

    def serve_state(self, handle: ServeHandle) -> ServeState:
        return self._serving().state(handle)

    def end_serve(self, handle: ServeHandle, keep_log: bool) -> bool:
        return self._serving().end(handle, keep_log)

    # Ending.

    def open_shell(self, purpose: str, keep_machine: bool) -> TargetShell:
        """A pod for a command after training (``overbrainer_runpod.after``)."""
        if self.run is None:
            raise UserError(f"target `{self.name}`: a shell after training needs the run")
        if self.after_pod is not None:  # one pod per command: the first is released at its end
            raise UserError(
                f"target `{self.name}`: a shell after training is open already "
                f"({self.after_pod.label} of run {self.run.id})"
            )
        self.after_pod = AfterPod(self.site, self.run, purpose, keep_machine)
        return self.after_pod.open()  # released by release_executor whatever follows

    def release(self, run: RunRecord | None, outcome: RunState | None) -> None:
        after_pod, self.after_pod = self.after_pod, None
        if self.serves is not None:  # a serve's pod outlives the command's connection to it
            self.serves.close()
        try:
            try:
                if after_pod is not None:
                    after_pod.release()
            finally:  # the run's pods end even when the command's pod failed to
                if run is None:
                    for session in list(self.sessions.values()):
                        if not session.launched:
                            session.life.abandon()
                elif outcome is not None and run.id in self.sessions:
                    self.end(self.sessions[run.id], run, outcome)
        finally:
            for session in self.sessions.values():
                session.host.close()

    def end(self, session: PodSession, run: RunRecord, outcome: RunState) -> None:
        life = session.life
        pod = life.pod
        if pod.state is PodState.DELETED:
            return
        retrieved = (outcome in (RunState.SUCCEEDED, RunState.STOPPED)) or (
            outcome in (RunState.FAILED, RunState.CANCELLED)
            and not run.artifacts_missing
        )
        if run.job is None and outcome in ENDED:
            retrieved = True  # nothing ran: nothing to retrieve
        if outcome not in ENDED or not retrieved:
            life.save(state=PodState.AWAITING_RETRIEVAL)
            logger.warning(
                f"runpod: the results of run {run.id} are not home: pod {pod.pod_id} waits for "
                f"`overbrainer train attach {run.id}`; its watchdog deletes it after the retrieve "
                "grace"
            )
            return
        session.logs_home()
        if pod.keep:
            life.save(state=PodState.KEPT)
            logger.info(
                f"runpod: pod {pod.pod_id} kept: `ssh -F runs/{run.id}/ssh/config "
                f"{alias(run.id)}`; delete it with `overbrainer pod rm {run.id}` (its watchdog "
                "deletes it at max_hours)"
            )
            return
        try:
            where = _q(session.run_dir)
            session.host.check(f"mkdir -p {where}/.pod && touch {where}/.pod/retrieved\n")
        except HostError as error:
            logger.debug(f"runpod: cannot mark the results retrieved: {error}")
        session.host.close()
        life.delete("client")
