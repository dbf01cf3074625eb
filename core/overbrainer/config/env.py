"""The environment a command sees: the shell's, with the project's ``.env`` beneath it."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from overbrainer.config.dotenv import read_dotenv
from overbrainer.config.listen import is_loopback_url

PREFIX = "OVERBRAINER_"

NOT_SETTINGS = frozenset({
    "OVERBRAINER_LOAD_PLUGINS",
    "OVERBRAINER_TRACE_PLUGINS",
    "OVERBRAINER_LLAMA_CPP",  # the llama.cpp toolchain of export and compare on this machine
    # The reference tool's switches: accepted so that a shell set up for it works here.
    "OVERBRAINER_SSH_CLIENT",  # openssh | builtin; here fabric is the one client
    "OVERBRAINER_NO_UPDATE_CHECK",  # this tool never checks for updates
    "OVERBRAINER_TUI_COLOR",
    "OVERBRAINER_TUI_MOTION",
})  # fmt: skip
"""``OVERBRAINER_*`` variables that steer the tool itself rather than name a setting."""


def provider_variable(provider: str, key: str) -> str:
    """The variable that sets ``providers.PROVIDER.KEY``: a dash of the name is ``_``."""
    return f"{PREFIX}PROVIDERS__{provider.upper().replace('-', '_')}__{key.upper()}"


@dataclass(frozen=True)
class Environment:
    """The shell's variables and the ``.env`` variables the shell does not export.

    The process environment is never changed: a reload reads ``.env`` again and layers
    it under the same shell variables.
    """

    shell: Mapping[str, str]
    dotenv: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def load(cls, project_dir: Path, shell: Mapping[str, str] | None = None) -> Environment:
        shell = dict(os.environ if shell is None else shell)
        dotenv = read_dotenv(project_dir / ".env")
        return cls(shell, {k: v for k, v in dotenv.items() if k not in shell})

    def reloaded(self, project_dir: Path) -> Environment:
        """The environment with the project's current ``.env``."""
        return Environment.load(project_dir, self.shell)

    @property
    def merged(self) -> dict[str, str]:
        return {**self.dotenv, **self.shell}

    def settings_vars(self) -> dict[str, str]:
        """The ``OVERBRAINER_*`` variables that name settings."""
        return {
            key: value
            for key, value in self.merged.items()
            if key.startswith(PREFIX) and key not in NOT_SETTINGS
        }


def directed_by_project(token_var: str, host_var: str, url: str) -> str | None:
    """Why a token from the shell must not go to ``url``, or None when it may: a token the
    shell holds goes to a host the shell names, or to this machine, never to one that only
    the project's files (its ``.env``) name."""
    if token_var not in os.environ or host_var in os.environ or is_loopback_url(url):
        return None
    return (
        f"{token_var} comes from your shell, and {host_var} from the project's .env: your "
        f"shell's token is not sent to a host the project names; set {host_var} in the "
        f"shell too if that host is yours, or put the token in the project's .env"
    )
