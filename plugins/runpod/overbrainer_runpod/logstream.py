"""Runpod's log stream of a pod: ``GET <rest>/pods/{id}/logs``, a ``text/event-stream`` of
its container's and Runpod's own (system) lines that never ends by itself.

Each event is ``id: <cursor>`` and ``data: {"ts", "source", "line"}``; a data that is not
that object is kept whole under the source ``raw``. ``Last-Event-ID`` resumes after a
cursor (exclusive), so a reconnect neither loses nor repeats a line. A cursor Runpod no
longer knows (400/422) is given up once for its time (``since``), or the longest replay.

There is no end-of-replay marker: a snapshot ends after a silence, a follow reconnects
(with backoff) until the pod is gone (404). Every line is redacted as it arrives, before
anything prints or keeps it. The standard library's ``http.client`` reads the stream: one
thread per connection reads the body, so the caller can stop waiting at any time.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import queue
import re
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from urllib.parse import quote, urlencode, urlsplit

from loguru import logger

from overbrainer.plugin.files import LineRedactor, escape_controls, redact

DEFAULT_REST = "https://rest.runpod.io/v1"
TAIL_MAX = 5000
"""Most lines Runpod replays (``tail``)."""
SILENCE_S = 0.75
"""A snapshot ends once no event came for this long: the replay comes in one burst."""
SNAPSHOT_S = 10.0
"""Longest a snapshot (``runs logs --pod`` without ``--follow``) reads."""
CONNECT_S = 10.0
IDLE_S = 90.0
"""A followed connection with nothing at all (not even a keepalive) for this long is
dropped and opened again."""
BACKOFF_MIN_S = 0.5
BACKOFF_MAX_S = 15.0
RETRY_AFTER_MAX_S = 60.0
MAX_LINE = 1 << 20
"""Bytes kept of one line of the stream; an event's data is cut at ``MAX_FRAME``."""
MAX_FRAME = 4 << 20
MAX_CURSOR = 200
SOURCES = ("container", "system")
OURS = "overbrainer"
"""The source of overbrainer's own line in a kept log (the cap)."""
SHORT = {"container": "ctr", "system": "sys", OURS: "obr"}
PERMANENT = (400, 401, 403, 404, 422)
_CURSOR = re.compile(rf"[!-~]{{1,{MAX_CURSOR}}}")
_TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[0-9.:+Z-]{0,21}$")


@dataclass(frozen=True)
class PodLogLine:
    """One line of a pod's log, as the stream gives it and ``pod/pod.log`` keeps it."""

    ts: str
    source: str
    line: str

    @classmethod
    def from_json(cls, value: object) -> PodLogLine | None:
        """The line ``value`` (a decoded JSON object) holds, cleaned: a ``ts`` that is
        not an RFC 3339 time becomes empty, an unknown source ``raw``."""
        if not isinstance(value, dict) or not isinstance(value.get("line"), str):
            return None
        ts = value.get("ts")
        source = value.get("source")
        known = (*SOURCES, "raw", OURS)
        return cls(
            ts if isinstance(ts, str) and _TS.match(ts) else "",
            source if isinstance(source, str) and source in known else "raw",
            value["line"],
        )

    def to_json(self) -> str:
        return json.dumps({"ts": self.ts, "source": self.source, "line": self.line})

    def display(self) -> str:
        """``<ts> <ctr|sys|raw> <line>``: redacted again (a log kept by an older version),
        on one line, with no terminal control."""
        clean = PodLogLine.from_json({"ts": self.ts, "source": self.source, "line": self.line})
        assert clean is not None
        shown = escape_controls(redact(clean.line), keep="\t")
        return f"{clean.ts} {SHORT.get(clean.source, 'raw')} {shown}"


def parse_data(data: str, truncated: bool = False) -> PodLogLine | None:
    """The line an event's ``data`` holds; None for an empty one (a keepalive)."""
    if not data.strip():
        return None
    try:
        line = PodLogLine.from_json(json.loads(data))
    except ValueError:
        line = None
    if line is None:
        line = PodLogLine("", "raw", data)
    return replace(line, line=line.line + " [truncated]") if truncated else line


