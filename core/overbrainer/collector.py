"""The cyclic garbage collector held off while a command starts.

A command's start-up (its imports, the settings' pydantic models, aiohttp) makes some
10^5 objects that live until the process ends: the collector would walk them again and
again as they are made, and once more at exit, for nothing to free (a fifth of the CPU of
a short ``answers``). ``hold`` turns it off; ``release`` freezes what start-up made (it is
never walked again) and turns it back on, for the work that follows.
"""

from __future__ import annotations

import gc

_held = False


def hold() -> None:
    """Turn the collector off until ``release``, if it is on."""
    global _held  # noqa: PLW0603 - one process, one collector
    if gc.isenabled():
        gc.disable()
        _held = True


def release() -> None:
    """Freeze every object made so far and turn the collector back on, if ``hold`` turned
    it off (once: later calls do nothing)."""
    global _held  # noqa: PLW0603
    if _held:
        _held = False
        gc.freeze()
        gc.enable()
