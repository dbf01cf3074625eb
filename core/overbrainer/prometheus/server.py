"""Serving the registry: ``GET /metrics`` in OpenMetrics text, 404 for anything else.

A small threaded stdlib server rather than ``prometheus_client.start_http_server``, which
answers every path and method.
"""

from __future__ import annotations

import ipaddress
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from loguru import logger
from prometheus_client import CollectorRegistry
from prometheus_client.openmetrics.exposition import CONTENT_TYPE_LATEST, generate_latest


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    registry: CollectorRegistry

    def handle_error(self, request: Any, client_address: Any) -> None:
        """One debug line, not socketserver's traceback on the command's stderr: any local
        user could reset connections to flood the terminal."""
        error = sys.exception()
        logger.debug(f"metrics: a request from {client_address[0]} ended: {error!r}")


class _Server6(_Server):
    address_family = socket.AF_INET6


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0] != "/metrics":
            self._not_found()
            return
        body = generate_latest(self.server.registry)
        self.send_response(200)
        self.send_header("Content-Type", CONTENT_TYPE_LATEST)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _not_found(self) -> None:
        body = b"not found\n"
        self.send_response(404)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _not_found

    def log_message(self, format: str, *args: Any) -> None:
        return  # scrapes are not news


class MetricsServer:
    """The endpoint bound to ``(host, port)`` until :meth:`close`."""

    def __init__(self, registry: CollectorRegistry, host: str, port: int) -> None:
        kind = _Server6 if ipaddress.ip_address(host).version == 6 else _Server
        self.httpd = kind((host, port), _Handler)
        self.httpd.registry = registry
        self.thread = threading.Thread(
            target=self.httpd.serve_forever,
            kwargs={"poll_interval": 0.5},
            name="overbrainer-metrics",
            daemon=True,
        )
        self.thread.start()

    @property
    def address(self) -> str:
        host, port = self.httpd.server_address[:2]
        text = host.decode() if isinstance(host, bytes) else str(host)
        shown = f"[{text}]" if ":" in text else text
        return f"{shown}:{port}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)
