"""``[metrics] listen``: an IP address and a port, never a host name."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit


def parse_listen(value: str) -> tuple[str, int]:
    """``127.0.0.1:9464`` or ``[::1]:9464`` as (address, port); ``ValueError`` saying what is
    wrong otherwise. Port 0 takes a free port when bound."""
    host, sep, port_text = value.rpartition(":")
    if not sep or not host:
        raise ValueError("must be an IP address and a port, such as 127.0.0.1:9464 or [::1]:9464")
    bracketed = host.startswith("[") and host.endswith("]")
    if bracketed:
        host = host[1:-1]
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise ValueError(
            f"{host!r} is not an IP address (a host name is refused): use 127.0.0.1:PORT "
            "or [::1]:PORT"
        ) from None
    if address.version == 6 and not bracketed:
        raise ValueError("an IPv6 address goes in brackets: [::1]:9464")
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"port {port_text!r} is not a number from 0 to 65535")
    return str(address), int(port_text)


def is_loopback(value: str) -> bool:
    """Whether the address of ``value`` (a valid listen setting) is a loopback one."""
    host, _ = parse_listen(value)
    return ipaddress.ip_address(host).is_loopback


def is_loopback_url(url: str) -> bool:
    """Whether ``url`` names this machine: ``localhost`` or a loopback address."""
    try:
        host = urlsplit(url).hostname or ""
    except ValueError:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
