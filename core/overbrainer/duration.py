"""A duration as ``runs ls``, ``runs show`` and a batch's wait print it, in a module of its
own: ``runs ls`` formats it from its cache without importing ``runs.figures``
(dataclasses, datetime: about 10 ms), and the pipeline, which may not import ``runs``,
shares it."""

from __future__ import annotations


def duration(seconds: float) -> str:
    """``42s``, ``12m03s``, ``3h07m``."""
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
