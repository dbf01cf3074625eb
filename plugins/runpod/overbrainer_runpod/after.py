"""A pod for the commands after training (``export``, ``compare``) of a Runpod run.

The run's pod is deleted once its results are home, so these commands need a pod of
their own: the run's kept pod when it is still there (``--keep-pod`` at training), else
the run's after-training pod when one was kept (``--keep-pod`` of an earlier export or
compare), else a fresh one from the target's settings (the same GPU types, image, data
centers, volume, ``max_hours`` and host key handed through a Runpod secret).

Its record is ``runs/<id>/after-pod/pod.json`` (saved before every create, as training's),
its SSH files ``runs/<id>/after-pod/ssh/`` and its logs come home into
``runs/<id>/after-pod/pod/``. Its name is ``overbrainer-<run>-a<n>``, so ``pod ls`` and
``pod rm <run>`` see it. The pod's watchdog runs in ``after`` mode: it deletes the pod when
no command reached it within the boot grace, when the command's lease runs out (the CLI
killed) and at ``max_hours``; the command renews the lease from a thread while it works.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from shlex import quote as _q

from loguru import logger

from overbrainer.plugin import RunRecord, TransientError, UserError
from overbrainer.plugin.host import Host, HostError
from overbrainer.plugin.operations import TargetShell
from overbrainer_runpod import record
from overbrainer_runpod.pods import AFTER_TAG, STATE_DIR, PodLifecycle, connect
from overbrainer_runpod.record import AFTER_DIR, PodRecord, PodState
from overbrainer_runpod.session import PodSession, PodSite

REUSABLE = (PodState.READY, PodState.KEPT)


def after_dir(run_dir: Path) -> Path:
    return run_dir / AFTER_DIR


def after_record(run_dir: Path) -> PodRecord | None:
    """The run's after-training pod record, if it has one."""
    where = after_dir(run_dir)
    return record.load(where) if where.is_dir() else None


