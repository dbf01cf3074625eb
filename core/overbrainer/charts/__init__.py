"""Training curves: read from a run's ``metrics.jsonl``, drawn in the terminal or as a PNG.

Nothing here imports matplotlib at module level: only :mod:`overbrainer.charts.png` does, and
only when a PNG is asked for, so ``runs show`` without ``--plot`` stays as fast as ``runs ls``.
"""
