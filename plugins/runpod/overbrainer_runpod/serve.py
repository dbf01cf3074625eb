"""A serve on Runpod: a pod of its own per served engine, deleted when the serve ends.

``start`` makes the pod (``overbrainer-<serve id>-s<n>``, with the GPU count the engine
asks for), reaches it over SSH as training's pods are, and starts the engine there under
its idle watchdog through the ``HostExecutor`` protocol; the engine is reached through a
port forwarded over that SSH connection (a ``direct-tcpip`` channel: the engine listens on
the pod's loopback only, and Runpod's HTTP proxy, which would publish it to anyone with
the pod's URL, is not used). Ending the serve deletes the pod, its log brought home first
when asked. The pod's record and SSH files are ``.overbrainer/runpod-serve/<serve id>/``;
a later command (``kill -9`` of the one that started it) finds the pod from there.

On the pod, ``pod.sh``'s watchdog in ``serve`` mode deletes the pod when its engine has
ended (its idle limit, a crash), when no engine started within the boot grace, at the cost
cap (``max_cost_usd``) and at ``max_hours``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from dataclasses import replace
from pathlib import Path
from shlex import quote as _q

from loguru import logger

from overbrainer.plugin import TransientError, UserError
from overbrainer.plugin.files import mkdir_nofollow, read_regular, write_atomic
from overbrainer.plugin.host import HostError
from overbrainer.plugin.operations import ServeHandle, ServeSpec, ServeState
from overbrainer_runpod import record
from overbrainer_runpod.after import abandon_start
from overbrainer_runpod.pods import SERVE_TAG, STATE_DIR, PodLifecycle, connect
from overbrainer_runpod.record import PodState
from overbrainer_runpod.session import PodSession, PodSite

SERVES_DIR = "runpod-serve"
"""Under the project's state directory: a directory a serve (its pod's record, SSH files)."""
HANDLE_FILE = "handle.json"
"""The handle the engine's start gave: the serve is the core's to end from then on."""
MAKER_FILE = "maker.pid"
"""The command making the pod, until its handle is written."""
LOG_TAIL = 4 << 20


class ServePods:
    """The serves of one target for one command: each a pod, found again by its id."""

    def __init__(self, site: PodSite) -> None:
        self.site = site
        self.sessions: dict[str, PodSession] = {}

    def dir_of(self, serve_id: str) -> Path:
        return self.site.project.state_dir / SERVES_DIR / serve_id

    # Starting.

    def start(self, spec: ServeSpec) -> ServeHandle:
        """A pod for ``spec``, the engine started on it; the pod deleted if anything fails."""
        site = self.site
        if spec.gpus is not None and spec.gpus != site.target.gpu_count:
            site = replace(site, target=site.target.model_copy(update={"gpu_count": spec.gpus}))
        self.sweep_unfinished()
        where = self.dir_of(spec.serve_id)
        mkdir_nofollow(where, f".overbrainer/{SERVES_DIR}/{spec.serve_id}", levels=2)
        write_atomic(where / MAKER_FILE, f"{os.getpid()}\n".encode(), MAKER_FILE)
        life = PodLifecycle(site.api, where, site.timing, run_id=spec.serve_id, tag=SERVE_TAG)
        life.save()
        placement = site.placement(spec.served)
        sized = f", {placement.sized.describe()}" if placement.sized else ""
        logger.info(
            f"runpod: creating a pod ({', '.join(placement.gpu_types)} x{site.target.gpu_count}) "
            f"for the serve {spec.serve_id}{sized}: deleted when the serve ends"
        )
        try:
            life.place(site.target, placement, api_url=site.api.base_url)
            host = life.wait_ready(
                lambda config: connect(site.name, spec.serve_id, config, SERVE_TAG)
            )
            life.drop_secret()
            session = site.session_on(life, host)
            self.sessions[spec.serve_id] = session
            self._cost_cap(session)
            handle = session.inner.serve(spec)
        except BaseException:
            self.sessions.pop(spec.serve_id, None)
            abandon_start(life)
            if life.pod.state is PodState.DELETED:
                shutil.rmtree(where, ignore_errors=True)
            raise
        pod = life.pod
        handle = replace(handle, price_per_hour=pod.cost_per_hour or 0.0)
        write_atomic(where / HANDLE_FILE, json.dumps(handle.to_dict()).encode(), HANDLE_FILE)
        life.save(state=PodState.RUNNING)
        rate = f" at ${pod.cost_per_hour:.2f}/h" if pod.cost_per_hour is not None else ""
        logger.info(f"runpod: pod {pod.pod_id} ({pod.gpu_type}{rate}) serves {spec.serve_id}")
        return handle

    def sweep_unfinished(self) -> None:
        """Delete the pods of serves a killed command was making: the core has no record of
        them (it records a serve once started), so nobody else would end them before their
        boot grace."""
        root = self.site.project.state_dir / SERVES_DIR
        for where in sorted(root.iterdir()) if root.is_dir() else []:
            if (where / HANDLE_FILE).exists() or _maker_alive(where):
                continue
            try:
                found = record.load(where)
            except UserError:
                continue
            if found is None or found.state is PodState.DELETED:
                continue
            logger.warning(
                f"runpod: deleting the pod of the serve {where.name}, which a killed command "
                "was making"
            )
            life = PodLifecycle(self.site.api, where, self.site.timing, tag=SERVE_TAG)
            abandon_start(life)
            if life.pod.state is PodState.DELETED:
                shutil.rmtree(where, ignore_errors=True)

    def _cost_cap(self, session: PodSession) -> None:
        """The cost cap (``max_cost_usd``) as a deadline for the pod's watchdog."""
        pod = session.life.pod
        cap = self.site.target.max_cost_usd
        if cap is None or not pod.cost_per_hour:
            return
        created = record.parse_time(pod.created or record.now_text()).timestamp()
        at = int(created + self.site.timing.seconds(60 * cap / pod.cost_per_hour))
        session.host.check(f'echo {at} > "$HOME/{STATE_DIR}/cost_at"\n')

    # Reaching.

    def reach(self, handle: ServeHandle) -> str:
        """A URL here reaching the engine; "" when it is gone (its pod then deleted)."""
        session = self._session(handle)
        if session is None:
            return ""
        try:
            return session.inner.reach(handle) or self._ended(handle, session)
        except HostError as error:
            if self._pod_gone(session):
                return ""
            raise TransientError(f"pod {session.life.pod.pod_id}: {error}") from None

    def state(self, handle: ServeHandle) -> ServeState:
        session = self._session(handle)
        if session is None:
            return ServeState.GONE
        try:
            found = session.inner.serve_state(handle)
        except HostError as error:
            if self._pod_gone(session):
                return ServeState.GONE
            raise TransientError(f"pod {session.life.pod.pod_id}: {error}") from None
        if found is ServeState.GONE:
            self._ended(handle, session)
        return found

    def _ended(self, handle: ServeHandle, session: PodSession) -> str:
        """An engine that ended on its pod (its idle limit, a crash): its log home and the
        pod deleted now rather than at the watchdog's next look. Always ""."""
        self._delete(handle, session, keep_log=True)
        return ""

    # Ending.

    def end(self, handle: ServeHandle, keep_log: bool) -> bool:
        """Delete the serve's pod (the engine with it); whether the engine was running."""
        session = self._session(handle)
        if session is None:
            return False
        try:
            running = session.inner.serve_state(handle) is not ServeState.GONE
        except HostError:
            running = False  # a pod that does not answer is deleted all the same
        self._delete(handle, session, keep_log)
        return running

    def _delete(self, handle: ServeHandle, session: PodSession, keep_log: bool) -> None:
        life = session.life
        where = self.dir_of(handle.serve_id)
        if keep_log:
            self._log_home(handle, session, where)
        with contextlib.suppress(Exception):
            session.host.close()
        self.sessions.pop(handle.serve_id, None)
        life.delete("client")
        if keep_log:
            logger.info(
                f"runpod: pod {life.pod.pod_id} deleted; the engine's log is in "
                f".overbrainer/{SERVES_DIR}/{handle.serve_id}/serve.log"
            )
        else:
            shutil.rmtree(where, ignore_errors=True)

    def _log_home(self, handle: ServeHandle, session: PodSession, where: Path) -> None:
        try:
            done = session.host.run(f"tail -c {LOG_TAIL} {_q(handle.dir + '/serve.log')}")
        except HostError as error:
            logger.warning(f"runpod: the engine's log could not come home: {error}")
            return
        if done.code == 0:
            write_atomic(where / "serve.log", done.stdout, "serve.log")

    def _pod_gone(self, session: PodSession) -> bool:
        """Whether the serve's pod is gone (its watchdog deleted it): recorded if so."""
        life = session.life
        try:
            if life.pod.pod_id is not None and life.api.pod(life.pod.pod_id) is not None:
                return False
            if life.pod.pod_id is not None:
                life.confirm_gone("watchdog")
        except (TransientError, UserError):
            return False
        self.sessions.pop(life.pod.run_id, None)
        return True

    def _session(self, handle: ServeHandle) -> PodSession | None:
        """The pod serving ``handle``, reached; None when it has none any more, or when
        ``handle`` is not the one started there (a stale or edited record)."""
        found = self.sessions.get(handle.serve_id)
        if found is not None:
            return found if self._started(handle) else None
        where = self.dir_of(handle.serve_id)
        if not where.is_dir() or not self._started(handle):
            return None
        life = PodLifecycle(self.site.api, where, self.site.timing, tag=SERVE_TAG)
        pod = life.pod
        if pod.pod_id is None or pod.state is PodState.DELETED or pod.workdir is None:
            return None
        config = life.ssh_dir / "config"
        host = connect(self.site.name, handle.serve_id, config, SERVE_TAG, now=False)
        session = self.site.session_on(life, host)
        self.sessions[handle.serve_id] = session
        return session

    def _started(self, handle: ServeHandle) -> bool:
        """Whether ``handle`` is the one this serve's pod started (dir, pid and port)."""
        path = self.dir_of(handle.serve_id) / HANDLE_FILE
        try:
            data = read_regular(path, HANDLE_FILE, 1 << 16, follow=False)
            mine = ServeHandle.from_dict(json.loads(data)) if data is not None else None
        except (UserError, ValueError):
            return False
        return mine is not None and (mine.dir, mine.pid, mine.port) == (
            handle.dir, handle.pid, handle.port,
        )  # fmt: skip

    def close(self) -> None:
        for session in self.sessions.values():
            with contextlib.suppress(Exception):
                session.host.close()
        self.sessions.clear()

    def live(self, serve_id: str, pod_id: object) -> bool:
        """Whether ``pod_id`` is the live pod of the serve ``serve_id`` of this project."""
        where = self.dir_of(serve_id)
        try:
            found = record.load(where) if serve_id and where.is_dir() else None
        except UserError:
            return False
        if found is None or found.pod_id != pod_id or found.state is PodState.DELETED:
            return False
        return (where / HANDLE_FILE).exists() or _maker_alive(where)


def _maker_alive(where: Path) -> bool:
    """Whether the command making the serve of ``where`` still runs."""
    try:
        data = read_regular(where / MAKER_FILE, MAKER_FILE, 64, follow=False)
        pid = int(data or b"0")
    except (UserError, ValueError):
        return False
    if pid <= 1:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