class LeaseKeeper:
    """Touches ``.pod/lease`` on the pod from a thread, over a connection of its own,
    while the command works: the watchdog deletes the pod once it runs out."""

    def __init__(
        self, connect: Callable[[], Host], marker_dir: str, every: float, until: float
    ) -> None:
        self._connect = connect
        self._script = f"mkdir -p {_q(marker_dir)} && touch {_q(marker_dir)}/lease\n"
        self._every = every
        self._until = until
        self.expired = False
        """Whether it stopped at the deadline (max_hours or the cost cap, + the guard)."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="pod-lease", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        host: Host | None = None
        while not self._stop.wait(self._every):
            if self._until and time.time() > self._until:
                self.expired = True
                logger.warning(
                    "runpod: the pod is past max_hours or its cost cap: its lease is no longer "
                    "renewed and its watchdog deletes it"
                )
                break
            try:
                host = host or self._connect()
                host.run(self._script, timeout=60)
            except Exception as error:  # noqa: BLE001 - the next round tries again
                logger.debug(f"runpod: cannot renew the pod's lease: {error}")
                if host is not None:
                    _close(host)
                host = None
        if host is not None:
            _close(host)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=90)


class AfterPod:
    """The pod one command after training (``purpose``: ``export``, ``compare``) works on
    for ``run``: found or made by :meth:`open`, ended by :meth:`release` (kept with
    ``keep``, else deleted; the run's kept training pod is left as it is), through the
    executor's ``site``. The executor holds it from ``open_shell`` to ``release_executor``."""

    def __init__(self, site: PodSite, run: RunRecord, purpose: str, keep: bool) -> None:
        self._site = site
        self.run = run
        self.label = purpose or "runpod"
        self.keep = keep
        self.session: PodSession | None = None
        """The pod, reached: set as soon as there is one to release."""
        self.owned = False
        """The run's after-training pod (deleted at the end unless kept), not its kept
        training pod (left as it is)."""
        self.lease: LeaseKeeper | None = None

    # Opening.

    def open(self) -> TargetShell:
        """A shell on the pod, its lease renewed from now until :meth:`release`."""
        site, run = self._site, self.run
        session = self._kept_training_pod() or self._after_pod()
        marker_dir = f"{session.run_dir}/.pod"
        timing = site.timing
        pod = session.life.pod
        every = timing.seconds(min(timing.lease_renew_minutes, timing.lease_minutes / 3))
        deadlines = [at for at in (pod.delete_at, self._cost_cap(session)) if at]
        guard = min(deadlines) + timing.seconds(timing.client_guard_minutes) if deadlines else 0
        self.lease = LeaseKeeper(self._connector(session.life.ssh_dir), marker_dir, every, guard)
        shell = session.inner.shell()
        moved = session.run_dir if self.owned or session.run_dir != run.remote_dir else None
        where = site.run_dir(run.id).name
        logger.debug(f"runpod: {self.label} of run {run.id} works in {session.run_dir} ({where})")
        return replace(shell, run_dir=moved, price_per_hour=pod.cost_per_hour)

    def _cost_cap(self, session: PodSession) -> int | None:
        """When the pod's spend reaches ``max_cost_usd`` (epoch seconds): its watchdog deletes
        it then once no command holds its lease, as at ``max_hours``. Training's pod has its
        own cap (a snapshot): only a pod made for these commands gets this one."""
        pod = session.life.pod
        cap = self._site.target.max_cost_usd
        if not self.owned or cap is None or not pod.cost_per_hour:
            return None
        created = record.parse_time(pod.created or record.now_text()).timestamp()
        at = int(created + self._site.timing.seconds(60 * cap / pod.cost_per_hour))
        session.host.check(f'echo {at} > "$HOME/{STATE_DIR}/cost_at"\n')
        return at

    def _kept_training_pod(self) -> PodSession | None:
        """The run's own pod, when it was kept at training and answers."""
        site, run = self._site, self.run
        run_dir = site.run_dir(run.id)
        found = record.load(run_dir) if run_dir.is_dir() else None
        if found is None or found.state is not PodState.KEPT or found.pod_id is None:
            return None
        life = PodLifecycle(site.api, run_dir, site.timing)
        host = self._reach(life, "")
        if host is None:
            return None
        logger.info(f"{self.label}: using the kept pod {found.pod_id} of run {run.id}")
        session = site.session_on(life, host)
        _mark_in_use(session)
        self.session, self.owned = session, False
        return session

    def _after_pod(self) -> PodSession:
        """The run's after-training pod: the one kept by an earlier command, else a new one."""
        site, run, label = self._site, self.run, self.label
        where = after_dir(site.run_dir(run.id))
        life = PodLifecycle(site.api, where, site.timing, run_id=run.id, tag=AFTER_TAG)
        previous = life.pod
        if previous.pod_id is not None and previous.state in REUSABLE:
            host = self._reach(life, AFTER_TAG)
            if host is not None:
                logger.info(f"{label}: using the kept pod {previous.pod_id} of run {run.id}")
                session = site.session_on(life, host)
                self.session, self.owned = session, True  # deleted even if what follows fails
                _mark_in_use(session)
                life.save(state=PodState.READY, keep=False)
                return session
            _forget(life, label)
        # A new record, the attempts kept so that names stay unique (and `pod rm` finds them).
        life.pod = PodRecord(run_id=run.id, attempts=list(previous.attempts))
        life.save()
        placement = site.placement()
        logger.info(
            f"{label}: creating a pod ({', '.join(placement.gpu_types)}) for run {run.id}: "
            f"one pod for this command, {'kept (--keep-pod)' if self.keep else 'deleted'} at "
            "its end"
        )
        try:
            life.place(site.target, placement, api_url=site.api.base_url)
            host = life.wait_ready(lambda config: self._connect(config, AFTER_TAG))
            life.drop_secret()
            session = site.session_on(life, host)
            self.session, self.owned = session, True
            _mark_in_use(session)
            session.check_venv()
        except BaseException:
            self.session = None
            abandon_start(life)
            raise
        pod = life.pod
        rate = f" at ${pod.cost_per_hour:.2f}/h" if pod.cost_per_hour is not None else ""
        logger.info(f"{label}: pod {pod.pod_id} ({pod.gpu_type}{rate}) ready for run {run.id}")
        return session

    def _reach(self, life: PodLifecycle, tag: str) -> Host | None:
        """The recorded pod, connected; None when it is gone or does not answer (recorded)."""
        pod = life.pod
        assert pod.pod_id is not None
        try:
            found = life.api.pod(pod.pod_id)
        except (TransientError, UserError) as error:
            logger.warning(f"runpod: cannot look pod {pod.pod_id} up: {error}")
            return None
        if found is None:
            with contextlib.suppress(UserError):
                life.confirm_gone("watchdog")
            return None
        config = life.ssh_dir / "config"
        if not config.is_file():
            return None
        try:
            return self._connect(config, tag)
        except (HostError, UserError, OSError) as error:
            logger.warning(f"runpod: pod {pod.pod_id} does not answer over SSH: {error}")
            return None

    def _connect(self, config: Path, tag: str) -> Host:
        return connect(self._site.name, self.run.id, config, tag)

    def _connector(self, ssh_dir: Path) -> Callable[[], Host]:
        tag = AFTER_TAG if self.owned else ""
        return lambda: self._connect(ssh_dir / "config", tag)

    # Ending.

    def release(self) -> None:
        """End the command's use of its pod: the lease stopped, the logs home, then the pod
        kept (``--keep-pod``), left (the run's kept training pod) or deleted. Once only."""
        session = self.session
        if session is None:
            return
        self.session = None
        if self.lease is not None:
            self.lease.stop()
        life = session.life
        pod = life.pod
        label, run_id = self.label, self.run.id
        if not self.owned:
            _close(session.host)
            logger.info(
                f"{label}: pod {pod.pod_id} of run {run_id} stays kept: delete it with "
                f"`overbrainer pod rm {run_id}`"
            )
            return
        if _gone(life):
            why = "past max_hours or its cost cap" if self.lease and self.lease.expired else ""
            _close(session.host)
            logger.warning(
                f"{label}: pod {pod.pod_id} of run {run_id} was deleted by its watchdog "
                f"while the command worked{f' ({why})' if why else ''}"
            )
            return
        try:
            session.logs_home()
        except Exception as error:  # noqa: BLE001 - the logs must never keep a paid pod alive
            logger.warning(f"{label}: the logs of pod {pod.pod_id} could not come home: {error}")
        except KeyboardInterrupt:  # Ctrl-C while the logs come home: the pod ends all the same
            logger.warning(f"{label}: interrupted while the logs of pod {pod.pod_id} came home")
            life.drained = True  # no second read of its log before the delete
            self._end(session)
            raise
        self._end(session)

    def _end(self, session: PodSession) -> None:
        """The pod made for the command kept (``--keep-pod``) or deleted."""
        life = session.life
        pod = life.pod
        label, run_id = self.label, self.run.id
        where = _q(f"{session.run_dir}/.pod")
        if self.keep:
            try:
                session.host.check(f"mkdir -p {where} && touch {where}/keep\n")
            except Exception as error:  # noqa: BLE001 - a connection cut by Ctrl-C too
                logger.warning(f"runpod: cannot mark pod {pod.pod_id} kept: {error}")
            _close(session.host)
            life.save(state=PodState.KEPT, keep=True)
            logger.info(
                f"{label}: pod {pod.pod_id} kept: the next export or compare of run "
                f"{run_id} reuses it; delete it with `overbrainer pod rm {run_id}` (its "
                "watchdog deletes it at max_hours)"
            )
            return
        try:
            session.host.check(f"mkdir -p {where} && touch {where}/retrieved\n")
        except Exception as error:  # noqa: BLE001 - nothing of the connection stops the delete
            logger.debug(f"runpod: cannot mark the pod done: {error}")
        _close(session.host)
        try:
            life.delete("client")
        except (UserError, TransientError) as error:
            logger.warning(
                f"runpod: cannot delete pod {pod.pod_id}: {error}; its watchdog deletes it once "
                f"its lease runs out, or run `overbrainer pod rm {run_id}`"
            )
            return
        logger.info(f"{label}: pod {pod.pod_id} of run {run_id} deleted")


def abandon_start(life: PodLifecycle) -> None:
    """Delete the pod of a start that failed or was interrupted; one whose create was cut
    short before its answer (Ctrl-C) is found by its name."""
    if life.pod.pod_id is None and life.pod.attempts:
        try:
            found = life.find_by_name()
        except (TransientError, UserError):
            found = []
        for pod in found:
            life.save(pod_id=str(pod["id"]), state=PodState.DELETING, deleted=None)
            life.abandon()
        if found:
            return
    life.abandon()


def _forget(life: PodLifecycle, label: str) -> None:
    """An after-training pod that cannot be reused: deleted before a new one is made."""
    if life.pod.state is PodState.DELETED or life.pod.pod_id is None:
        return
    logger.info(f"{label}: deleting pod {life.pod.pod_id}, which does not answer")
    try:
        life.delete("client")
    except (UserError, TransientError) as error:
        logger.warning(
            f"runpod: cannot delete pod {life.pod.pod_id}: {error}; delete it with "
            f"`overbrainer pod rm {life.pod.run_id}`"
        )


def _mark_in_use(session: PodSession) -> None:
    """The run's directory on the pod, with a fresh lease and no keep nor retrieved mark
    (a kept pod reused is kept again only if this command asks)."""
    where = _q(f"{session.run_dir}/.pod")
    keep = "" if session.life.tag == "" else f" {where}/keep"
    session.host.check(
        f"mkdir -p {where} && rm -f {where}/retrieved{keep} && touch {where}/lease\n"
    )


def _gone(life: PodLifecycle) -> bool:
    """Whether the pod is gone already (its watchdog deleted it): recorded if so."""
    pod_id = life.pod.pod_id
    try:
        if pod_id is None or life.api.pod(pod_id) is not None:
            return False
        life.confirm_gone("watchdog")
    except (TransientError, UserError):
        return False
    return True


def _close(host: Host) -> None:
    try:
        host.close()
    except Exception as error:  # noqa: BLE001 - closing is best effort
        logger.debug(f"runpod: closing a connection: {error}")
