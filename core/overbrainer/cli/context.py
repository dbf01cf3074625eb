"""What every command may need of the project, loaded once and only when asked for.

Imports happen inside the properties: a command module imports this one at its top, and
``overbrainer --help`` must not pay for pydantic or pluggy.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from overbrainer.config.env import Environment
    from overbrainer.config.model import Settings
    from overbrainer.plugins import Plugins
    from overbrainer.project import Project
    from overbrainer.runs.lock import ProjectLock
    from overbrainer.runs.store import RunStore
    from overbrainer.serve.session import Serving
    from overbrainer.train.workspace import Workspace


class App:
    """The project directory and what commands read from it.

    ``given`` is ``-C``'s directory, or with ``explicit`` false the directory to search from
    (the current one): the project is the first one upwards holding ``overbrainer.toml``,
    as git and uv find their roots. A command that reads ``project_dir`` needs a project
    and fails, saying so, when there is none.

    A plain class, not a dataclass: every command makes one, and ``dataclasses`` is a
    millisecond of import that ``runs ls`` would pay for nothing else.
    """

    def __init__(self, given: Path, explicit: bool = True) -> None:
        self.given = given
        self.explicit = explicit
        self._plugins: Plugins | None = None
        self._serving: Serving | None = None

    def __repr__(self) -> str:
        return f"App(given={self.given!r}, explicit={self.explicit!r})"

    @cached_property
    def project_dir(self) -> Path:
        from overbrainer.cli.project import find_project

        return find_project(self.given, self.explicit)

    @cached_property
    def env(self) -> Environment:
        from overbrainer.cli.project import find_project
        from overbrainer.config.env import Environment
        from overbrainer.errors import UserError

        try:
            where = find_project(self.given, self.explicit)
        except UserError:  # no project: the shell's environment alone (plugins, completion)
            where = self.given
        return Environment.load(where)

    @property
    def plugins(self) -> Plugins:
        if self._plugins is None:
            from overbrainer.plugins import load_plugins

            self._plugins = load_plugins(self.env.merged)
        return self._plugins

    @cached_property
    def settings(self) -> Settings:
        from overbrainer.config.load import load_settings

        settings = load_settings(
            self.project_dir, self.env, self.plugins.kinds, self.plugins.sections
        )
        if any(provider.serve for provider in settings.providers.values()):
            self._serve_providers(settings)
        return settings

    def serving(self) -> Serving:
        """The served providers of this command: started on first use, ended with it."""
        if self._serving is None:
            self._serving = self._new_serving(self.settings)
        return self._serving

    def _new_serving(self, settings: Settings) -> Serving:
        from overbrainer.plan.serve_hours import projected_cost
        from overbrainer.project import Project
        from overbrainer.serve.session import Serving

        project = Project(dir=self.project_dir, settings=settings, env=self.env.merged)
        return Serving(
            project, self.plugins.hook, self.plugins.engines,
            projected=lambda provider, estimate: projected_cost(project, provider, estimate),
        )  # fmt: skip

    def _serve_providers(self, settings: Settings) -> None:
        """A project with served providers: the stages reach them through this command's
        serving session, ended when the command ends (Ctrl-C and errors included); the
        orphans of a killed command are ended first."""
        self._refuse_unservable(settings)
        ctx = click.get_current_context(silent=True)
        if ctx is None:  # not a command (the TUI's reload): nothing is started
            return
        from overbrainer.providers import served

        def close() -> None:
            served.install(None)
            if self._serving is not None:
                self._serving.close()

        serving = self._serving = self._new_serving(settings)
        ctx.find_root().call_on_close(close)
        served.install(serving)
        serving.sweep()

    def _refuse_unservable(self, settings: Settings) -> None:
        """A served provider on a target whose plugin cannot serve (slurm, ray): refused
        as the command starts, before any stage asks (and pays) another provider."""
        from overbrainer.errors import UserError
        from overbrainer.plugins import can_serve

        for name, provider in sorted(settings.providers.items()):
            target = settings.targets.get(provider.serve.target) if provider.serve else None
            if provider.serve is None or target is None:
                continue
            if can_serve(self.plugins, target.kind) is False:
                raise UserError(
                    f"providers.{name}.serve.target: target `{provider.serve.target}` (kind "
                    f"{target.kind}) cannot serve: its plugin `{self.plugins.owners[target.kind]}` "
                    "does not offer the serve capability (local, ssh and runpod targets serve)"
                )

    @property
    def project(self) -> Project:
        from overbrainer.project import Project

        return Project(dir=self.project_dir, settings=self.settings, env=self.env.merged)

    @cached_property
    def runs(self) -> RunStore:
        from overbrainer.runs.store import RunStore

        return RunStore(self.project_dir)

    def workspace(self) -> Workspace:
        """What the training commands work on, reporting with ``click.echo`` (control
        characters escaped: report lines quote run records, which are files)."""
        from overbrainer.redact import escape_controls
        from overbrainer.train.workspace import Workspace

        def echo(line: str) -> None:
            click.echo(escape_controls(line))

        return Workspace(self.project, self.plugins.hook, self.runs, echo)

    def lock(self, metrics: bool = True) -> ProjectLock:
        """The project lock; with ``metrics``, held together with the ``[metrics]``
        endpoint when one is configured."""
        from overbrainer.runs.lock import ProjectLock

        if not metrics:
            return ProjectLock(self.project_dir)
        from overbrainer.cli.metered import MeteredLock

        return MeteredLock(self.project_dir, self.metrics_listen)

    def metrics_listen(self) -> str | None:
        """``[metrics] listen``, or None when unset or the configuration is not valid (the
        command says so itself when it reads it)."""
        from overbrainer.errors import UserError

        try:
            return self.settings.metrics.listen
        except UserError:
            return None


def current_app() -> App:
    """The ``App`` of the command being run."""
    app = click.get_current_context().find_object(App)
    if app is None:  # never: the root group creates it
        raise RuntimeError("no overbrainer project in this command's context")
    return app
