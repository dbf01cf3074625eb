"""aiohttp, imported without reading the CA bundle until a TLS connection needs it.

aiohttp makes two SSL contexts as it is imported, and each reads the system's CA bundle:
about a quarter of the import's CPU (``benchmarks/answers.py --cold``), paid before the
first request of every command that talks to a provider, though a provider on plain http (a
local server) needs neither context and one on https needs one. Imported here, the contexts
made during the import read the bundle when a connection first wraps a socket with them:
the same certificates, the same checks, read once, later or never.

It is imported without ``aiodns`` too (pulled in by ``aiohttp[speedups]``): aiohttp would
otherwise import it at once (a tenth of its import) to make c-ares its default resolver,
where overbrainer's connections use the system's (``ThreadedResolver``: ``/etc/hosts``,
``nsswitch.conf`` and a VPN's resolver, as curl and Python see them).

The core imports aiohttp only from here (``tests/providers/test_tls.py`` checks it).
"""

from __future__ import annotations

import ssl
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

_LOCK = threading.Lock()


@contextmanager
def deferred_ca_loading() -> Iterator[None]:
    """While inside, an ``ssl.SSLContext`` asked to load the default CA certificates notes it
    instead; on leaving, each such context loads them on its first ``wrap_bio`` or
    ``wrap_socket`` (the calls every TLS connection, asyncio's included, begins with)."""
    context_class = ssl.SSLContext
    own_load = context_class.__dict__.get("load_default_certs")
    if own_load is None:  # not the standard library's class (replaced): load as it does
        yield
        return
    own_paths = context_class.__dict__.get("set_default_verify_paths")  # None: the C method
    deferred: dict[int, tuple[ssl.SSLContext, list[Callable[[], None]]]] = {}

    def note(context: ssl.SSLContext, load: Callable[[], None]) -> None:
        deferred.setdefault(id(context), (context, []))[1].append(load)

    def load_default_certs(self: ssl.SSLContext, *args: Any, **kwargs: Any) -> None:
        note(self, lambda: own_load(self, *args, **kwargs))

    def set_default_verify_paths(self: ssl.SSLContext) -> None:
        note(self, lambda: context_class.set_default_verify_paths(self))

    context_class.load_default_certs = load_default_certs  # type: ignore[method-assign]
    context_class.set_default_verify_paths = set_default_verify_paths  # type: ignore[method-assign]
    try:
        yield
    finally:
        context_class.load_default_certs = own_load  # type: ignore[method-assign]
        if own_paths is None:
            del context_class.set_default_verify_paths  # the C method shows through again
        else:
            context_class.set_default_verify_paths = own_paths  # type: ignore[method-assign]
    for context, loads in deferred.values():
        _load_on_first_use(context, loads)


def _load_on_first_use(context: ssl.SSLContext, loads: list[Callable[[], None]]) -> None:
    """Shadow ``context``'s two wrapping methods with ones that first run ``loads`` (once,
    whichever thread comes first; the others wait for the certificates to be there)."""

    def ready() -> None:
        with _LOCK:
            if "wrap_bio" in vars(context):
                for load in loads:
                    load()
                del context.wrap_bio, context.wrap_socket  # the class's methods again

    def wrap_bio(*args: Any, **kwargs: Any) -> ssl.SSLObject:
        ready()
        return context.wrap_bio(*args, **kwargs)

    def wrap_socket(*args: Any, **kwargs: Any) -> ssl.SSLSocket:
        ready()
        return context.wrap_socket(*args, **kwargs)

    context.wrap_bio = wrap_bio  # type: ignore[method-assign]
    context.wrap_socket = wrap_socket  # type: ignore[method-assign]


@contextmanager
def hidden(name: str) -> Iterator[None]:
    """While inside, the module ``name`` imports as if it were not installed (unless it was
    imported already); after, it imports again."""
    if name in sys.modules:
        yield
        return
    sys.modules[name] = None  # type: ignore[assignment]
    try:
        yield
    finally:
        if name in sys.modules and sys.modules[name] is None:
            del sys.modules[name]


with deferred_ca_loading(), hidden("aiodns"):
    import aiohttp

__all__ = ["aiohttp", "deferred_ca_loading", "hidden"]
