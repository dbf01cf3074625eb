"""Top-level tables of ``overbrainer.toml`` that plugins register (an account's settings).

A plugin that needs settings of its own beyond its targets' tables (an API key, an API's
URL) registers a table with the pydantic model that validates it, and names which of its
keys are secrets and which may come only from the environment. The core then treats the
table as its own: ``OVERBRAINER_NAME__KEY`` variables and ``.env`` set it, its problems are
listed with the rest, ``config check`` prints it with its secrets masked, and its secret
values are redacted from every log and record. A project without the table gets the
model's defaults, so a section's model must validate an empty table.
"""

from __future__ import annotations

import re
import types
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol, Union, get_args, get_origin

from pydantic import BaseModel, SecretStr, ValidationError

SECTION_NAME = re.compile(r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$")
"""A table name a variable can spell: ``OVERBRAINER_NAME__KEY`` (no double underscore)."""


class RegisterSection(Protocol):
    """What ``register_settings`` is given: ``register(name, model, secrets=...,
    env_only=...)`` declares the table ``[name]``."""

    def __call__(
        self,
        name: str,
        model: type[BaseModel],
        *,
        secrets: Collection[str] = (),
        env_only: Collection[str] = (),
    ) -> None: ...


@dataclass(frozen=True)
class SettingsSection:
    """A registered table: its model, its secret keys (``SecretStr`` fields, which are
    environment-only too) and its other environment-only keys (a URL that may hold a
    password)."""

    name: str
    model: type[BaseModel]
    secrets: tuple[str, ...] = ()
    env_only: tuple[str, ...] = ()

    @classmethod
    def checked(
        cls,
        name: str,
        model: type[BaseModel],
        secrets: Collection[str],
        env_only: Collection[str],
        reserved: Collection[str],
    ) -> SettingsSection:
        """The section, or the ``TypeError``/``ValueError`` that says what its plugin got
        wrong (the plugin is then not loaded)."""
        if not isinstance(name, str) or not SECTION_NAME.match(name):
            raise ValueError(f"settings table {name!r}: a name of a-z, 0-9 and single _")
        if name in reserved:
            raise ValueError(f"settings table `{name}` is one of the core's own")
        if isinstance(secrets, str) or isinstance(env_only, str):
            raise TypeError(f"settings table `{name}`: secrets and env_only are lists of keys")
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            raise TypeError(f"settings table `{name}` needs a pydantic model, not {model!r}")
        for key in (*secrets, *env_only):
            if key not in model.model_fields:
                raise ValueError(f"settings table `{name}` has no key `{key}`")
        for key in secrets:
            if not _secret_type(model.model_fields[key].annotation):
                raise TypeError(
                    f"settings table `{name}`: secret `{key}` must be a SecretStr field"
                )
        try:
            model.model_validate({})
        except ValidationError:
            raise ValueError(
                f"settings table `{name}`: every key needs a default (a project may "
                "leave the table out)"
            ) from None
        return cls(name, model, tuple(secrets), tuple(dict.fromkeys((*secrets, *env_only))))


def _secret_type(annotation: object) -> bool:
    """``SecretStr``, or ``SecretStr | None``."""
    if get_origin(annotation) in (Union, types.UnionType):
        return set(get_args(annotation)) <= {SecretStr, type(None)} and SecretStr in get_args(
            annotation
        )
    return annotation is SecretStr


def section_secrets(
    tables: Mapping[str, tuple[SettingsSection, BaseModel]],
) -> Iterator[tuple[str, SecretStr | None]]:
    """Every secret of the plugins' tables (registration, value) by its dotted key, set
    or not."""
    for name, (section, value) in tables.items():
        for key in section.secrets:
            secret = getattr(value, key)
            yield f"{name}.{key}", secret if isinstance(secret, SecretStr) else None
