"""A model's size from its name: what ``plan``'s throughput, ``train``'s warning of a large
model on a CPU and a target that sizes its machine (Runpod's ``gpu_types = "auto"``) go by,
read one way."""

from __future__ import annotations

import re

_SIZE = re.compile(r"(?<![A-Za-z0-9.])(?:(\d+)x)?(\d+(?:\.\d+)?)([bBmM])(?![A-Za-z0-9])")
"""A size in a name: ``72B``, ``0.5b``, ``135M``, ``8x7B`` (experts times each); a word of
its own, so neither a hash (``a3b9f0``) nor a version (``Qwen2.5``) is one."""


def model_billions(name: str) -> float | None:
    """Billions of parameters a model's name states, or None when it states none.

    ``8x7B`` counts 56: a mixture of experts holds every expert. Of two sizes the larger
    counts: ``Qwen3-30B-A3B`` (3B of 30B active) is 30, and ``Qwen2.5-7B-Instruct-1M`` (a
    context of a million tokens) is 7. A size in millions (``SmolLM2-135M``) is a fraction.
    """
    sizes = [
        float(number) * (int(experts) if experts else 1) / (1000 if unit in "mM" else 1)
        for experts, number, unit in _SIZE.findall(name)
    ]
    return max(sizes) if sizes else None
