"""``overbrainer watch``: a ``run`` cycle after every change to the project's inputs.

The inputs are ``overbrainer.toml``, ``.env``, ``prompts/*.txt`` and ``data/*.jsonl``. A
watchfiles thread wakes the loop (editors save by renaming: the directories are watched,
not the files); what decides is a comparison of the inputs' state with the one the last
cycle left, so a swap file, a comment-only edit or the cycle's own writes start nothing.
The project lock is held during a cycle only, so ``train stop``, ``runs ls`` and the
others work between cycles.
"""

from __future__ import annotations

import hashlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from loguru import logger

from overbrainer import files
from overbrainer.after.chain import after_training
from overbrainer.config.env import Environment
from overbrainer.config.load import CONFIG_FILE, ConfigError, load_settings
from overbrainer.config.model import Settings
from overbrainer.config.reload import Reloader
from overbrainer.config.sections import SettingsSection
from overbrainer.cycles import CycleSummary
from overbrainer.errors import (
    DetachedRun,
    Interrupted,
    InterruptedBeforeJob,
    Stopped,
    UserError,
    signal_of,
)
from overbrainer.hookcalls import Hooks
from overbrainer.job.record import RunRecord, RunState
from overbrainer.pipeline.runner import Outcome
from overbrainer.runs.store import RunStore
from overbrainer.watch.cycle import Cycle

ENV_FILE = ".env"
PROMPTS = ("prompts", "*.txt")
DATA = ("data", "*.jsonl")
STEP_MS = 50
"""Changes are taken once none came for this long (a burst of saves is one change)."""
DEBOUNCE_MS = 1000
"""...or after this long at most, however busy the files are."""
TICK_S = 0.2

State = dict[str, str]


def inputs_state(project_dir: Path) -> State:
    """What the cycle reads, by path: settings files and prompts by content, data files by
    size and modification time (they are large, and written by the stages themselves)."""
    state: State = {}
    for name in (CONFIG_FILE, ENV_FILE):
        path = project_dir / name
        try:
            data = files.read_regular(path, name, files.RECORD_LIMIT)
        except UserError:
            continue
        if data is not None:
            state[name] = hashlib.sha256(data).hexdigest()
    for (folder, pattern), by_content in ((PROMPTS, True), (DATA, False)):
        for path in sorted((project_dir / folder).glob(pattern)):
            try:
                if by_content:
                    data = files.read_regular(path, f"{folder}/{path.name}", files.RECORD_LIMIT)
                    if data is None:
                        continue
                    value = hashlib.sha256(data).hexdigest()
                else:
                    stat = path.stat()
                    value = f"{stat.st_size}:{stat.st_mtime_ns}"
            except (OSError, UserError):
                continue
            state[f"{folder}/{path.name}"] = value
    return state


def changed_paths(before: State, after: State) -> tuple[str, ...]:
    return tuple(sorted(p for p in {*before, *after} if before.get(p) != after.get(p)))


def changed_keys(old: Settings, new: Settings) -> list[str]:
    """The dotted keys whose values differ between two configurations (secrets compare
    as set or unset: their values are never read here)."""
    return sorted(_diff(_dumped(old), _dumped(new), ""))


def _dumped(settings: Settings) -> dict[str, Any]:
    """Every table, the plugins' top-level ones beside the core's."""
    tables = {name: value.model_dump(mode="json") for name, (_, value) in settings.sections.items()}
    return {**settings.model_dump(mode="json"), **tables}


