"""Whether an engine answers: ``/health`` (when it has one), then ``/v1/models`` naming
the model it serves."""

from __future__ import annotations

import json
import urllib.request

from overbrainer.engines import Engine

PROBE_TIMEOUT_S = 5.0

_direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
"""No proxy: the engine is on this machine's loopback, whatever HTTP_PROXY says."""


def answers(url: str, engine: Engine, model: str) -> bool:
    """Whether the engine at ``url`` (``http://127.0.0.1:PORT``) is ready to serve
    ``model``: its health check passes and its model list names it."""
    try:
        if engine.health_path is not None:
            with _direct.open(url + engine.health_path, timeout=PROBE_TIMEOUT_S):
                pass
        with _direct.open(url + "/v1/models", timeout=PROBE_TIMEOUT_S) as reply:
            listed = json.loads(reply.read(1 << 20))
    except (OSError, ValueError):  # not up yet: refused, reset, 503, a half-written reply
        return False
    data = listed.get("data") if isinstance(listed, dict) else None
    return isinstance(data, list) and any(
        isinstance(item, dict) and item.get("id") == model for item in data
    )
