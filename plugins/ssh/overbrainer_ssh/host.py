"""A machine reached over SSH as a host: scripts on exec channels, with fabric and paramiko.

fabric resolves the address as OpenSSH would (``user@host[:port]`` or a ``~/.ssh/config``
alias: HostName, User, Port, IdentityFile, ProxyJump, ProxyCommand, ConnectTimeout) and
paramiko carries the bytes. Host keys are checked as OpenSSH checks them
(``known_hosts.py``: UserKnownHostsFile, GlobalKnownHostsFile, StrictHostKeyChecking): an
unknown one is refused unless the SSH config says to add it. One connection serves every
call and is opened again after it drops.

This module imports paramiko and fabric: import it only when an SSH host is used.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import io
import re
import shlex
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any

import paramiko
from fabric import Config, Connection
from loguru import logger

from overbrainer.plugin import UserError
from overbrainer.plugin.host import Completed, Host, HostError, StreamWatches
from overbrainer_ssh.known_hosts import KnownHosts, Verdict

CONNECT_TIMEOUT_S = 15
"""Connecting and authenticating, unless the SSH config sets ConnectTimeout."""
KEEPALIVE_S = 15
"""Keepalives keep NAT and firewall state alive while a job is followed."""
OPEN_TIMEOUT_S = 30
"""Opening a channel on a connection that stopped answering."""
WINDOW = 8 << 20
PACKET = 128 << 10
"""The receive window and the largest packet of each channel. Measured on a 1 GB
download over loopback (benchmarks/transfer.py): 8 MiB and 128 KiB read about 1.2x as fast
as paramiko's 2 MiB and 32 KiB; a larger window was slower (paramiko's buffer grows)."""
READ_SIZE = 1 << 20
STDERR_CAP = 64 << 10
"""The tail of a script's stderr that is kept (error messages come last)."""

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_TRANSPORT_ERRORS = (paramiko.SSHException, OSError, EOFError)


