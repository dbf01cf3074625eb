"""overbrainer: distill a large parent LLM into a small child model.

Third-party executor packages implement the hooks of :mod:`overbrainer.hookspecs`
with the ``hookimpl`` marker exported here.
"""

import pluggy

__version__ = "0.1.0"

hookimpl = pluggy.HookimplMarker("overbrainer")
"""Marks a function as the implementation of an overbrainer hook."""

__all__ = ["__version__", "hookimpl"]
