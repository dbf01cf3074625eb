"""Reading ``overbrainer.toml``: the file, the environment above it, and every problem at once."""

from __future__ import annotations

import contextlib
import copy
import re
import tomllib
import types
from collections.abc import Iterable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Annotated, Any, Union, get_args, get_origin

from loguru import logger
from pydantic import BaseModel, ValidationError

from overbrainer import files
from overbrainer.config.env import PREFIX, Environment
from overbrainer.config.extras import plugin_extra
from overbrainer.config.listen import is_loopback_url
from overbrainer.config.model import ENV_ONLY, Settings
from overbrainer.config.sections import SettingsSection, section_secrets
from overbrainer.errors import UserError
from overbrainer.redact import escape_controls, register_secret

CONFIG_FILE = "overbrainer.toml"
TARGET_NAME = re.compile(r"^[a-z0-9_]+$")

Path_ = tuple[str | int, ...]


class ConfigError(UserError):
    """The configuration cannot be used; ``problems`` lists each one."""

    def __init__(self, problems: list[str]) -> None:
        # One line each: a name from the file cannot break a problem into two.
        problems = [escape_controls(problem) for problem in problems]
        lines = "\n".join(f"  {problem}" for problem in problems)
        super().__init__(f"invalid configuration:\n{lines}")
        self.problems = problems


def read_config_file(project_dir: Path) -> dict[str, Any]:
    """The TOML tables of the project's ``overbrainer.toml``."""
    path = project_dir / CONFIG_FILE
    if path.is_dir():
        raise UserError(f"{path} is a directory, not a file")
    data = files.read_regular(path, CONFIG_FILE, files.RECORD_LIMIT)  # a FIFO would block
    if data is None:
        raise UserError(f"no {CONFIG_FILE} in {project_dir}: create one with `overbrainer init`")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{CONFIG_FILE} is not UTF-8 text") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        # The message of tomllib quotes no content, but only its location is kept.
        where = re.search(r"line (\d+), column (\d+)", str(error))
        at = f" at line {where[1]}, column {where[2]}" if where else " at its end"
        raise UserError(f"TOML syntax error in {CONFIG_FILE}{at}") from None


def load_settings(
    project_dir: Path,
    env: Environment,
    kinds: Mapping[str, type[BaseModel]],
    sections: Mapping[str, SettingsSection] | None = None,
) -> Settings:
    """The validated settings of the project at ``project_dir``.

    ``kinds`` maps each target kind to the model its plugin registered, ``sections`` each
    top-level table a plugin registered to its registration. Raises ``ConfigError``
    listing every problem; values are never echoed.
    """
    return validate_settings(read_config_file(project_dir), env, kinds, sections)


def validate_settings(
    data: dict[str, Any],
    env: Environment,
    kinds: Mapping[str, type[BaseModel]],
    sections: Mapping[str, SettingsSection] | None = None,
) -> Settings:
    """The settings ``data`` (parsed TOML) gives, with the environment layered on top."""
    sections = sections or {}
    problems = [
        f"{_dotted(path)}: must be set through env, not in {CONFIG_FILE}"
        for path in _paths(data)
        if _env_only(path, sections) and not _loopback_url_in_file(path, data)
    ]
    merged, origins, overlay_problems = overlay_env(data, env.settings_vars())
    problems += overlay_problems
    parse_env_values(merged, origins, kinds, sections)
    problems += _unprovided_tables(merged, data, origins, sections)
    own = {key: value for key, value in merged.items() if key not in sections}
    settings: Settings | None = None
    try:
        # Strict: the file's values have types of their own (`concurrency = true` is a
        # mistake, not 1); only the environment's strings are parsed, just above.
        settings = Settings.model_validate(own, strict=True)
    except ValidationError as error:
        problems += describe_errors(error, (), origins)
    targets, target_problems = _validate_targets(merged.get("targets"), kinds, origins)
    problems += target_problems
    tables, table_problems = _validate_sections(merged, sections, origins)
    problems += table_problems
    problems += _cross_checks(merged)
    client = env.merged.get("OVERBRAINER_SSH_CLIENT", "").strip()
    if client and client not in ("openssh", "builtin"):
        problems.append("OVERBRAINER_SSH_CLIENT must be openssh or builtin")
    if problems or settings is None:
        raise ConfigError(_unique(problems))
    for _, secret in section_secrets(tables):
        # A plugin's secret is its own to use: every log and record is redacted of it.
        if secret is not None and not secret.get_secret_value().startswith("vault:"):
            register_secret(secret.get_secret_value())
    return settings.model_copy(update={"targets": targets}).with_sections(tables)