def _diff(old: Any, new: Any, where: str) -> Iterator[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in {*old, *new}:
            yield from _diff(old.get(key), new.get(key), f"{where}.{key}" if where else key)
    elif old != new:
        yield where


class Watcher:
    """A watchfiles thread that sets ``woken`` when something under the project's inputs
    may have changed."""

    def __init__(self, project_dir: Path) -> None:
        self.project_dir = Path(os.path.abspath(project_dir))
        # watchfiles reports absolute paths, through symlinks or not as the OS saw them:
        # a path counts when it lies under either spelling of the project directory.
        self._roots = tuple(dict.fromkeys((self.project_dir, Path(os.path.realpath(project_dir)))))
        self.woken = threading.Event()
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="watch", daemon=True)

    def __enter__(self) -> Watcher:
        self._thread.start()
        self._ready.wait(5)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _relevant(self, change: Any, path: str) -> bool:
        parts = self._parts(Path(path))
        if parts is None:
            return False
        return (len(parts) == 1 and parts[0] in (CONFIG_FILE, ENV_FILE)) or (
            len(parts) == 2 and parts[0] in (PROMPTS[0], DATA[0])
        )

    def _parts(self, path: Path) -> tuple[str, ...] | None:
        """``path`` relative to the project, or None when it lies outside it."""
        for root in self._roots:
            if path.is_relative_to(root):
                return path.relative_to(root).parts
        return None

    def _watch(self) -> None:
        import watchfiles

        try:
            for changes in watchfiles.watch(
                self.project_dir,
                watch_filter=self._relevant,
                step=STEP_MS,
                debounce=DEBOUNCE_MS,
                stop_event=self._stop,
                rust_timeout=int(TICK_S * 1000),
                yield_on_timeout=True,
                raise_interrupt=False,
            ):
                self._ready.set()
                if changes:
                    self.woken.set()
        except Exception as error:  # noqa: BLE001 - without events, compare on a timer
            logger.warning(f"cannot watch {self.project_dir} ({error}): looking every second")
            while not self._stop.wait(1.0):
                self.woken.set()
        finally:
            self._ready.set()


