"""Reloading the configuration while ``run`` goes on.

A watchfiles watcher on the project directory (filtered by name: editors save by writing a
new file and renaming it over the old one) marks that ``overbrainer.toml`` or ``.env``
changed; between stages, and before training, ``Reloader.changed`` reads them again. A stage
that is running keeps the settings it started with.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from loguru import logger
from pydantic import BaseModel

from overbrainer import files
from overbrainer.config.env import Environment
from overbrainer.config.load import CONFIG_FILE, ConfigError, load_settings
from overbrainer.config.model import Settings
from overbrainer.config.sections import SettingsSection
from overbrainer.errors import UserError

WATCHED = (CONFIG_FILE, ".env")
UNUSABLE = "the configuration changed and cannot be used; the run stops"
_READY_TIMEOUT = 5.0
_TICK_MS = 100  # how often the watcher thread wakes to notice it should stop


class Reloader:
    """The settings and environment of a long command, read again when their files change.

    Use it as a context manager (the watcher runs inside it) and call ``changed()`` where a
    new configuration may take effect.
    """

    def __init__(
        self,
        project_dir: Path,
        env: Environment,
        kinds: Mapping[str, type[BaseModel]],
        settings: Settings,
        sections: Mapping[str, SettingsSection] | None = None,
    ) -> None:
        self.project_dir = project_dir
        self.env = env
        self.settings = settings
        self._kinds = kinds
        self._sections = sections
        self._seen = self._snapshot()
        self._marked = threading.Event()
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._unwatched = False

    def start(self) -> Reloader:
        """Start watching; returns once changes are being seen."""
        self._thread = threading.Thread(target=self._watch, name="config-watch", daemon=True)
        self._thread.start()
        self._ready.wait(_READY_TIMEOUT)
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self) -> Reloader:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def changed(self) -> Settings | None:
        """The new settings when ``overbrainer.toml`` or ``.env`` changed since the last
        look (saying ``config reloaded``, once per change), else None.

        The environment is rebuilt from the same shell variables and the current ``.env``.
        Raises ``UserError`` when the changed configuration cannot be used.
        """
        if not (self._marked.is_set() or self._unwatched):
            return None
        self._marked.clear()  # before reading: a change from now on marks again
        snapshot = self._snapshot()
        if snapshot == self._seen:
            return None
        self._seen = snapshot
        try:
            env = self.env.reloaded(self.project_dir)
            settings = load_settings(self.project_dir, env, self._kinds, self._sections)
        except ConfigError as error:
            problems = "\n".join(f"  {problem}" for problem in error.problems)
            raise UserError(f"{UNUSABLE}\n{problems}") from None
        except UserError as error:
            raise UserError(f"{UNUSABLE}\n  {error.message}") from None
        self.env, self.settings = env, settings
        logger.info("config reloaded")
        return settings

    def _snapshot(self) -> tuple[bytes | None, ...]:
        contents: list[bytes | None] = []
        for name in WATCHED:
            try:
                path = self.project_dir / name
                contents.append(files.read_regular(path, name, files.RECORD_LIMIT))
            except UserError:
                contents.append(None)
        return tuple(contents)

    def _watch(self) -> None:
        import watchfiles

        def relevant(change: watchfiles.Change, path: str) -> bool:
            return os.path.basename(path) in WATCHED

        try:
            for changes in watchfiles.watch(
                self.project_dir,
                watch_filter=relevant,
                stop_event=self._stop,
                rust_timeout=_TICK_MS,
                yield_on_timeout=True,
                recursive=False,
                raise_interrupt=False,
            ):
                self._ready.set()
                if changes:
                    self._marked.set()
        except Exception as error:  # noqa: BLE001 - any failure: compare the files instead
            logger.debug(f"cannot watch {self.project_dir} ({type(error).__name__}): "
                         "comparing the files at each stage instead")
            self._unwatched = True
        finally:
            self._ready.set()
