"""Which of the core's extras installs the plugin for a name, read from its own metadata.

``pip install 'overbrainer[NAME]'`` installs ``overbrainer-NAME`` for each of the project's
own plugins, and each provides the target kind (and settings table) ``NAME``: a message for
a kind or a table that no installed plugin provides can then name what to install, without
the core keeping a list of its plugins.
"""

from __future__ import annotations

import functools
import re
from importlib import metadata

_REQUIREMENT = re.compile(
    r"""^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*;\s*extra\s*==\s*["']([^"']+)["']\s*$"""
)


@functools.cache
def plugin_extra(name: str) -> str | None:
    """``overbrainer-NAME`` when the extra ``NAME`` of the installed core installs it,
    else None (another name, or a core run from a source tree without metadata)."""
    try:
        requires = metadata.requires("overbrainer") or []
    except metadata.PackageNotFoundError:
        return None
    wanted = f"overbrainer-{name}"
    for requirement in requires:
        found = _REQUIREMENT.match(requirement)
        if found and found[2] == name and found[1].lower().replace("_", "-") == wanted:
            return found[1]
    return None
