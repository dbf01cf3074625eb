"""aiohttp imported through ``overbrainer.providers.tls``: the CA bundle is read at the first
TLS connection, and certificates are checked exactly as before."""

from __future__ import annotations

import datetime
import http.server
import ipaddress
import os
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

CORE = Path(__file__).resolve().parents[2] / "core" / "overbrainer"

CLIENT = """
import asyncio, ssl, sys
from overbrainer.providers.tls import aiohttp
import aiohttp.connector as connector

def held():
    return connector._SSL_CONTEXT_VERIFIED.cert_store_stats()["x509_ca"]

async def get(url):
    async with aiohttp.ClientSession() as session:
        try:
            async with session.get(url) as response:
                return str(response.status)
        except aiohttp.ClientConnectorCertificateError:
            return "refused"

before = held()
trusted, untrusted = (asyncio.run(get(url)) for url in sys.argv[1:3])
fresh = ssl.create_default_context().cert_store_stats()["x509_ca"]
print(before, trusted, untrusted, held(), fresh)
"""


def _certificate(
    tmp: Path, name: str, issuer: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A certificate for 127.0.0.1 signed by ``issuer`` (a CA of its own when None), written
    as ``name``.pem and ``name``.key."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer[0].subject if issuer else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
    )
    if issuer is None:
        builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
    else:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            False,
        )
    certificate = builder.sign(issuer[1] if issuer else key, hashes.SHA256())
    (tmp / f"{name}.pem").write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    (tmp / f"{name}.key").write_bytes(key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ))
    return certificate, key


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[tuple[Path, str, str]]:
    """The trusted CA's file, and two https servers on 127.0.0.1: one whose certificate that
    CA signed, one whose certificate another CA signed."""
    trusted_ca = _certificate(tmp_path, "ca", None)
    other_ca = _certificate(tmp_path, "other-ca", None)
    _certificate(tmp_path, "trusted", trusted_ca)
    _certificate(tmp_path, "untrusted", other_ca)

    class Ok(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    running = []
    for name in ("trusted", "untrusted"):
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Ok)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(tmp_path / f"{name}.pem", tmp_path / f"{name}.key")
        server.socket = context.wrap_socket(server.socket, server_side=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        running.append(server)
    try:
        yield tmp_path / "ca.pem", *(f"https://127.0.0.1:{s.server_address[1]}/" for s in running)
    finally:
        for server in running:
            server.shutdown()
            server.server_close()


def test_the_ca_bundle_is_read_at_the_first_tls_connection_and_checks_as_before(
    servers: tuple[Path, str, str],
) -> None:
    ca_file, trusted, untrusted = servers
    env = {**os.environ, "SSL_CERT_FILE": str(ca_file), "SSL_CERT_DIR": str(ca_file.parent)}
    done = subprocess.run(
        [sys.executable, "-c", CLIENT, trusted, untrusted],
        env=env, capture_output=True, text=True, timeout=60, check=True,
    )
    before, trusted_status, untrusted_status, after, fresh = done.stdout.split()
    assert before == "0"  # nothing read while importing
    assert trusted_status == "200"  # the bundle (here: one CA) read, and trusted
    assert untrusted_status == "refused"  # a certificate it did not sign is still refused
    assert after == "1"
    assert fresh == "1"  # a context made after the import loads its bundle as always


def test_the_core_imports_aiohttp_only_through_the_tls_module() -> None:
    importers = sorted(
        str(path.relative_to(CORE))
        for path in CORE.rglob("*.py")
        if path.name != "tls.py"
        and any(
            line.strip().startswith(("import aiohttp", "from aiohttp"))
            for line in path.read_text().splitlines()
        )
    )
    assert importers == []


RESOLVER = """
import importlib.util, sys
from overbrainer.providers.tls import aiohttp
import aiohttp.resolver as resolver

print(resolver.DefaultResolver.__name__, "aiodns" in sys.modules)
import aiodns  # installed (aiohttp[speedups]): hidden only while aiohttp was imported
print(aiodns.__name__)
"""


def test_aiohttp_is_imported_without_aiodns_which_stays_importable() -> None:
    import importlib.util

    if importlib.util.find_spec("aiodns") is None:
        pytest.skip("aiodns is not installed: nothing to hide")
    done = subprocess.run(
        [sys.executable, "-c", RESOLVER], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.splitlines() == ["ThreadedResolver False", "aiodns"]