class SshHost(Host):
    """The machine ``address`` (``user@host[:port]`` or an SSH config alias) of the target
    ``name``. ``ssh_config``: the SSH config file to read instead of ``~/.ssh/config`` and
    ``/etc/ssh/ssh_config`` (a per-run config, for machines made for one run)."""

    def __init__(self, name: str, address: str, ssh_config: Path | None = None) -> None:
        self.name = name
        self.address = address
        self.ssh_config = ssh_config
        self._connection: Connection | None = None
        self._lock = threading.Lock()
        self._changes = StreamWatches(self)
        self._forwards: dict[int, _Forward] = {}

    def wait_for_change(self, root: str, timeout: float) -> bool | None:
        """One long-lived channel a job directory tells when its state changes."""
        return self._changes.wait(root, timeout)

    # The connection.

    def connect(self) -> None:
        """Open the connection now; ``UserError`` says why it cannot be."""
        try:
            self.open()
        except HostError as error:
            raise UserError(str(error)) from None

    def open(self) -> None:
        """Open the connection now; ``HostError`` says why it cannot be."""
        self._transport()

    def forward(self, port: int) -> int:
        """A port on this machine's loopback whose connections reach ``port`` on the
        host's loopback, each through a ``direct-tcpip`` channel of this connection (one
        listener a port, until ``close``)."""
        with self._lock:
            found = self._forwards.get(port)
        if found is not None and found.open:
            return found.local_port
        forward = _Forward(self, port)
        with self._lock:
            self._forwards[port] = forward
        return forward.local_port

    def _channel_to(self, port: int, peer: tuple[str, int]) -> paramiko.Channel:
        transport = self._transport()
        try:
            return transport.open_channel(
                "direct-tcpip", ("127.0.0.1", port), peer, timeout=OPEN_TIMEOUT_S,
                window_size=WINDOW, max_packet_size=PACKET,
            )  # fmt: skip
        except _TRANSPORT_ERRORS as error:
            self._drop(transport)
            raise self._lost(error) from None

    def close(self) -> None:
        with self._lock:
            forwards = list(self._forwards.values())
            self._forwards.clear()
        for forward in forwards:
            forward.close()
        with self._lock:
            connection, self._connection = self._connection, None
        if connection is not None:
            _close(connection)

    def _transport(self) -> paramiko.Transport:
        """The open connection's transport, connecting (again) if there is none."""
        with self._lock:
            connection = self._connection
            if connection is not None and connection.is_connected:
                return connection.transport
            self._connection = None
            if connection is not None:
                _close(connection)
            connection = self._open()
            self._connection = connection
            return connection.transport

    def _open(self) -> Connection:
        try:
            connection = Connection(
                self.address,
                config=_fabric_config(self.ssh_config),
                connect_kwargs={
                    "banner_timeout": CONNECT_TIMEOUT_S,
                    "auth_timeout": CONNECT_TIMEOUT_S,
                },
            )
        except (ValueError, paramiko.SSHException) as error:
            raise UserError(
                f"targets.{self.name}.host: cannot use {self.address!r}: {error}"
            ) from None
        hops = _hops(connection)
        for hop in hops:
            known = _check_host_keys(hop, self.address if hop is connection else None)
            hop.connect_kwargs["transport_factory"] = functools.partial(
                _new_transport, known_types=known.key_types()
            )
        try:
            connection.open()
        except UnknownHostKey as error:
            _close(connection)
            raise UserError(f"cannot reach target `{self.name}`: {error}") from None
        except paramiko.BadHostKeyException as error:
            _close(connection)
            changed = _changed_key(error, _failed_hop(hops))
            raise UserError(f"cannot reach target `{self.name}`: {changed}") from None
        except (*_TRANSPORT_ERRORS, ValueError) as error:
            _close(connection)
            failed = _failed_hop(hops)
            raise HostError(f"cannot reach target `{self.name}`: {_cause(error, failed)}") from None
        interval = int(connection.ssh_config.get("serveraliveinterval", KEEPALIVE_S) or KEEPALIVE_S)
        for hop in hops:
            hop.transport.set_keepalive(interval)
            if isinstance(hop.transport.sock, socket.socket):
                # Scripts are small writes answered by small writes: without this, each
                # waits for a delayed ACK (about 40 ms a call).
                hop.transport.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return connection

    def _drop(self, transport: paramiko.Transport) -> None:
        """Forget the connection of ``transport`` after a failure on it: the next call
        connects again (a half-open connection would otherwise fail every call)."""
        with self._lock:
            connection = self._connection
            if connection is None or connection.transport is not transport:
                return
            self._connection = None
        _close(connection)

    @contextmanager
    def _exec(self, script: str) -> Iterator[_Exec]:
        """``script`` started with ``sh -c`` on a new channel; transport failures inside
        become ``HostError`` and drop the connection."""
        transport = self._transport()
        try:
            channel = transport.open_session(
                window_size=WINDOW, max_packet_size=PACKET, timeout=OPEN_TIMEOUT_S
            )
            channel.exec_command("sh -c " + shlex.quote(script))
            running = _Exec(channel)
        except _TRANSPORT_ERRORS as error:
            self._drop(transport)
            raise self._lost(error) from None
        try:
            yield running
        except TimeoutError:
            running.abort()
            self._drop(transport)
            raise
        except _TRANSPORT_ERRORS as error:
            running.abort()
            self._drop(transport)
            raise self._lost(error) from None
        except BaseException:
            running.abort()
            raise
        finally:
            running.channel.close()

    def _lost(self, error: BaseException) -> HostError:
        return HostError(f"lost the connection to target `{self.name}`: {_cause(error)}")

    # The four primitives.

    def run(self, script: str, input: bytes = b"", timeout: float | None = 60) -> Completed:
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            with self._exec(script) as running:
                running.feed(input)
                stdout = running.read_all(deadline)
                code = running.finish(deadline)
                if code < 0 and not running.channel.eof_received:
                    # Closed with no exit status and no end of output: not a script
                    # killed by a signal, a connection that dropped.
                    raise EOFError("the connection closed")
                return Completed(code, stdout, running.stderr())
        except TimeoutError:
            raise HostError(
                f"a script on target `{self.name}` took more than {timeout:.0f} s"
            ) from None

    @contextmanager
    def stream_out(self, script: str, input: bytes = b"") -> Iterator[IO[bytes]]:
        with self._exec(script) as running:
            running.feed(input)
            yield io.BufferedReader(_ChannelReader(running.channel), READ_SIZE)
            running.read_all(None)  # whatever the reader left (a tar's padding)
            code = running.finish(None)
            if code != 0:
                raise HostError(running.error_line() or _ended(code))

    def stream_in(self, script: str, write: Callable[[IO[bytes]], None]) -> Completed:
        with self._exec(script) as running:
            stdout = running.drain_stdout()
            stream = io.BufferedWriter(_ChannelWriter(running.channel), READ_SIZE)
            try:
                write(stream)
                stream.flush()
            except OSError:
                # The script ended early (its stdin closed): its exit status and
                # stderr say why; a dropped connection reads as no status.
                if running.channel.exit_status_ready() and running.channel.exit_status >= 0:
                    return Completed(running.finish(None), b"", running.stderr())
                raise
            running.channel.shutdown_write()
            code = running.finish(None)
            return Completed(code, stdout(), running.stderr())

    def spawn(self, script: str, cwd: str, log: str, secrets: Mapping[str, str]) -> None:
        q = shlex.quote
        for name, value in secrets.items():
            if not _NAME.match(name):
                raise UserError(f"{name!r} is not a valid environment variable name")
            if "\n" in value or "\r" in value:
                raise UserError(f"the secret {name} holds a line break: it cannot reach the job")
        # Each secret comes on the launcher's stdin, one line each, so no value is ever on
        # a command line (ps shows those to every user of the host). Every standard
        # stream of the job is redirected: an inherited one would hold the channel open.
        reads = "".join(f"IFS= read -r {name} && export {name} || exit 1\n" for name in secrets)
        launcher = (
            "command -v setsid >/dev/null 2>&1 || "
            "{ echo 'setsid is not installed on the target' >&2; exit 1; }\n"
            f"{reads}"
            f"cd {q(cwd)} || exit 1\n"
            f"setsid nohup sh -c {q(script)} >> {q(log)} 2>&1 < /dev/null &\n"
        )
        input = "".join(f"{value}\n" for value in secrets.values()).encode("utf-8")
        done = self.run(launcher, input=input)
        if done.code != 0:
            detail = done.stderr.decode("utf-8", "replace").strip().splitlines()
            raise HostError(f"cannot start the job: {detail[-1] if detail else _ended(done.code)}")