def overlay_env(
    data: dict[str, Any], variables: Mapping[str, str]
) -> tuple[dict[str, Any], dict[Path_, str], list[str]]:
    """``data`` with each ``OVERBRAINER_A__B`` variable set at ``a.b``.

    Returns the merged tables, which variable set each path, and the variables that name
    no place a setting can be.
    """
    merged = copy.deepcopy(data)
    origins: dict[Path_, str] = {}
    problems = []
    for name in sorted(variables):
        parts = name[len(PREFIX) :].split("__")
        path = tuple(part.lower() for part in parts)
        if not all(path) or path[0] == "topics":
            problems.append(f"{name}: unknown field")
            continue
        if path[0] in NAMED_TABLES and len(path) >= 3:
            path = (path[0], _file_name(data.get(path[0]), path[1]), *path[2:])
            if _stray(data, variables, path):
                _warn_stray(name, path)
                continue
        table = merged
        for key in path[:-1]:
            table = table.setdefault(key, {})
            if not isinstance(table, dict):
                break
        if not isinstance(table, dict):
            problems.append(f"{name}: unknown field")
            continue
        table[path[-1]] = variables[name]
        origins[path] = name
    return merged, origins, problems


NAMED_TABLES = {"providers": "protocol", "targets": "kind"}
"""Tables of named entries, with the key that makes an entry one: a variable may set a key
of an entry the file has, or make a new entry only with that key too."""
_warned: set[str] = set()


def _file_name(tables: Any, part: str) -> str:
    """The file's name for the entry a variable names: ``MY_SERVER`` (a variable name holds
    no dash) is ``my-server`` when the file has that one and no ``my_server``."""
    if not isinstance(tables, dict) or part in tables:
        return part
    for name in tables:
        if isinstance(name, str) and name.lower().replace("-", "_") == part:
            return name
    return part


def _stray(data: Mapping[str, Any], variables: Mapping[str, str], path: Path_) -> bool:
    """Whether a variable sets a key of an entry the file does not have, and no variable
    makes it one (a provider needs its protocol, a target its kind)."""
    table, entry = str(path[0]), str(path[1])
    tables = data.get(table)
    if isinstance(tables, dict) and entry in tables:
        return False
    key = NAMED_TABLES[table]
    wanted = f"{PREFIX}{table}__{entry.replace('-', '_')}__{key}".upper()
    return wanted not in {name.upper() for name in variables}


def _warn_stray(name: str, path: Path_) -> None:
    if name in _warned:
        return
    _warned.add(name)

    logger.warning(
        f"{name}: {path[0]}.{path[1]} is not in {CONFIG_FILE}: the variable is ignored "
        "(a stray line of .env, or a name that changed?)"
    )


def _loopback_url_in_file(path: Path_, data: Mapping[str, Any]) -> bool:
    """A provider's URL on this machine, with no password or query, may be in the file."""
    if len(path) != 3 or path[0] != "providers" or path[2] != "base_url":
        return False

    value = data["providers"][path[1]]["base_url"]
    return isinstance(value, str) and is_loopback_url(value) and "@" not in value \
        and "?" not in value


_TRUE = frozenset({"true", "1", "yes", "on", "t", "y"})
_FALSE = frozenset({"false", "0", "no", "off", "f", "n"})
_INTEGER = re.compile(r"^[+-]?[0-9]+$")


