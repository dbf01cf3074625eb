"""What a served engine says of its load: gauges read from its Prometheus ``/metrics``."""

from __future__ import annotations

import math
import re

from overbrainer.errors import TransientError
from overbrainer.providers.client import Client
from overbrainer.providers.tls import aiohttp

READ_TIMEOUT_S = 3.0
SAMPLE = re.compile(r"(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)(?:\{.*\})?\s+(?P<value>\S+)")
"""A sample line: its name, its labels (not read), its value (a timestamp may follow)."""


def parse_gauges(text: str, names: tuple[str, ...]) -> dict[str, float]:
    """Each of ``names`` in Prometheus' text format, summed over its label sets (an engine
    with several ranks or models reports one each); ``TransientError`` when one is missing."""
    found: dict[str, float] = {}
    for line in text.splitlines():
        sample = SAMPLE.match(line)
        if sample is None or sample["name"] not in names:
            continue  # a comment (# HELP, # TYPE), another metric
        try:
            value = float(sample["value"])
        except ValueError:
            continue
        if math.isfinite(value):
            found[sample["name"]] = found.get(sample["name"], 0.0) + value
    missing = [name for name in names if name not in found]
    if missing:
        raise TransientError(f"no {', '.join(missing)} in it")
    return found


async def read_gauges(client: Client, path: str, names: tuple[str, ...]) -> dict[str, float]:
    """The gauges ``names`` the engine behind ``client`` serves at ``path`` (beside its
    ``/v1``); ``TransientError`` saying why when they cannot be read."""
    url = client.base_url.removesuffix("/v1") + path
    try:
        async with client.session.get(
            url, timeout=aiohttp.ClientTimeout(total=READ_TIMEOUT_S)
        ) as reply:
            if reply.status != 200:
                raise TransientError(f"HTTP {reply.status}")
            text = await reply.text()
    except (aiohttp.ClientError, TimeoutError, UnicodeDecodeError, LookupError) as error:
        raise TransientError(str(error) or type(error).__name__) from error
    return parse_gauges(text, names)