def valid_cursor(cursor: str) -> bool:
    """A cursor safe to keep and send back: printable ASCII, not too long."""
    return _CURSOR.fullmatch(cursor) is not None


@dataclass
class Frame:
    """One event of the stream: its ``id`` and joined ``data`` lines."""

    id: str | None = None
    data: str | None = None
    truncated: bool = False


class SseParser:
    """``text/event-stream`` bytes into events: only ``id`` and ``data`` are read,
    comments and other fields skipped, ``\\r\\n`` taken for ``\\n``. An event the
    connection cut before its blank line is dropped, as the format says: its cursor was
    not reached, so a reconnect brings it whole."""

    def __init__(self) -> None:
        self._pending = bytearray()
        self._cut = False
        self._frame = Frame()

    def feed(self, chunk: bytes) -> list[Frame]:
        frames: list[Frame] = []
        start = 0
        while (at := chunk.find(b"\n", start)) >= 0:
            self._append(chunk[start:at])
            self._line(frames)
            start = at + 1
        self._append(chunk[start:])
        return frames

    def _append(self, piece: bytes) -> None:
        room = MAX_LINE - len(self._pending)
        if len(piece) > room:
            self._cut = True
            piece = piece[: max(room, 0)]
        self._pending += piece

    def _line(self, frames: list[Frame]) -> None:
        text = self._pending.decode("utf-8", "replace").removesuffix("\r")
        cut, self._pending, self._cut = self._cut, bytearray(), False
        frame = self._frame
        if not text:
            if frame.id is not None or frame.data is not None:
                frames.append(frame)
            self._frame = Frame()
            return
        name, _, value = text.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            joined = value if frame.data is None else f"{frame.data}\n{value}"
            if len(joined) > MAX_FRAME:
                frame.truncated = True
                frame.data = joined[:MAX_FRAME]
            else:
                frame.data = joined
                frame.truncated |= cut
        elif name == "id":
            frame.id = value