@dataclass
class Loop:
    """The watch loop of one project.

    ``lock`` gives the project lock (held during a cycle); ``hook`` the plugins' hooks;
    ``echo`` prints a line on stdout; ``on_change``: what a change does to a training in
    progress (``snapshot`` or ``wait``), read from the settings when not given.
    """

    project_dir: Path
    env: Environment
    kinds: Mapping[str, Any]
    settings: Settings
    hook: Hooks
    runs: RunStore
    lock: Callable[[], AbstractContextManager[Any]]
    echo: Callable[[str], None]
    cycles: int | None = None
    """Stop after this many cycles (tests, benchmarks); None: until Ctrl-C."""
    sections: Mapping[str, SettingsSection] = field(default_factory=dict)
    """The settings tables the plugins registered (``Plugins.sections``)."""
    _number: int = 0
    _state: State = field(default_factory=dict)
    _stopped_run: str | None = None
    _said: set[str] = field(default_factory=set)
    """The target check's warnings said so far: each once a ``watch``."""
    _models_found: set[str] = field(default_factory=set)
    """Base models found on their targets so far: each probed once a ``watch``."""

    def run(self) -> None:
        """Cycle at start, then after every change, until Ctrl-C (or ``cycles``), which ends
        watching as it should: ``watch: stopped``, with what it cut short, not an error."""
        try:
            self._watch()
        except Stopped:
            raise
        except Interrupted as interrupted:
            signum = interrupted.exit_code - 128
            raise Stopped(f"watch: stopped ({interrupted.message})", signum) from None
        except InterruptedBeforeJob as interrupted:  # a Ctrl-C as a run was prepared
            raise Stopped(f"watch: stopped ({interrupted.message})", signal.SIGINT) from None
        except KeyboardInterrupt as interrupt:
            raise Stopped("watch: stopped", signal_of(interrupt)) from None

    def _watch(self) -> None:
        with Watcher(self.project_dir) as watcher:
            self._state = inputs_state(self.project_dir)
            self._cycle(("start",), watcher)
            while self.cycles is None or self._number < self.cycles:
                try:
                    changed = self._wait(watcher)
                except KeyboardInterrupt as interrupt:
                    raise Stopped("watch: stopped", signal_of(interrupt)) from None
                self._on_change(changed, watcher)

    def _wait(self, watcher: Watcher) -> tuple[str, ...]:
        """Block until the inputs differ from what the last cycle used."""
        while True:
            if watcher.woken.wait(TICK_S):
                watcher.woken.clear()
                now = inputs_state(self.project_dir)
                changed = changed_paths(self._state, now)
                if changed:
                    return changed

    def _on_change(self, changed: tuple[str, ...], watcher: Watcher) -> None:
        old = self.settings
        try:
            env = self.env.reloaded(self.project_dir)
            new = load_settings(self.project_dir, env, self.kinds, self.sections)
        except ConfigError as error:
            self._state = inputs_state(self.project_dir)
            logger.error(
                "watch: the configuration cannot be used; fix it and save again:\n"
                + "\n".join(f"  {problem}" for problem in error.problems)
            )
            return
        except UserError as error:
            self._state = inputs_state(self.project_dir)
            logger.error(f"watch: the configuration cannot be used; fix it and save again: {error}")
            return
        keys = changed_keys(old, new)
        self.env, self.settings = env, new
        if keys:
            self.hook.on_config_change(old=old, new=new, changed_keys=keys)
        elif not any(not p.startswith((CONFIG_FILE, ENV_FILE)) for p in changed):
            # The files changed, not what they say (a comment, spacing): nothing to do.
            self._state = inputs_state(self.project_dir)
            logger.info(f"watch: {', '.join(changed)} changed, not the configuration")
            return
        self._cycle(changed, watcher)

    def _cycle(self, changed: tuple[str, ...], watcher: Watcher) -> None:
        self._number += 1
        summary = CycleSummary(self._number, changed)
        logger.info(f"watch: cycle {self._number} starts ({', '.join(changed)})")
        used = inputs_state(self.project_dir)
        on_change: Literal["snapshot", "wait"] = self.settings.watch.on_change
        stop_when = self._stop_when(used, watcher) if on_change == "snapshot" else None
        resume = self._stopped_run
        self._stopped_run = None
        try:
            with (
                self.lock(),
                Reloader(
                    self.project_dir, self.env, self.kinds, self.settings, self.sections
                ) as reloader,
            ):
                cycle = Cycle(
                    reloader,
                    self.hook,
                    self.runs,
                    self.echo,
                    watching=True,
                    said=self._said,
                    models_found=self._models_found,
                )
                cycle.run(summary, on_stage=_log_stage, resume_if_same=resume, stop_when=stop_when)
                self.env, self.settings = reloader.env, reloader.settings
                if summary.run is not None:
                    started = time.monotonic()
                    try:
                        summary.ran.extend(self._after_training(cycle, summary.run))
                    finally:
                        summary.seconds += time.monotonic() - started
        except DetachedRun:
            summary.detached = True
            self._finish(summary)
            raise
        except UserError as error:
            summary.error = error.message
            summary.interrupted = isinstance(error, (Interrupted, InterruptedBeforeJob))
            if error.exit_code != 1 or isinstance(error, InterruptedBeforeJob):
                self._finish(summary)
                raise
        finally:
            # What the cycle wrote is its own; what changed in the settings files and prompts
            # since it read them waits for the next one.
            now = inputs_state(self.project_dir)
            self._state = {
                **now,
                **{k: v for k, v in used.items() if not k.startswith(DATA[0] + "/")},
            }
            for key in [k for k in now if k not in used and not k.startswith(DATA[0] + "/")]:
                del self._state[key]
        if summary.run is not None and summary.run.state is RunState.STOPPED:
            self._stopped_run = summary.run.id
        self._finish(summary)

    def _after_training(self, cycle: Cycle, run: RunRecord) -> list[str]:
        """What ``train`` and ``run`` do after a run (``[export]``, ``[hub]``
        ``after_training``), with the settings the cycle ended with."""
        project = cycle.workspace().project
        return after_training(project, self.hook, self.runs, run, echo=self.echo, label="watch")

    def _finish(self, summary: CycleSummary) -> None:
        try:
            self.echo(summary.line())
            self.hook.on_cycle_end(summary=summary)
        except KeyboardInterrupt as interrupt:
            # The cycle is over: a Ctrl-C as its line is printed (one read at once, as the
            # line comes) stops watching, as one while idle does.
            raise Stopped("watch: stopped", signal_of(interrupt)) from None

    def _stop_when(self, used: State, watcher: Watcher) -> Callable[[], str | None]:
        """While training: a reason to snapshot once the configuration or a prompt changed
        in a way that matters."""
        settings = self.settings

        def check() -> str | None:
            if not watcher.woken.is_set():
                return None
            now = inputs_state(self.project_dir)
            changed = [p for p in changed_paths(used, now) if not p.startswith(DATA[0] + "/")]
            if not changed:
                return None
            try:
                new = load_settings(
                    self.project_dir, self.env.reloaded(self.project_dir), self.kinds,
                    self.sections,
                )
            except (ConfigError, UserError):
                return None  # an edit in progress: wait for one that can be used
            prompts = [p for p in changed if p.startswith(PROMPTS[0] + "/")]
            if not prompts and not changed_keys(settings, new):
                return None
            return f"watch: {', '.join(changed)} changed"

        return check


def _log_stage(outcome: Outcome) -> None:
    logger.info(outcome.summary)
