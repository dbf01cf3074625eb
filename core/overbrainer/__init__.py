"""overbrainer: distill a large parent LLM into a small child model.

Third-party executor packages implement the hooks of :mod:`overbrainer.hookspecs`
with the ``hookimpl`` marker exported here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    import pluggy

    hookimpl: pluggy.HookimplMarker
    """Marks a function as the implementation of an overbrainer hook."""


def __getattr__(name: str) -> Any:
    # pluggy is imported on first use of ``hookimpl``: `overbrainer --help` never needs it.
    if name == "hookimpl":
        import pluggy  # noqa: PLC0415 - the package root: `--help` imports it

        return globals().setdefault("hookimpl", pluggy.HookimplMarker("overbrainer"))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["__version__", "hookimpl"]