class LogError(Exception):
    """Reading the stream failed; ``status`` is the HTTP status of a refusal, else None
    (no answer: the API could not be reached, or the connection broke)."""

    def __init__(
        self, message: str, status: int | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after

    @property
    def permanent(self) -> bool:
        """Whether every reconnect would get the same answer."""
        return self.status in PERMANENT


@dataclass
class LogQuery:
    source: str | None = None
    tail: int | None = None
    since: str | None = None
    cursor: str | None = None


@dataclass
class LogClient:
    """The account of ``key`` on the REST API at ``base`` (https, or http on loopback)."""

    key: str
    base: str = DEFAULT_REST

    def check(self) -> None:
        parts = urlsplit(self.base)
        loopback = parts.hostname in ("127.0.0.1", "localhost", "::1")
        if parts.scheme != "https" and not (parts.scheme == "http" and loopback):
            raise LogError(
                "OVERBRAINER_RUNPOD__REST_URL must be an https URL (http only on loopback)"
            )

    def open(self, pod_id: str, query: LogQuery, timeout: float) -> Connection:
        """The stream of ``pod_id`` for ``query``, its headers read within ``timeout``.
        ``TimeoutError`` when no header came by then (Runpod says nothing until it has a
        line)."""
        self.check()
        parts = urlsplit(self.base)
        params: dict[str, str] = {}
        if query.source:
            params["source"] = query.source
        if query.cursor is None and query.since:
            params["since"] = query.since
        if query.cursor is None and query.since is None and query.tail is not None:
            params["tail"] = str(min(query.tail, TAIL_MAX))
        path = f"{parts.path.rstrip('/')}/pods/{quote(pod_id, safe='')}/logs"
        if params:
            path += "?" + urlencode(params)
        headers = {
            "Authorization": f"Bearer {self.key}",
            "Accept": "text/event-stream",
            "Cache-Control": "no-cache",
        }
        if query.cursor:
            headers["Last-Event-ID"] = query.cursor
        host = parts.hostname or ""
        connection: http.client.HTTPConnection
        if parts.scheme == "https":
            connection = http.client.HTTPSConnection(
                host, parts.port, timeout=min(CONNECT_S, timeout),
                context=ssl.create_default_context(),
            )  # fmt: skip
        else:
            connection = http.client.HTTPConnection(
                host, parts.port, timeout=min(CONNECT_S, timeout)
            )
        try:
            connection.connect()
        except OSError as error:
            connection.close()
            raise LogError(f"cannot reach {host} ({_why(error)})") from None
        sock = connection.sock
        assert sock is not None
        try:
            sock.settimeout(timeout)
            connection.request("GET", path, headers=headers)
            response = connection.getresponse()
        except TimeoutError:
            _shut(sock, connection)
            raise
        except (OSError, http.client.HTTPException) as error:
            _shut(sock, connection)
            raise LogError(f"no answer from {host} ({_why(error)})") from None
        if response.status != 200:
            body = _short_body(response)
            _shut(sock, connection)
            raise LogError(
                f"HTTP {response.status}{': ' + body if body else ''}",
                response.status,
                _retry_after(response.getheader("Retry-After")),
            )
        return Connection(sock, connection, response)


def _why(error: BaseException) -> str:
    return type(error).__name__ if not str(error) else f"{type(error).__name__}: {error}"


def _short_body(response: http.client.HTTPResponse) -> str:
    try:
        text = response.read(500).decode("utf-8", "replace")
    except (OSError, http.client.HTTPException):
        return ""
    return escape_controls(redact(" ".join(text.split())))[:200]


def _retry_after(value: str | None) -> float | None:
    try:
        return max(float(value), 0.0) if value else None
    except ValueError:
        return None


def _shut(sock: socket.socket, connection: http.client.HTTPConnection) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    connection.close()


_EOF = object()


@dataclass
class Connection:
    """An open stream, its body read by a thread into ``chunks``."""

    sock: socket.socket
    connection: http.client.HTTPConnection
    response: http.client.HTTPResponse
    chunks: queue.Queue[object] = field(default_factory=queue.Queue)

    def __post_init__(self) -> None:
        threading.Thread(target=self._read, daemon=True, name="pod-log").start()

    def _read(self) -> None:
        try:
            while chunk := self.response.read1(65536):
                self.chunks.put(chunk)
            self.chunks.put(_EOF)
        except Exception as error:  # noqa: BLE001 - any failure ends this connection only
            self.chunks.put(error)
        finally:
            # Closed here, by the reader: closing under it from another thread races it.
            with contextlib.suppress(Exception):
                self.connection.close()

    def next(self, timeout: float | None) -> bytes | None:
        """The next bytes; None at the end. ``queue.Empty`` when none came in time,
        ``LogError`` when the connection broke."""
        item = self.chunks.get(timeout=timeout)
        if item is _EOF:
            return None
        if isinstance(item, BaseException):
            raise LogError(f"the log stream broke ({_why(item)})")
        assert isinstance(item, bytes)
        return item

    def close(self) -> None:
        """End the connection: its reader wakes up and closes it."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)


Sink = Callable[[list[PodLogLine], str | None], None]
"""Gets each batch of lines, redacted, with the cursor they end at."""


class Stream:
    """One reader of a pod's log over as many connections as it takes; ``query.cursor``
    follows the last event read."""

    def __init__(self, client: LogClient, pod_id: str, query: LogQuery, sink: Sink) -> None:
        self.client = client
        self.pod_id = pod_id
        self.query = query
        self.sink = sink
        self.redactor = LineRedactor()
        self.delivered = False
        self.fell_back = False

    def pump(self, silence: float | None, deadline: float | None) -> None:
        """Read one connection until the server ends it, or (with ``silence``) no event
        came for that long, or ``deadline`` (monotonic) passes."""
        self.delivered = False
        first = _left(deadline, IDLE_S)
        if first <= 0:
            return
        try:
            connection = self.client.open(self.pod_id, self.query, first)
        except TimeoutError:
            if deadline is not None:
                return  # nothing to say before the deadline
            raise LogError("no answer within the idle time") from None
        parser = SseParser()
        last = time.monotonic()
        try:
            while True:
                wait = IDLE_S if silence is None else last + silence - time.monotonic()
                wait = min(wait, _left(deadline, wait))
                if wait <= 0:
                    return
                try:
                    chunk = connection.next(wait)
                except queue.Empty:
                    if silence is None and deadline is None:
                        raise LogError("nothing came within the idle time") from None
                    return
                if chunk is None:
                    return
                if self._deliver(parser.feed(chunk)):
                    last = time.monotonic()
        finally:
            connection.close()

    def _deliver(self, frames: list[Frame]) -> bool:
        cursor = None
        lines = []
        for frame in frames:
            line = parse_data(frame.data, frame.truncated) if frame.data is not None else None
            if line is not None:
                lines.append(replace(line, line=self.redactor.line(line.line)))
            if frame.id is not None and valid_cursor(frame.id):
                cursor = frame.id
        if not frames:
            return False
        self.delivered = True
        self.sink(lines, cursor)
        if cursor is not None:
            self.query.cursor = cursor
        return True

    def fall_back(self, error: LogError) -> bool:
        """After a refused cursor (400/422), try once more from its time, or the longest
        replay: a few lines may come twice, none is lost."""
        if self.fell_back or error.status not in (400, 422) or self.query.cursor is None:
            return False
        cursor, self.query.cursor = self.query.cursor, None
        self.fell_back = True
        ts = cursor.partition("/")[0] if "/" in cursor else ""
        self.query.since = ts if _TS.match(ts) else None
        if self.query.since is None:
            self.query.tail = TAIL_MAX
        logger.debug(f"runpod: the log stream refused its cursor ({error}); starting again")
        return True


def _left(deadline: float | None, default: float) -> float:
    return default if deadline is None else deadline - time.monotonic()


def snapshot(
    client: LogClient, pod_id: str, query: LogQuery, sink: Sink, max_wait: float = SNAPSHOT_S
) -> str | None:
    """What the stream of ``pod_id`` has for ``query`` now: read until a silence of
    ``SILENCE_S``, the server's end, or ``max_wait`` in all. Returns the cursor reached.
    ``LogError`` when the API refuses or cannot be reached."""
    stream = Stream(client, pod_id, replace(query), sink)
    deadline = time.monotonic() + max_wait
    while True:
        try:
            stream.pump(SILENCE_S, deadline)
            return stream.query.cursor
        except LogError as error:
            if not stream.fall_back(error):
                raise


class Backoff:
    """The waits between the connections of a follow: 0.5 s after one that delivered,
    doubling to 15 s while none does, or Runpod's ``Retry-After`` (a minute at most)."""

    def __init__(self) -> None:
        self.next = BACKOFF_MIN_S

    def wait(self, delivered: bool, error: LogError | None) -> float:
        if delivered:
            self.next = BACKOFF_MIN_S
        wait = self.next
        if error is not None and error.retry_after is not None:
            wait = max(min(error.retry_after, RETRY_AFTER_MAX_S), wait)
        self.next = min(self.next * 2, BACKOFF_MAX_S)
        return wait


def follow(client: LogClient, pod_id: str, query: LogQuery, sink: Sink) -> LogError:
    """Follow the stream of ``pod_id`` from ``query`` forever, reconnecting after the
    last event read; returns only the refusal that ends it (a 404 once the pod is
    deleted, a 401...)."""
    stream = Stream(client, pod_id, replace(query), sink)
    backoff = Backoff()
    while True:
        failure: LogError | None = None
        try:
            stream.pump(None, None)
        except LogError as error:
            if stream.fall_back(error):
                continue
            if error.permanent:
                return error
            failure = error
        wait = backoff.wait(stream.delivered, failure)
        logger.debug(f"runpod: the log stream of pod {pod_id} ended ({failure or 'closed'}); "
                     f"reconnecting in {wait:g} s")  # fmt: skip
        time.sleep(wait)