def parse_env_values(
    merged: dict[str, Any],
    origins: Mapping[Path_, str],
    kinds: Mapping[str, type[BaseModel]],
    sections: Mapping[str, SettingsSection] | None = None,
) -> None:
    """Turn each string the environment set into the boolean or number its key holds, in
    place; a string that is none is left for validation to refuse (naming its variable)."""
    for path in origins:
        kind = _scalar_type(path, merged, kinds, sections or {})
        table: Any = merged
        for key in path[:-1]:
            table = table[key]
        text = table[path[-1]]
        if kind is bool and text.strip().lower() in _TRUE | _FALSE:
            table[path[-1]] = text.strip().lower() in _TRUE
        elif kind is int and _INTEGER.match(text.strip()):
            table[path[-1]] = int(text)
        elif kind is float:
            with contextlib.suppress(ValueError):
                table[path[-1]] = float(text)


def _scalar_type(
    path: Path_,
    merged: Mapping[str, Any],
    kinds: Mapping[str, type[BaseModel]],
    sections: Mapping[str, SettingsSection],
) -> type | None:
    """bool, int or float when that is what the key at ``path`` holds, else None."""
    current: Any = Settings
    keys = list(path)
    if keys[0] in sections:
        current = sections[str(keys[0])].model
        keys = keys[1:]
    elif len(keys) >= 3 and keys[0] == "targets":
        table = _table(_table(merged.get("targets")).get(str(keys[1])))
        kind = table.get("kind")
        current = kinds.get(kind) if isinstance(kind, str) else None
        keys = keys[2:]
    for key in keys:
        current = _unwrap(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = current.model_fields.get(str(key))
            current = field.annotation if field is not None else None
        elif get_origin(current) is dict:
            current = get_args(current)[1]
        else:
            return None
    current = _unwrap(current)
    return current if current in (bool, int, float) else None


def _unwrap(annotation: Any) -> Any:
    """``annotation`` without ``Annotated`` metadata and an optional ``None``."""
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation = get_args(annotation)[0]
        elif origin in (Union, types.UnionType):
            options = [arg for arg in get_args(annotation) if arg is not type(None)]
            if len(options) != 1:
                return annotation
            annotation = options[0]
        else:
            return annotation


def describe_errors(
    error: ValidationError, prefix: Path_, origins: Mapping[Path_, str]
) -> list[str]:
    """One line per problem of ``error``: where, and what is wrong, never the value."""
    lines = []
    for detail in error.errors(include_url=False, include_input=False):
        path = prefix + tuple(detail["loc"])
        if detail["type"] == "extra_forbidden" and path in origins:
            lines.append(f"{origins[path]}: unknown field")
            continue
        where = _dotted(path) or "overbrainer.toml"
        source = f" (from {origins[path]})" if path in origins else ""
        lines.append(f"{where}{source}: {_problem(detail)}")
    return lines


def _problem(detail: Mapping[str, Any]) -> str:
    kind, ctx = detail["type"], detail.get("ctx") or {}
    simple = {
        "missing": "required",
        "extra_forbidden": "unknown field",
        "int_type": "expected an integer",
        "int_parsing": "expected an integer",
        "int_from_float": "expected an integer",
        "float_type": "expected a number",
        "float_parsing": "expected a number",
        "bool_type": "expected true or false",
        "bool_parsing": "expected true or false",
        "string_type": "expected a string",
        "dict_type": "expected a table",
        "model_type": "expected a table",
        "model_attributes_type": "expected a table",
        "list_type": "expected a list",
        "finite_number": "must be a finite number",
        "string_too_short": "must not be empty",
    }
    bounds = {
        "greater_than": ("gt", "must be greater than"),
        "greater_than_equal": ("ge", "must be at least"),
        "less_than": ("lt", "must be less than"),
        "less_than_equal": ("le", "must be at most"),
    }
    if kind in simple:
        return simple[kind]
    if kind in bounds:
        key, words = bounds[kind]
        return f"{words} {ctx[key]}"
    if kind == "literal_error":
        return f"expected {ctx['expected']}"
    if kind == "value_error":
        return str(ctx.get("error", detail["msg"]))
    return str(detail["msg"])


def _validate_targets(
    tables: Any, kinds: Mapping[str, type[BaseModel]], origins: Mapping[Path_, str]
) -> tuple[dict[str, BaseModel], list[str]]:
    if not isinstance(tables, dict):
        return {}, []  # the Settings model reports a wrong type
    targets: dict[str, BaseModel] = {}
    problems = []
    for name, table in tables.items():
        if not TARGET_NAME.match(name):
            problems.append(f"targets: invalid name `{name}`: use a-z, 0-9 and _ only")
            continue
        if not isinstance(table, dict):
            problems.append(f"targets.{name}: expected a table")
            continue
        kind = table.get("kind")
        if kind is None:
            problems.append(f"targets.{name}.kind: required")
            continue
        model = kinds.get(kind) if isinstance(kind, str) else None
        if model is None:
            problems.append(f"targets.{name}: {unknown_kind(kind)}")
            continue
        try:
            targets[name] = model.model_validate(table, strict=True)
        except ValidationError as error:
            problems += describe_errors(error, ("targets", name), origins)
    return targets, problems


def unknown_kind(kind: object) -> str:
    """Why a target of ``kind`` cannot be used, naming what to install."""
    package = plugin_extra(kind) if isinstance(kind, str) else None
    if package is not None:
        return (
            f"no installed plugin provides target kind `{kind}`: install "
            f"{package} (pip install 'overbrainer[{kind}]')"
        )
    if isinstance(kind, str) and re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", kind):
        return (
            f"no installed plugin provides target kind `{kind}`: install the package that "
            "does (`overbrainer plugins` lists what is installed)"
        )
    return "kind: expected the name of a target kind"


def _validate_sections(
    merged: Mapping[str, Any],
    sections: Mapping[str, SettingsSection],
    origins: Mapping[Path_, str],
) -> tuple[dict[str, tuple[SettingsSection, BaseModel]], list[str]]:
    """Each table a plugin registered, validated (strictly, as the core's) by its model; an
    absent one is its model's defaults."""
    tables: dict[str, tuple[SettingsSection, BaseModel]] = {}
    problems = []
    for name, section in sections.items():
        table = merged.get(name, {})
        if not isinstance(table, dict):
            problems.append(f"{name}: expected a table")
            continue
        try:
            tables[name] = (section, section.model.model_validate(table, strict=True))
        except ValidationError as error:
            problems += describe_errors(error, (name,), origins)
    return tables, problems


def _unprovided_tables(
    merged: dict[str, Any],
    data: Mapping[str, Any],
    origins: Mapping[Path_, str],
    sections: Mapping[str, SettingsSection],
) -> list[str]:
    """The tables that one of the core's own plugins would register, that plugin not
    installed: in the file, a problem naming what to install; set only by variables, a
    warning, and the variables are ignored (a shell may hold an account's key for
    another project). Removed from ``merged`` in place; any other unknown table is left
    for the model to refuse."""
    problems = []
    for name in [key for key in merged if key not in Settings.model_fields]:
        if name in sections or (package := plugin_extra(name)) is None:
            continue
        del merged[name]
        if _installed(package):  # left out by OVERBRAINER_LOAD_PLUGINS, or failed to load
            if name in data and name not in _warned:
                _warned.add(name)
                logger.warning(
                    f"[{name}] is not read: its plugin {package} is installed but not loaded "
                    "(OVERBRAINER_LOAD_PLUGINS, or a load error `overbrainer plugins` shows)"
                )
            continue
        missing = f"no installed plugin provides the [{name}] table: install {package}"
        if name in data:
            problems.append(f"{name}: {missing} (pip install 'overbrainer[{name}]')")
            continue
        for path, variable in origins.items():
            if path[0] == name and variable not in _warned:
                _warned.add(variable)
                logger.warning(f"{variable}: {missing}: the variable is ignored")
    return problems


def _installed(package: str) -> bool:
    try:
        metadata.distribution(package)
    except metadata.PackageNotFoundError:
        return False
    return True


def _cross_checks(data: Mapping[str, Any]) -> list[str]:
    problems = []
    topics = data.get("topics")
    if isinstance(topics, list):
        seen: set[str] = set()
        for topic in topics:
            name = topic.get("name") if isinstance(topic, dict) else None
            if isinstance(name, str):
                if name in seen:
                    problems.append(f"topics: duplicate name `{name}`")
                seen.add(name)
    providers = _table(data.get("providers"))
    for role_name, role in _table(data.get("roles")).items():
        if not isinstance(role, dict) or not isinstance(role.get("provider"), str):
            continue
        provider = role["provider"]
        if provider not in providers:
            problems.append(f"roles.{role_name}: unknown provider `{provider}`")
            continue
        protocol = _table(providers[provider]).get("protocol")
        if protocol == "anthropic" and role.get("reasoning") is True and "temperature" in role:
            problems.append(
                f"roles.{role_name}.temperature: cannot be set with reasoning on the "
                "anthropic protocol"
            )
        if protocol == "openai" and "thinking_budget" in role:
            problems.append(
                f"roles.{role_name}.thinking_budget: applies only to the anthropic protocol"
            )
        if role_name == "embedder" and protocol == "anthropic":
            problems.append("roles.embedder: the embedder must use the openai protocol")
    problems += _serve_checks(data)
    training = _table(data.get("training"))
    target = training.get("target")
    if isinstance(target, str) and target and target not in _table(data.get("targets")):
        problems.append(f"training.target: unknown target `{target}`")
    return problems


def _serve_checks(data: Mapping[str, Any]) -> list[str]:
    """A served provider: its target exists, it speaks openai (every engine does), it has
    no ``base_url`` of its own, and its roles ask for the model it serves."""
    problems = []
    targets = _table(data.get("targets"))
    providers = _table(data.get("providers"))
    for name, provider in providers.items():
        serve = _table(_table(provider).get("serve"))
        if not serve:
            continue
        target = serve.get("target")
        if isinstance(target, str) and target and target not in targets:
            problems.append(f"providers.{name}.serve.target: unknown target `{target}`")
        if _table(provider).get("protocol") == "anthropic":
            problems.append(
                f"providers.{name}.serve: a served provider speaks the openai protocol: "
                'set protocol = "openai"'
            )
        if _table(provider).get("base_url"):
            problems.append(
                f"providers.{name}: base_url and serve cannot both be set (a served "
                "provider is reached where its target serves it): unset one"
            )
        model = serve.get("model")
        for role_name, value in _table(data.get("roles")).items():
            role = _table(value)
            asked = role.get("model")
            if role.get("provider") == name and isinstance(model, str) and (
                isinstance(asked, str) and asked != model
            ):
                problems.append(
                    f"roles.{role_name}.model: provider `{name}` serves `{model}` only: "
                    "set the role's model to it"
                )
            if role.get("provider") == name and role.get("batch") is True:
                problems.append(
                    f"roles.{role_name}.batch: provider `{name}` is served, and engines have "
                    "no batch API: remove batch"
                )
    return problems


def _table(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _paths(data: Mapping[str, Any], prefix: tuple[str, ...] = ()) -> Iterable[tuple[str, ...]]:
    for key, value in data.items():
        path = (*prefix, key)
        yield path
        if isinstance(value, dict):
            yield from _paths(value, path)


def _env_only(path: tuple[str, ...], sections: Mapping[str, SettingsSection]) -> bool:
    if len(path) == 2 and path[0] in sections:
        return path[1] in sections[path[0]].env_only
    return any(
        len(pattern) == len(path) and all(p in ("*", k) for p, k in zip(pattern, path, strict=True))
        for pattern in ENV_ONLY
    )


def _dotted(path: Path_) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))