class _Forward:
    """A listener on this machine's loopback; each connection it accepts is carried to
    ``port`` on the host's loopback by a channel, bytes pumped both ways by two threads."""

    def __init__(self, host: SshHost, port: int) -> None:
        self.host = host
        self.port = port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.local_port: int = self.listener.getsockname()[1]
        self.open = True
        threading.Thread(target=self._accept, daemon=True, name=f"forward-{port}").start()

    def _accept(self) -> None:
        while self.open:
            try:
                client, peer = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._carry, args=(client, peer), daemon=True).start()

    def _carry(self, client: socket.socket, peer: tuple[str, int]) -> None:
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            channel = self.host._channel_to(self.port, peer)
        except HostError as error:
            logger.debug(f"forward to port {self.port}: {error}")
            client.close()
            return
        def home() -> None:
            _pump(channel.recv, client.sendall)
            with suppress(OSError):
                client.shutdown(socket.SHUT_WR)  # the engine closed: so does the client's side

        back = threading.Thread(target=home, daemon=True)
        back.start()
        _pump(client.recv, channel.sendall)
        with suppress(*_TRANSPORT_ERRORS):
            channel.shutdown_write()
        back.join()
        channel.close()
        client.close()

    def close(self) -> None:
        self.open = False
        self.listener.close()


def _pump(read: Callable[[int], bytes], write: Callable[[bytes], object]) -> None:
    """Copy until the end of ``read`` or a failure of either side."""
    with suppress(*_TRANSPORT_ERRORS):
        while data := read(READ_SIZE):
            write(data)


