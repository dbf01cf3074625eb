"""The plugins' commands as ``--help`` lists them, without loading a plugin to list them.

Whenever the plugins are loaded (most commands load them), the names and summaries of the
commands they register are kept in ``~/.cache/overbrainer/plugin-commands.json``, with the
state of the environment they were read from (its prefix, the modification times of its
site-packages, ``OVERBRAINER_LOAD_PLUGINS``): ``--help`` shows them while that state
holds, so an installed or removed plugin is never listed wrongly for long. Nothing here
may fail a command: a cache that cannot be read or written is no cache.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path

CACHE_NAME = "plugin-commands.json"


def _cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "overbrainer" / CACHE_NAME


def _state(env: Mapping[str, str]) -> str:
    stamps = []
    for entry in sys.path:
        if entry.endswith("site-packages"):
            try:
                stamps.append(f"{entry}@{os.stat(entry).st_mtime_ns}")
            except OSError:
                continue
    return "|".join([sys.prefix, env.get("OVERBRAINER_LOAD_PLUGINS", "*"), *stamps])


def remembered(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The plugin commands kept for this environment: name to summary (none, usually)."""
    try:
        with open(_cache(), encoding="utf-8") as file:
            data = json.loads(file.read(1 << 16))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("state") != _state(env or os.environ):
        return {}
    commands = data.get("commands")
    if not isinstance(commands, dict):
        return {}
    return {str(k): str(v) for k, v in commands.items() if isinstance(v, str)}


def remember(commands: Mapping[str, str], env: Mapping[str, str] | None = None) -> None:
    """Keep ``commands`` (name to summary) for this environment, if they changed."""
    if remembered(env) == dict(commands) and _cache().exists():
        return
    # `--help` reads this module: what only a write needs (tempfile, through files) waits.
    from overbrainer.errors import UserError  # noqa: PLC0415
    from overbrainer.files import mkdir_nofollow, write_atomic  # noqa: PLC0415

    path = _cache()
    data = {"state": _state(env or os.environ), "commands": dict(commands)}
    try:
        mkdir_nofollow(path.parent, str(path.parent))
        write_atomic(path, json.dumps(data).encode(), str(path))
    except (OSError, UserError):
        return
