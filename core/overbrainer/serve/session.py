"""One command's served providers: started on first use, reached, ended when it ends.

A provider with ``serve = {...}`` is started on its target through the executor's
``serve`` capability, recorded at once (``records``), waited for until it answers, and
reached at a local URL the target gives. The command ends what it started (normal end,
error, Ctrl-C); a serve kept with ``serve up`` is reused and left up. A record whose
command is gone (``kill -9``) is an orphan: the next command ends it (:meth:`sweep`).
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime

from loguru import logger

from overbrainer.config.model import HostTarget, Serve
from overbrainer.engines import Engine, EngineLaunch, EngineMetrics
from overbrainer.errors import TransientError, UserError
from overbrainer.hookcalls import Hooks
from overbrainer.job.interface import Executor
from overbrainer.job.serving import LOG_FILE, ServedModel, ServeHandle, ServeSpec, ServeState
from overbrainer.pipeline.budget import RAISE
from overbrainer.pipeline.history import append_history, timestamp
from overbrainer.pipeline.spend import spent
from overbrainer.project import Project
from overbrainer.runs.interrupt import deferred_sigint
from overbrainer.serve import ready
from overbrainer.serve.lent import runs_asking
from overbrainer.serve.records import ServeRecord, ServeRecords

READY_TIMEOUT_S = 1800.0
"""How long an engine may take to answer: a large model loads for minutes."""
CHECK_S = 0.5
BUDGET_CHECK_S = 10.0
"""How often a priced serve's spend is held against ``[budget] max_usd``."""

Projected = Callable[[str, float | None], tuple[float, str]]
"""A served provider's projected cost, given the target's estimated price an hour when its
settings have none: its USD and what they are (``about 2h at $2.50/h``)."""