class _Exec:
    """A script running on an exec channel. Its stderr is read on a thread, so a script
    that writes much of it never blocks while its stdout is read (or the reverse)."""

    def __init__(self, channel: paramiko.Channel) -> None:
        self.channel = channel
        self._stderr = bytearray()
        self._threads = [self._thread(self._read_stderr)]

    def _thread(self, target: Callable[[], None]) -> threading.Thread:
        thread = threading.Thread(target=target, daemon=True)
        thread.start()
        return thread

    def _read_stderr(self) -> None:
        for data in self._chunks(self.channel.recv_stderr):
            self._stderr += data
            del self._stderr[:-STDERR_CAP]

    @staticmethod
    def _chunks(recv: Callable[[int], bytes]) -> Iterator[bytes]:
        """What ``recv`` reads until the end of its stream, on a helper thread. The
        channel's timeout is the main thread's deadline: a helper waits past it."""
        while True:
            try:
                data = recv(READ_SIZE)
            except TimeoutError:
                continue
            except _TRANSPORT_ERRORS:
                return
            if not data:
                return
            yield data

    def feed(self, data: bytes) -> None:
        """Send ``data`` as the script's whole stdin, from a thread: the script may write
        a window's worth of output before it reads all of it."""
        if not data:
            self.channel.shutdown_write()
            return

        def send() -> None:
            sent = 0
            try:
                while sent < len(data):
                    try:
                        sent += self.channel.send(data[sent : sent + READ_SIZE])
                    except TimeoutError:
                        continue
                self.channel.shutdown_write()
            except _TRANSPORT_ERRORS:
                pass  # the script ended early, or the connection dropped: the reader sees it

        self._threads.append(self._thread(send))

    def read_all(self, deadline: float | None) -> bytes:
        """The script's stdout to its end; ``TimeoutError`` past ``deadline``."""
        out = bytearray()
        while True:
            self.channel.settimeout(_left(deadline))
            data = self.channel.recv(READ_SIZE)
            if not data:
                return bytes(out)
            out += data

    def drain_stdout(self) -> Callable[[], bytes]:
        """Read stdout on a thread; the returned function gives what was read."""
        out = bytearray()

        def read() -> None:
            for data in self._chunks(self.channel.recv):
                out.extend(data)

        thread = self._thread(read)
        self._threads.append(thread)
        def joined() -> bytes:
            thread.join()
            return bytes(out)

        return joined

    def finish(self, deadline: float | None) -> int:
        """The exit status, once the channel closed; -1 when it closed without one
        (the script was killed by a signal, or the connection dropped)."""
        if not self.channel.status_event.wait(_left(deadline)):
            raise TimeoutError
        for thread in self._threads:
            thread.join(_left(deadline))
        return self.channel.exit_status

    def stderr(self) -> bytes:
        return bytes(self._stderr)

    def error_line(self) -> str:
        lines = self.stderr().decode("utf-8", "replace").strip().splitlines()
        return lines[-1] if lines else ""

    def abort(self) -> None:
        self.channel.close()


class _ChannelReader(io.RawIOBase):
    """A channel's stdout as a raw stream."""

    def __init__(self, channel: paramiko.Channel) -> None:
        self.channel = channel

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        self.channel.settimeout(None)
        data = self.channel.recv(len(buffer))
        buffer[: len(data)] = data
        return len(data)


class _ChannelWriter(io.RawIOBase):
    """A channel's stdin as a raw stream."""

    def __init__(self, channel: paramiko.Channel) -> None:
        self.channel = channel

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self.channel.sendall(bytes(data))
        return len(data)


class UnknownHostKey(paramiko.SSHException):
    """A host key that no known-hosts file holds (or one that is revoked)."""


class _CheckHostKeys(paramiko.MissingHostKeyPolicy):
    """Every host key, checked against ``known`` as OpenSSH would: paramiko is given no
    key of its own, so it hands each one here."""

    def __init__(self, known: KnownHosts, address: str | None, user: str, host: str, port: int):
        self.known = known
        self.address, self.user, self.host, self.port = address, user, host, port

    def missing_host_key(
        self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey
    ) -> None:
        verdict, expected = self.known.verdict(key)
        if verdict is Verdict.KNOWN:
            return
        if verdict is Verdict.CHANGED:
            raise paramiko.BadHostKeyException(hostname, key, expected)
        shown = f"{key.get_name()} {_fingerprint(key)}"
        if verdict is Verdict.REVOKED:
            raise UnknownHostKey(
                f"the host key of {self.known.name} is revoked ({shown}) in a known-hosts file"
            )
        if self.known.adds_new:
            added = self.known.add(key)
            where = _home_relative(added) if added else "no file (UserKnownHostsFile none)"
            logger.warning(
                f"the host key of {self.known.name} ({shown}) was not known: added to {where} "
                f"(StrictHostKeyChecking {self.known.strict})"
            )
            return
        port = "" if self.port == 22 else f"-p {self.port} "
        files = self.known.user_files
        target = _home_relative(files[0]) if files else "~/.ssh/known_hosts"
        raise UnknownHostKey(
            f"the host key of {self.known.name} is not known ({shown}); "
            "check that fingerprint with the machine's owner, then trust it with "
            f"`ssh-keyscan {port}{self.host} >> {target}` "
            f"(or connect once with `{self._ssh()}`)"
        )

    def _ssh(self) -> str:
        """The OpenSSH command that reaches the same machine."""
        if self.address and ":" not in self.address and "@" not in self.address:
            return f"ssh {self.address}"  # an alias, or a bare host name
        port = "" if self.port == 22 else f"-p {self.port} "
        return f"ssh {port}{self.user}@{self.host}"


def _home_relative(path: Path) -> str:
    home = Path.home()
    return f"~/{path.relative_to(home)}" if path.is_relative_to(home) else str(path)


