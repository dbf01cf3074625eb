"""JSON for scripts: strict (no ``NaN`` or ``Infinity``, which strict parsers reject)."""

from __future__ import annotations

import json
import math
from typing import Any


def finite(value: Any) -> Any:
    """``value`` with every float that is not finite made None (unknown), recursively."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [finite(item) for item in value]
    return value


def dumps(value: Any) -> str:
    """``value`` as indented JSON that any parser reads."""
    return json.dumps(finite(value), indent=2, allow_nan=False)