class Serving:
    """The served providers of ``project`` for one command (or ``overbrainer serve``)."""

    def __init__(
        self,
        project: Project,
        hooks: Hooks,
        engines: Mapping[str, Engine],
        *,
        ready_timeout: float = READY_TIMEOUT_S,
        projected: Projected | None = None,
        budget_check_s: float = BUDGET_CHECK_S,
    ) -> None:
        self.project = project
        self.hooks = hooks
        self.engines = engines
        self.ready_timeout = ready_timeout
        self.projected = projected
        self.budget_check_s = budget_check_s
        self._lock = threading.RLock()
        self._guards: dict[str, threading.Event] = {}
        self.records = ServeRecords(project.state_dir)
        self._executors: dict[str, Executor] = {}
        self._urls: dict[str, str] = {}
        self._started: list[str] = []

    def serve_of(self, provider: str) -> Serve:
        """The ``serve`` table of ``provider``; ``UserError`` when it is not served."""
        found = self.project.settings.providers.get(provider)
        if found is None:
            raise UserError(f"no provider `{provider}` in overbrainer.toml")
        if found.serve is None:
            raise UserError(f"providers.{provider} is not served (it has no serve table)")
        return found.serve

    def capacity(self, provider: str) -> int:
        """The requests the stages keep in flight to ``provider``: ``serve.concurrency``,
        else what its engine holds at once (1 for an engine not installed: its start says
        why)."""
        serve = self.serve_of(provider)
        if serve.concurrency is not None:
            return serve.concurrency
        engine = self.engines.get(serve.engine)
        return engine.capacity(tuple(serve.args)) if engine is not None else 1

    def gauges(self, provider: str) -> EngineMetrics | None:
        """Where ``provider``'s engine reports its load, for a stage to follow; None when
        ``serve.concurrency`` fixes the number in flight or the engine reports none."""
        serve = self.serve_of(provider)
        engine = self.engines.get(serve.engine)
        if serve.concurrency is not None or engine is None:
            return None
        return engine.reported_metrics(tuple(serve.args))

    def served(self) -> list[str]:
        """The served providers of the settings, sorted."""
        return sorted(n for n, p in self.project.settings.providers.items() if p.serve)

    # One command's use.

    def url(self, provider: str, *, keep: bool = False) -> str:
        """The provider's base URL (``…/v1``): a serve already up (kept, or this command's),
        else one started now and waited for. ``keep``: left up when the command ends."""
        if provider in self._urls:
            if keep:
                self._keep(provider)
            return self._urls[provider]
        serve = self.serve_of(provider)
        record = self.records.load(provider)
        if record is not None and not _same(record, serve):
            if not self._orphan(record):
                asks = f", which run {record.for_run} asks" if record.for_run else ""
                raise UserError(
                    f"providers.{provider}: a serve of another configuration is up "
                    f"({record.engine} {record.model} on `{record.target}`{asks}): end it "
                    f"with `overbrainer serve down {provider}`"
                )
            self._end(record)
            record = None
        if record is not None:
            base = self._reach(record)
            if base and self._state(record) is ServeState.UNWATCHED:
                logger.warning(
                    f"providers.{provider}: the {record.engine} serve on `{record.target}` "
                    f"runs without its watchdog (no idle limit): `overbrainer serve down "
                    f"{provider}` ends it"
                )
            if base:
                self._urls[provider] = f"{base}/v1"
                if provider not in self._guards:
                    self._guard(provider)
                if self._orphan(record):  # a killed command's: this one ends it, or keeps it
                    self.records.save(_owned(record, keep))
                    if not keep:
                        self._started.append(provider)
                elif keep:
                    self._keep(provider)
                logger.info(
                    f"providers.{provider}: reusing the {record.engine} serve on "
                    f"`{record.target}` ({base})"
                )
                return self._urls[provider]
            self._end(record)  # it ended (its idle limit, a reboot): its files go
        return self._start(provider, serve, keep)

    def check_servable(self, provider: str) -> tuple[Engine, Executor]:
        """The engine and target of ``provider``'s serve, or ``UserError`` when the engine
        is not installed or the target cannot serve: asked before anything is started."""
        serve = self.serve_of(provider)
        engine = self.engines.get(serve.engine)
        if engine is None:
            known = ", ".join(sorted(self.engines)) or "none"
            raise UserError(
                f"providers.{provider}.serve.engine: no installed engine `{serve.engine}` "
                f"(installed: {known})"
            )
        executor = self._executor(serve.target)
        if "serve" not in executor.capabilities:
            raise UserError(
                f"providers.{provider}.serve.target: target `{serve.target}` cannot serve "
                "(its plugin does not offer the serve capability)"
            )
        return engine, executor

    def on_own_machine(self, provider: str) -> bool:
        """Its target makes a machine for each run and each serve (``per_run``): the
        serve's machine is not a job's."""
        return self._executor(self.serve_of(provider).target).describe().per_run

    def _start(self, provider: str, serve: Serve, keep: bool) -> str:
        engine, executor = self.check_servable(provider)
        model, gpus, args = serve.model, serve.gpus, tuple(serve.args)

        def command(port: int, bin_dir: str) -> list[str]:
            return engine.command(EngineLaunch(model, port, bin_dir, gpus, args))

        def probe(bin_dir: str) -> str:
            return engine.probe(EngineLaunch(model, 0, bin_dir, gpus, args))

        self._refuse_over_budget(provider, serve)
        spec = ServeSpec(
            serve_id=f"{provider}-{secrets.token_hex(4)}", command=command,
            idle_seconds=serve.idle_minutes * 60, port=serve.port, gpus=serve.gpus,
            model=model, probe=probe, install=engine.install,
        )  # fmt: skip
        logger.info(
            f"providers.{provider}: starting {engine.name} with {model} on target `{serve.target}`"
        )
        notice = (
            f"providers.{provider}: stopping once the serve on `{serve.target}` has started "
            "(minutes where a machine is made for it); it is then ended"
        )
        handle: ServeHandle | None = None
        try:
            # Never interrupted between the start and its record: a serve not recorded would
            # be found by nobody (its idle limit would end it, but only after idle_minutes).
            with deferred_sigint(notice) as noted:
                handle = self.hooks.start_serve(executor=executor, spec=spec)
                if handle is not None:
                    self.records.save(ServeRecord(
                        provider=provider, target=serve.target, engine=engine.name,
                        model=model, started=time.time(), owner=_own_pid(), kept=keep,
                        handle=handle, price_per_hour=_price_of(handle, self._price(serve.target)),
                    ))  # fmt: skip
                    if not keep:
                        self._started.append(provider)
            if handle is None:
                raise UserError(
                    f"providers.{provider}.serve.target: target `{serve.target}` cannot serve"
                )
            if noted.caught:
                raise noted.interrupt()
            self._guard(provider)
            base = self._wait(provider, serve, engine, executor, handle)
        except KeyboardInterrupt:
            # `serve up` cut short never said "up at": a serve left up would be paid for
            # unseen, so this command ends it as it ends a stage's.
            if keep and handle is not None and provider not in self._started:
                self._started.append(provider)
            raise
        self._urls[provider] = f"{base}/v1"
        return self._urls[provider]

    def _wait(
        self, provider: str, serve: Serve, engine: Engine, executor: Executor, handle: ServeHandle
    ) -> str:
        """Until the engine answers; ``UserError`` naming its log when it ends or is late."""
        started = time.monotonic()
        log = f"{handle.dir}/{LOG_FILE}"
        while True:
            base = self.hooks.reach_serve(executor=executor, handle=handle)
            if not base:
                self._forget(provider)
                raise UserError(
                    f"providers.{provider}: {engine.name} ended before it answered: see {log} "
                    f"on target `{serve.target}`"
                )
            if ready.answers(base, engine, serve.model):
                elapsed = time.monotonic() - started
                logger.info(f"providers.{provider}: {engine.name} answers ({elapsed:.0f} s)")
                return base
            if time.monotonic() - started > self.ready_timeout:
                self.end(provider, keep_log=True)
                raise UserError(
                    f"providers.{provider}: {engine.name} did not answer within "
                    f"{self.ready_timeout:.0f} s (it was ended): see {log} on target "
                    f"`{serve.target}`"
                )
            time.sleep(CHECK_S)

    def port_on_target(self, provider: str) -> int:
        """The serve's port on its target's loopback, started if need be: where a job on
        that target reaches it (the online teacher)."""
        self.url(provider)
        record = self.records.load(provider)
        if record is None:  # ended between the two (its budget guard)
            raise UserError(f"providers.{provider}: its serve ended as it started")
        return record.handle.port

    def keep(self, provider: str, for_run: str = "") -> None:
        """Leave the serve up when this command ends: handed to run ``for_run``, which still
        asks it (its command detached), else the user's."""
        self._keep(provider, for_run)

    def lend(self, provider: str, run_id: str) -> None:
        """Run ``run_id`` asks the serve (its online teacher): if this command is killed, the
        next one leaves it up while that run may still ask it (``_orphan``)."""
        record = self.records.load(provider)
        if record is not None and not record.kept:
            self.records.save(replace(record, for_run=run_id))

    def _orphan(self, record: ServeRecord) -> bool:
        """A killed command's serve that nobody needs: not kept, and not lent to a run that
        was launched and has not ended (as far as its record says)."""
        if not record.orphaned():
            return False
        return not record.for_run or not runs_asking(self.project, record.handle.serve_id)

    def _keep(self, provider: str, for_run: str = "") -> None:
        """Kept, and whose: a `serve up` of a serve handed to a run makes it the user's."""
        record = self.records.load(provider)
        if record is not None and not (record.kept and record.for_run == for_run):
            self.records.save(replace(_owned(record, True), for_run=for_run))
        if provider in self._started:
            self._started.remove(provider)

    # Ending.

    def end(self, provider: str, *, keep_log: bool = False) -> ServeRecord | None:
        """End the serve of ``provider`` (whoever started it), remove its files on the
        target (its log kept when ``keep_log``) and its record; the record it had, or None
        when nothing was up."""
        with self._lock:
            record = self.records.load(provider)
            if record is None:
                return None
            self._end(record, keep_log=keep_log)
            return record

    def _end(self, record: ServeRecord, *, keep_log: bool = False) -> None:
        with deferred_sigint() as noted:
            executor = self._executor(record.target)
            ran = self.hooks.stop_serve(executor=executor, handle=record.handle, keep_log=keep_log)
            self._account(record, "ended" if ran else "gone")
            self._forget(record.provider)
        if ran:
            logger.info(f"providers.{record.provider}: {record.engine} ended on `{record.target}`")
        if noted.caught:
            raise noted.interrupt()

    def _forget(self, provider: str) -> None:
        guard = self._guards.pop(provider, None)
        if guard is not None:
            guard.set()
        self.records.remove(provider)
        self._urls.pop(provider, None)
        if provider in self._started:
            self._started.remove(provider)

    def sweep(self) -> list[str]:
        """End the orphans (a record whose command is gone, not kept): the providers."""
        ended = []
        for provider in self.records.providers():
            try:
                record = self.records.load(provider)
                if record is None or not self._orphan(record):
                    continue
                logger.info(
                    f"providers.{provider}: ending the {record.engine} serve a killed command "
                    f"left on `{record.target}`"
                )
                self._end(record)
                ended.append(provider)
            except (UserError, TransientError) as error:
                # Not this command's business to fail for: its idle limit ends it anyway.
                logger.warning(
                    f"providers.{provider}: cannot end the serve a killed command left "
                    f"({error}); the next command tries again"
                )
        return ended

    def close(self) -> None:
        """End what this command started and did not keep; release the targets."""
        try:
            for provider in list(self._started):
                self.end(provider)
        finally:
            for executor in self._executors.values():
                self.hooks.release_executor(executor=executor, run=None, outcome=None)
            self._executors.clear()

    def status(self) -> list[tuple[ServeRecord, str]]:
        """Each recorded serve and where it stands: ``up at URL`` (reached from here),
        ``gone``, or why its target cannot be asked."""
        found = []
        for provider in self.records.providers():
            record = self.records.load(provider)
            if record is None:
                continue
            try:
                state = self._state(record)
                url = self._reach(record) if state is not ServeState.GONE else ""
            except (UserError, TransientError) as error:
                found.append((record, f"not known: {error}"))
                continue
            if not url:
                found.append((record, "gone (ended on its target)"))
            elif state is ServeState.UNWATCHED:
                found.append((record, f"up at {url}/v1, engine running without its watchdog "
                                      "(no idle limit)"))  # fmt: skip
            else:
                found.append((record, f"up at {url}/v1"))
        return found

    # The budget.

    def _refuse_over_budget(self, provider: str, serve: Serve) -> None:
        """``UserError`` when the serve's projected hours would take the project's spend
        past ``[budget] max_usd``."""
        limit = self.project.settings.budget.max_usd
        if limit is None or self.projected is None:
            return
        estimate = None if self._price(serve.target) else self._estimate(serve)
        if not (self._price(serve.target) or estimate):
            return
        usd, what = self.projected(provider, estimate)
        so_far = spent(self.project.dir)
        if so_far + usd > limit:
            raise UserError(
                f"budget: providers.{provider} is not served: its projected {what} "
                f"(${usd:.4f}) and the ${so_far:.4f} spent would pass max_usd ${limit:.4f}; "
                f"{RAISE}"
            )

    def _guard(self, provider: str) -> None:
        """End the serve when the project's spend (its hours so far included) reaches
        ``[budget] max_usd``: checked every ``budget_check_s`` while it is up."""
        limit = self.project.settings.budget.max_usd
        record = self.records.load(provider)
        if limit is None or record is None or not record.price_per_hour:
            return
        stop = threading.Event()
        self._guards[provider] = stop
        threading.Thread(
            target=self._watch, args=(provider, limit, stop), name=f"budget-{provider}",
            daemon=True,
        ).start()  # fmt: skip

    def _watch(self, provider: str, limit: float, stop: threading.Event) -> None:
        while not stop.wait(self.budget_check_s):
            so_far = spent(self.project.dir)
            if so_far < limit:
                continue
            logger.warning(
                f"budget: max_usd ${limit:.4f} reached (${so_far:.4f} spent, the serve's "
                f"hours included): ending the serve of providers.{provider}; {RAISE}"
            )
            try:
                self.end(provider)
            except (UserError, TransientError) as error:
                logger.warning(f"providers.{provider}: cannot end the serve ({error})")
            return

    def _estimate(self, serve: Serve) -> float | None:
        """What the machine a target makes for the serve would cost an hour (its plugin's
        ``estimate_price``, scaled to ``serve.gpus``); None when it says nothing."""
        settings = self.project.settings.targets.get(serve.target)
        if settings is None or isinstance(settings, HostTarget):
            return None
        try:
            found = self.hooks.estimate_price(
                name=serve.target, target=settings, project=self.project,
                serve=ServedModel(serve.model, serve.gpus),
            )  # fmt: skip
        except (UserError, TransientError) as error:
            logger.warning(f"targets.{serve.target}: no price estimate for the serve ({error})")
            return None
        if found is None:
            return None
        return found.usd_per_hour / max(found.gpu_count, 1) * (serve.gpus or found.gpu_count)

    def _price(self, target: str) -> float:
        """The target's ``price_per_hour`` (a host target's setting), else 0."""
        settings = self.project.settings.targets.get(target)
        price = settings.price_per_hour if isinstance(settings, HostTarget) else None
        return price or 0.0

    def _account(self, record: ServeRecord, status: str) -> None:
        """The serve's hours and what they cost, in the history as a ``serve`` line; when
        it ended on its own (``gone``: its idle limit) its end is not known, nor its cost."""
        ended = time.time()
        hours = max(0.0, ended - record.started) / 3600 if status == "ended" else None
        append_history(self.project.dir, {
            "stage": "serve", "started_at": timestamp(datetime.fromtimestamp(record.started, UTC)),
            "ended_at": timestamp(datetime.fromtimestamp(ended, UTC)), "status": status,
            "provider": record.provider, "model": record.model, "target": record.target,
            "engine": record.engine, "hours": None if hours is None else round(hours, 6),
            "price_per_hour": record.price_per_hour,
            "cost": None if hours is None else round(hours * record.price_per_hour, 6),
        })  # fmt: skip

    def _state(self, record: ServeRecord) -> ServeState:
        executor = self._executor(record.target)
        found = self.hooks.serve_state(executor=executor, handle=record.handle)
        return ServeState.GONE if found is None else found

    def _reach(self, record: ServeRecord) -> str:
        executor = self._executor(record.target)
        return self.hooks.reach_serve(executor=executor, handle=record.handle) or ""

    def _executor(self, target: str) -> Executor:
        executor = self._executors.get(target)
        if executor is None:
            settings = self.project.settings.targets.get(target)
            if settings is None:
                raise UserError(f"unknown target `{target}` (a serve record names it)")
            executor = self.hooks.create_executor(
                name=target, target=settings, project=self.project, run=None
            )
            if executor is None:
                raise UserError(f"target `{target}`: no installed plugin makes its executor")
            self._executors[target] = executor
        return executor


def _same(record: ServeRecord, serve: Serve) -> bool:
    return (record.target, record.engine, record.model) == (serve.target, serve.engine, serve.model)


def _owned(record: ServeRecord, keep: bool) -> ServeRecord:
    """``record`` owned by this command from now on."""
    # A killed command's serve this one adopts is lent to no run that may still ask it.
    return replace(record, owner=_own_pid(), kept=record.kept or keep, for_run="")


def _price_of(handle: ServeHandle, setting: float) -> float:
    """The serve's price an hour: its machine's (a pod made for it), else the target's."""
    return setting if handle.price_per_hour is None else handle.price_per_hour


def _own_pid() -> int:
    return os.getpid()