def _new_transport(sock: Any, known_types: list[str], **options: Any) -> paramiko.Transport:
    """paramiko's transport, asking first for the host key types known for the host (as
    OpenSSH orders them), with two changes measured on bulk downloads.

    AES-GCM first: one pass instead of AES-CTR then HMAC, about 1.3x the throughput.
    Rekeying left to the server: when paramiko starts a rekey itself (every 512 MiB)
    while a channel is busy, it can stall until "Key-exchange timed out waiting for key
    negotiation" (paramiko#822, reproduced here after a few GB); a rekey the server starts
    works, and OpenSSH starts one at its RekeyLimit.
    """
    transport = paramiko.Transport(sock, **options)
    security = transport.get_security_options()
    security.ciphers = sorted(security.ciphers, key=lambda name: "-gcm@" not in name)
    wanted = [
        name
        for known in known_types
        for name in (["rsa-sha2-512", "rsa-sha2-256", known] if known == "ssh-rsa" else [known])
        if name in security.key_types
    ]
    security.key_types = [*dict.fromkeys(wanted), *security.key_types]
    transport.packetizer.REKEY_BYTES = transport.packetizer.REKEY_PACKETS = 1 << 62
    return transport


def _fabric_config(ssh_config: Path | None) -> Config:
    overrides: dict[str, Any] = {"timeouts": {"connect": CONNECT_TIMEOUT_S}}
    if ssh_config is not None:
        overrides["ssh_config_path"] = str(ssh_config)
    return Config(overrides=overrides)


def _hops(connection: Connection) -> list[Connection]:
    """The connection and every ProxyJump hop before it, nearest hop first."""
    chain = [connection]
    while isinstance(chain[-1].gateway, Connection):
        chain.append(chain[-1].gateway)
    return chain[::-1]


def _failed_hop(hops: list[Connection]) -> Connection:
    """The first hop that is not connected: the one that failed."""
    return next((hop for hop in hops if not hop.is_connected), hops[-1])


def _check_host_keys(connection: Connection, address: str | None) -> KnownHosts:
    """Have ``connection`` check host keys as OpenSSH would (fabric would add any key),
    from the files its SSH config names; ``address``: what the user wrote for this machine
    (None for a ProxyJump hop)."""
    known = KnownHosts(
        connection.ssh_config,
        connection.host,
        connection.port,
        connection.user,
        connection.original_host,
    )
    connection.client.set_missing_host_key_policy(
        _CheckHostKeys(known, address, connection.user, connection.host, connection.port)
    )
    return known


def _close(connection: Connection) -> None:
    for hop in reversed(_hops(connection)):
        with suppress(*_TRANSPORT_ERRORS):
            hop.close()
            # fabric closes only a connection that opened: a transport whose host key
            # was refused would otherwise keep its thread and socket.
            hop.client.close()


def _fingerprint(key: paramiko.PKey) -> str:
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode("ascii").rstrip("=")


def _changed_key(error: paramiko.BadHostKeyException, hop: Connection) -> str:
    where = hop.host if hop.port == 22 else f"[{hop.host}]:{hop.port}"
    return (
        f"the host key of {where} changed: it offered {error.key.get_name()} "
        f"{_fingerprint(error.key)}, known_hosts holds {_fingerprint(error.expected_key)}; "
        "if the machine was reinstalled, check the new fingerprint, then forget the old key "
        f"with `ssh-keygen -R '{where}'`"
    )


def _cause(error: BaseException, hop: Connection | None = None) -> str:
    """What went wrong, in a few words."""
    where = f"{hop.host} port {hop.port}" if hop is not None else ""
    if isinstance(error, paramiko.ssh_exception.NoValidConnectionsError):
        reasons = {(e.strerror or str(e)) for e in error.errors.values()}
        return f"{where}: {', '.join(sorted(reasons)).lower()}"
    if isinstance(error, socket.gaierror):
        return f"{hop.host if hop else '?'}: unknown host name ({error.strerror})"
    if isinstance(error, TimeoutError):
        return f"{where}: timed out" if where else "timed out"
    if isinstance(error, paramiko.AuthenticationException):
        user = hop.user if hop is not None else "?"
        return (
            f"authentication as {user} on {where} failed ({error}): load the key in "
            "ssh-agent or name it with IdentityFile in ~/.ssh/config"
        )
    if isinstance(error, OSError) and error.strerror:
        return f"{where}: {error.strerror.lower()}" if where else error.strerror.lower()
    text = str(error) or type(error).__name__
    return f"{where}: {text}" if where else text


def _left(deadline: float | None) -> float | None:
    if deadline is None:
        return None
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError
    return left


def _ended(code: int) -> str:
    return "the script ended without an exit status" if code < 0 else f"exit code {code}"
