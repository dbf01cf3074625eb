"""Finding the installed target plugins and the kinds they register.

Plugins are distributions declaring an entry point in the group ``overbrainer``. Each one
is loaded on its own, so a broken plugin is reported and skipped instead of taking the CLI
down. ``OVERBRAINER_LOAD_PLUGINS=a,b`` loads only those (an empty value loads none), and
``OVERBRAINER_TRACE_PLUGINS=1`` prints every hook call.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from typing import TYPE_CHECKING, Any

import pluggy
from loguru import logger
from pydantic import BaseModel

from overbrainer import hookspecs
from overbrainer.config.model import Settings
from overbrainer.config.sections import SettingsSection
from overbrainer.engines import Engine, builtin
from overbrainer.hookcalls import Hooks
from overbrainer.job import hooks
from overbrainer.job.adapter import ExecutorHooks
from overbrainer.plugincmds import remember
from overbrainer.redact import redact

if TYPE_CHECKING:
    from overbrainer.config.sections import SettingsSection
    from overbrainer.engines import Engine

GROUP = "overbrainer"


@dataclass
class PluginInfo:
    """What ``overbrainer plugins`` shows of one plugin."""

    name: str
    distribution: str | None
    version: str | None
    kinds: list[str] = field(default_factory=list)
    hooks: list[str] = field(default_factory=list)
    executors: dict[str, list[str]] = field(default_factory=dict)
    """The executor classes the plugin registers (``ExecutorHooks``), each with the
    optional operations it declares (``Executor.capabilities``)."""


@dataclass
class Plugins:
    """The plugin manager with the target kinds its plugins registered."""

    pm: pluggy.PluginManager
    kinds: dict[str, type[BaseModel]] = field(default_factory=dict)
    owners: dict[str, str] = field(default_factory=dict)
    sections: dict[str, SettingsSection] = field(default_factory=dict)
    """The top-level settings tables the plugins registered, by name."""
    section_owners: dict[str, str] = field(default_factory=dict)
    distributions: dict[str, metadata.Distribution | None] = field(default_factory=dict)
    engines: dict[str, Engine] = field(default_factory=dict)
    """The engines the plugins registered (``register_engines``), by name."""
    engine_owners: dict[str, str] = field(default_factory=dict)

    @property
    def hook(self) -> Hooks:
        """The hooks, called with their types (:class:`~overbrainer.hookcalls.Hooks`)."""
        return Hooks(self.pm)

    def register(
        self, plugin: object, name: str, dist: metadata.Distribution | None = None
    ) -> None:
        """Add ``plugin`` (a module or object with hook implementations) and its kinds."""
        self.pm.register(plugin, name=name)
        try:
            self.pm.check_pending()
        except pluggy.PluginValidationError as error:
            self.pm.unregister(name=name)
            raise ValueError(str(error)) from None
        self.distributions[name] = dist
        self.hook.register_targets(
            plugin=name, register=lambda kind, model: self._add_kind(name, kind, model)
        )

        plugin_name = name

        def add_section(
            name: str,
            model: type[BaseModel],
            *,
            secrets: Collection[str] = (),
            env_only: Collection[str] = (),
        ) -> None:
            self._add_section(plugin_name, name, model, secrets, env_only)

        self.hook.register_settings(plugin=name, register=add_section)
        self.hook.register_engines(
            plugin=name, register=lambda engine: self._add_engine(plugin_name, engine)
        )

    def unregister(self, name: str) -> None:
        self.pm.unregister(name=name)
        self.distributions.pop(name, None)
        for kind in [k for k, owner in self.owners.items() if owner == name]:
            del self.kinds[kind]
            del self.owners[kind]
        for table in [t for t, owner in self.section_owners.items() if owner == name]:
            del self.sections[table]
            del self.section_owners[table]
        for engine in [e for e, owner in self.engine_owners.items() if owner == name]:
            del self.engines[engine]
            del self.engine_owners[engine]

    def _add_section(
        self,
        plugin: str,
        table: str,
        model: type[BaseModel],
        secrets: Collection[str],
        env_only: Collection[str],
    ) -> None:
        section = SettingsSection.checked(table, model, secrets, env_only, Settings.model_fields)
        if _first(self.section_owners, table, plugin, f"the settings table [{table}]"):
            self.sections[table] = section

    def _add_engine(self, plugin: str, engine: Engine) -> None:
        if not isinstance(engine, Engine):
            raise TypeError(f"register_engines needs an Engine instance, not {engine!r}")
        if _first(self.engine_owners, engine.name, plugin, f"engine `{engine.name}`"):
            self.engines[engine.name] = engine

    def _add_kind(self, plugin: str, kind: str, model: type[BaseModel]) -> None:
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            raise TypeError(f"target kind `{kind}` needs a pydantic model, not {model!r}")
        if _first(self.owners, kind, plugin, f"target kind `{kind}`"):
            self.kinds[kind] = model

    def info(self) -> list[PluginInfo]:
        """Every installed plugin loaded, sorted by name (the core's built-in one aside)."""
        infos = []
        for name, plugin in sorted(self.pm.list_name_plugin()):
            if name in (BUILTIN, BUILTIN_ENGINES):
                continue
            dist = self.distributions.get(name)
            hooks = sorted(caller.name for caller in self.pm.get_hookcallers(plugin) or [])
            infos.append(
                PluginInfo(
                    name=name,
                    distribution=dist.metadata["Name"] if dist else None,
                    version=dist.version if dist else None,
                    kinds=sorted(k for k, owner in self.owners.items() if owner == name),
                    hooks=hooks,
                    executors=_executors(name, plugin),
                )
            )
        return infos


def can_serve(plugins: Plugins, kind: str) -> bool | None:
    """Whether the executors of the plugin owning ``kind`` declare the capability
    ``serve``: None when that cannot be told before one is made (a plugin of raw hooks,
    a class that does not import)."""
    owner = plugins.owners.get(kind)
    plugin = plugins.pm.get_plugin(owner) if owner else None
    if not isinstance(plugin, ExecutorHooks):
        return None
    try:
        classes = plugin.executor_classes()
    except Exception:  # noqa: BLE001 - the command that makes the executor says why
        return None
    return any("serve" in cls.capabilities for cls in classes) if classes else None


def _executors(name: str, plugin: object) -> dict[str, list[str]]:
    """The executor classes of an ``ExecutorHooks`` plugin and what each declares it can
    do; a class named ``"module:Class"`` is imported here (a warning when it cannot be)."""
    if not isinstance(plugin, ExecutorHooks):
        return {}
    try:
        classes = plugin.executor_classes()
    except Exception as error:  # noqa: BLE001 - a broken plugin must not break the listing
        logger.warning(f"plugin `{name}`: cannot import its executor: {error}")
        return {}
    return {cls.__name__: sorted(cls.capabilities) for cls in classes}


BUILTIN = "core"
"""The built-in dispatcher serving every ``Executor`` (see ``overbrainer.job.hooks``)."""
BUILTIN_ENGINES = "core-engines"
"""The built-in engines: vllm, sglang, llama.cpp (``overbrainer.engines.builtin``)."""


def new_manager() -> Plugins:
    """A manager knowing the overbrainer hook specs, with the built-in dispatcher and
    engines registered."""
    pm = pluggy.PluginManager(GROUP)
    pm.add_hookspecs(hookspecs)
    plugins = Plugins(pm)
    plugins.register(hooks, name=BUILTIN)
    plugins.register(builtin, name=BUILTIN_ENGINES)
    return plugins


def _first(owners: dict[str, str], name: str, plugin: str, shown: str) -> bool:
    """Whether ``plugin`` is the first to provide ``name`` (noted in ``owners``); a later
    one is warned of and left out, so the first installed keeps it."""
    if name in owners:
        logger.warning(
            f"plugin `{plugin}` registers {shown}, already provided by plugin "
            f"`{owners[name]}`: keeping the first"
        )
        return False
    owners[name] = plugin
    return True


def load_plugins(env: Mapping[str, str] | None = None) -> Plugins:
    """A manager with every installed plugin that ``OVERBRAINER_LOAD_PLUGINS`` allows."""
    env = os.environ if env is None else env
    plugins = new_manager()
    wanted = env.get("OVERBRAINER_LOAD_PLUGINS")
    allowed = None if wanted is None else {n.strip() for n in wanted.split(",") if n.strip()}
    entries = metadata.entry_points(group=GROUP) if allowed != set() else ()  # none wanted
    for entry in entries:
        if allowed is not None and entry.name not in allowed:
            continue
        if entry.name in dict(plugins.pm.list_name_plugin()):
            continue  # the same distribution seen twice on sys.path
        try:
            plugins.register(entry.load(), name=entry.name, dist=entry.dist)
        except Exception as error:  # noqa: BLE001 - a broken plugin must not break the CLI
            source = f" ({entry.dist.metadata['Name']})" if entry.dist else ""
            logger.warning(
                f"plugin `{entry.name}`{source} could not be loaded: "
                f"{type(error).__name__}: {error}"
            )
            if entry.name in dict(plugins.pm.list_name_plugin()):
                plugins.unregister(entry.name)
    _remember_commands(plugins, env)
    if env.get("OVERBRAINER_TRACE_PLUGINS", "") not in ("", "0"):
        trace(plugins.pm)
    return plugins


def _remember_commands(plugins: Plugins, env: Mapping[str, str]) -> None:
    """Keep the plugins' command names and summaries for ``--help`` (see plugincmds)."""
    found: dict[str, str] = {}

    def register(command: object) -> None:
        name = getattr(command, "name", None)
        if isinstance(name, str) and not getattr(command, "hidden", False):
            text = getattr(command, "help", None) or ""
            found.setdefault(name, str(text).split("\n\n")[0].strip())

    try:
        plugins.hook.register_commands(register=register)
    except Exception as error:  # noqa: BLE001 - a plugin's commands: listed when they run
        logger.debug(f"the plugins' commands are not listed by --help: {error}")
        return
    remember(found, env)


def trace(pm: pluggy.PluginManager) -> None:
    """Print each hook call, its arguments (secrets masked) and which plugins answered."""

    def before(name: str, impls: Sequence[pluggy.HookImpl], kwargs: Mapping[str, Any]) -> None:
        args = ", ".join(f"{k}={_short(v)}" for k, v in kwargs.items())
        who = ", ".join(impl.plugin_name for impl in impls)
        sys.stderr.write(f"trace: {name}({args}) -> [{who}]\n")

    def after(
        outcome: pluggy.Result[Any],
        name: str,
        impls: Sequence[pluggy.HookImpl],
        kwargs: Mapping[str, Any],
    ) -> None:
        try:
            result = outcome.get_result()
        except BaseException as error:  # noqa: BLE001 - only reported; pluggy re-raises it
            sys.stderr.write(f"trace: {name} raised {type(error).__name__}\n")
            return
        sys.stderr.write(f"trace: {name} returned {_short(result)}\n")

    pm.add_hookcall_monitoring(before, after)


def _short(value: object) -> str:
    """``value``'s repr, redacted before it is cut so no secret is left half-shown."""
    text = redact(repr(value))
    return text if len(text) <= 160 else text[:157] + "..."
