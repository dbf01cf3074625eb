"""A stateful loopback server playing Runpod's GraphQL API, and the pods it makes.

It answers the queries the runpod SDK sends (``myself { pods }``, ``pod(input:)``,
``podTerminate``, ``gpuTypes``) and the ones the ``runpod`` target sends itself through
``run_graphql_query`` (``podFindAndDeployOnDemand``, ``secretCreate``/``secretDelete``,
``dataCenters``, ``networkVolumes``). A GraphQL input object is parsed for real (strings with
escapes, numbers, lists, objects), so a query built with bad escaping fails here as it would
there.

A pod is a directory (``root/pods/<id>``) and the pod's start command (``dockerArgs``), run
there with the pod's environment, ``{{ RUNPOD_SECRET_x }}`` references resolved, plus what
the platform adds: ``RUNPOD_POD_ID``, a ``RUNPOD_API_KEY`` that may only delete its own pod,
and the knobs that make a pod of this machine (``OVERBRAINER_POD_ROOT`` as ``/``, the SSH
port, extra sshd lines). Terminating a pod stops every process of it by pid.

Knobs (attributes, changed by tests at any time): ``no_capacity`` and ``forbidden`` (GPU type
ids), ``no_credit``, ``ambiguous_creates`` (how many creates answer 502 after creating the
pod), ``dropped_creates`` (creates that close the connection after creating), ``port_delay``
(gets answered with no runtime before the ports appear), ``stock`` (type id -> stockStatus).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shlex
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.helpers.tools import search_path

# The account key the fake wants, what its pods' jobs are given, and the target's timing
# (a pod's life measured in seconds).
API_KEY = "rpa_FAKEACCOUNTKEY0123456789abcdef"
FAST_JOBS = {"FAKE_AXOLOTL_STEP_SECONDS": "0.02"}
TIMING = "minute=0.5,tick=0.2,poll=0.05,confirm=0.02,lease_minutes=6"

GPU_TYPES = [
    {"id": "NVIDIA A40", "displayName": "A40", "memoryInGb": 48, "securePrice": 0.44},
    {"id": "NVIDIA L40S", "displayName": "L40S", "memoryInGb": 48, "securePrice": 0.86},
    {"id": "NVIDIA RTX A5000", "displayName": "RTX A5000", "memoryInGb": 24, "securePrice": 0.27},
    {"id": "NVIDIA H100 80GB HBM3", "displayName": "H100 SXM", "memoryInGb": 80,
     "securePrice": 2.99},
]  # fmt: skip
DATA_CENTERS = [
    {"id": "EU-RO-1", "name": "EU-RO-1", "location": "Romania"},
    {"id": "US-KS-2", "name": "US-KS-2", "location": "United States"},
]
NO_CAPACITY = (
    "There are no longer any instances available with the requested specifications. "
    "Please refresh and try again."
)
NO_CREDIT = "Your account balance is too low to rent a pod"


class GraphQLSyntaxError(ValueError):
    pass


def parse_value(text: str, start: int) -> tuple[Any, int]:
    """One GraphQL value literal of ``text`` from ``start``: the value and where it ends."""
    i = _skip(text, start)
    if i >= len(text):
        raise GraphQLSyntaxError("unexpected end")
    char = text[i]
    if char == '"':
        if text.startswith('"""', i):
            raise GraphQLSyntaxError("block strings are not expected here")
        out, i = [], i + 1
        while True:
            if i >= len(text):
                raise GraphQLSyntaxError("unterminated string")
            c = text[i]
            if c == '"':
                return "".join(out), i + 1
            if c in "\n\r":
                raise GraphQLSyntaxError("line break in a string")
            if c == "\\":
                e = text[i + 1]
                simple = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n",
                          "r": "\r", "t": "\t"}  # fmt: skip
                if e in simple:
                    out.append(simple[e])
                    i += 2
                    continue
                if e == "u":
                    out.append(chr(int(text[i + 2 : i + 6], 16)))
                    i += 6
                    continue
                raise GraphQLSyntaxError(f"bad escape \\{e}")
            out.append(c)
            i += 1
    if char == "[":
        items, i = [], i + 1
        while True:
            i = _skip(text, i)
            if text[i] == "]":
                return items, i + 1
            value, i = parse_value(text, i)
            items.append(value)
    if char == "{":
        obj, i = {}, i + 1
        while True:
            i = _skip(text, i)
            if text[i] == "}":
                return obj, i + 1
            match = re.compile(r"[A-Za-z_]\w*").match(text, i)
            if not match:
                raise GraphQLSyntaxError(f"expected a name at {i}")
            i = _skip(text, match.end())
            if text[i] != ":":
                raise GraphQLSyntaxError(f"expected ':' at {i}")
            obj[match.group()], i = parse_value(text, i + 1)
    match = re.compile(r"-?\d+(\.\d+)?([eE][+-]?\d+)?").match(text, i)
    if match:
        number = match.group()
        return (float(number) if any(c in number for c in ".eE") else int(number)), match.end()
    match = re.compile(r"[A-Za-z_]\w*").match(text, i)
    if match:
        word = match.group()
        return {"true": True, "false": False, "null": None}.get(word, word), match.end()
    raise GraphQLSyntaxError(f"unexpected {char!r} at {i}")


def _skip(text: str, i: int) -> int:
    while i < len(text) and (text[i] in " \t\n\r," or text[i] == "#"):
        if text[i] == "#":
            while i < len(text) and text[i] != "\n":
                i += 1
        else:
            i += 1
    return i


def argument(query: str, field_name: str) -> dict[str, Any] | None:
    """The ``input`` object given to ``field_name`` in ``query`` (None when absent)."""
    match = re.search(rf"\b{field_name}\s*\(\s*input\s*:", query)
    if match is None:
        return None
    value, _ = parse_value(query, match.end())
    if not isinstance(value, dict):
        raise GraphQLSyntaxError("input is not an object")
    return value


@dataclass
class Pod:
    id: str
    name: str
    gpu_type: str
    cost: float
    env: dict[str, str]
    docker_args: str
    dir: Path
    ports: dict[int, int]
    """The TCP ports the create exposed (``ports``): private -> public."""
    key: str
    created: float = field(default_factory=time.time)
    gets: int = 0
    process: subprocess.Popen[bytes] | None = None
    status: str = "RUNNING"
    image_sshd: socket.socket | None = None
    gpu_count: int = 1

    def describe(self, with_ports: bool) -> dict[str, Any]:
        runtime = None
        if with_ports:
            runtime = {
                "uptimeInSeconds": int(time.time() - self.created),
                "ports": [
                    port
                    for private, public in self.ports.items()
                    for port in (
                        {"ip": "127.0.0.1", "isIpPublic": True, "privatePort": private,
                         "publicPort": public, "type": "tcp"},
                        {"ip": "100.65.0.9", "isIpPublic": False, "privatePort": private,
                         "publicPort": private, "type": "tcp"},
                    )
                ],
            }  # fmt: skip
        return {
            "id": self.id,
            "name": self.name,
            "desiredStatus": self.status,
            "costPerHr": self.cost,
            "gpuCount": self.gpu_count,
            "imageName": "fake/image",
            "dockerArgs": self.docker_args,
            "env": [f"{k}={v}" for k, v in self.env.items()],
            "machine": {"gpuDisplayName": self.gpu_type},
            "runtime": runtime,
        }


class FakeRunpod:
    """The API at ``url`` (give it to the SDK as ``RUNPOD_API_BASE_URL``), accepting
    ``api_key``; pods live under ``root``."""

    def __init__(self, root: Path, api_key: str, pod_env: dict[str, str] | None = None) -> None:
        self.root = root
        self.api_key = api_key
        self.pod_env = dict(pod_env or {})
        """Variables of every pod's sshd sessions (the fake trainer's knobs, PATH)."""
        self.pods: dict[str, Pod] = {}
        self.deleted: dict[str, Pod] = {}
        self.terminated_by: dict[str, str] = {}
        """Pod id -> who deleted it (``client`` or ``watchdog``): the first to ask."""
        self.terminates: list[tuple[str, str]] = []
        """Every delete asked, ``(pod id, client or watchdog)``, in order, answered or not:
        a client and its pod's watchdog may both ask, the second finding it gone."""
        self.secrets: dict[str, str] = {}
        """Secret name -> value."""
        self.secret_ids: dict[str, str] = {}
        """Secret id -> name: ``secretDelete`` takes the id ``secretCreate`` answered."""
        self.requests: list[str] = []
        """Every request body, as received."""
        self.calls: list[str] = []
        """The operation of every request (``create``, ``get``, ``list``...)."""
        self.no_capacity: set[str] = set()
        self.forbidden: set[str] = set()
        self.no_credit = False
        self.ambiguous_creates = 0
        self.dropped_creates = 0
        self.port_delay = 0
        self.stock: dict[str, str] = {}
        self.create_delay = 0.0
        """Seconds a create waits before it is done (a client may die meanwhile)."""
        self.list_delay = 0.0
        """Seconds a listing of the pods waits before it answers."""
        self.full_data_centers: set[str] = set()
        """Data centers with no capacity for any type."""
        self.glitch_not_found = 0
        """How many lookups of a live pod answer that it does not exist."""
        self.null_creates = 0
        """Creates that make the pod but answer it null, without an error."""
        self.flaky_gets = 0
        """How many lookups of a pod answer a 502 page."""
        self.image_sshd: int | None = None
        """Pods run an image whose entrypoint starts its own sshd on this port (22 for
        axolotl-cloud's) when the pod has a ``PUBLIC_KEY``, before the pod's command."""
        self.failing_terminates = 0
        """How many deletes by a pod's watchdog fail (an error, ``data`` null)."""
        self.drop_secrets = False
        """Pods start with their secrets unresolved (empty)."""
        self.shell: str | None = None
        """The ``sh`` of the pods, first on their PATH: the path of ``dash`` or ``busybox``
        (run as ``busybox sh``)."""
        self._lock = threading.RLock()
        self._stopped = False
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeRunpod:
        self._thread.start()
        return self

    def stop(self) -> None:
        with self._lock:  # a create still in its delay makes no pod once stopped
            self._stopped = True
        self._server.shutdown()
        self._server.server_close()
        for pod in list(self.pods.values()):
            self._kill(pod)

    # The API.

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                fake._serve_logs(self)

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                text = body.decode("utf-8")
                fake.requests.append(text)
                key = self.headers.get("Authorization", "").removeprefix("Bearer ")
                try:
                    query = json.loads(text)["query"]
                    if "podFindAndDeployOnDemand" in query and fake.create_delay:
                        time.sleep(fake.create_delay)
                    if "myself" in query and "pods" in query and fake.list_delay:
                        time.sleep(fake.list_delay)
                    status, answer = fake.answer(query, key)
                except GraphQLSyntaxError as error:
                    status, answer = 400, {"errors": [{"message": f"Syntax Error: {error}"}]}
                if status == 0:  # drop the connection without an answer
                    self.close_connection = True
                    with contextlib.suppress(OSError):
                        self.connection.shutdown(socket.SHUT_RDWR)
                    return
                data = answer.encode() if isinstance(answer, str) else json.dumps(answer).encode()
                with contextlib.suppress(OSError):  # a client that died while it waited
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)

        return Handler

    def answer(self, query: str, key: str) -> tuple[int, Any]:
        with self._lock:
            if self._stopped:
                return 503, "stopped"
            pod_key = next((p for p in self.pods.values() if p.key == key), None)
            if key != self.api_key and pod_key is None:
                self.calls.append("unauthorized")
                return 401, "Unauthorized"
            if "podTerminate" in query:
                self.calls.append("terminate")
                pod_id = (argument(query, "podTerminate") or {}).get("podId")
                self.terminates.append((str(pod_id), "watchdog" if pod_key else "client"))
                if pod_key is not None and pod_key.id != pod_id:
                    return 200, {"errors": [{"message": "forbidden"}]}
                if pod_key is not None and self.failing_terminates > 0:
                    # GraphQL's shape of a failed field: errors, and data with the field null.
                    self.failing_terminates -= 1
                    return 200, {
                        "errors": [{"message": "Something went wrong. Please try again later."}],
                        "data": {"podTerminate": None},
                    }
                return self._terminate(pod_id, "watchdog" if pod_key else "client")
            if pod_key is not None:
                return 200, {"errors": [{"message": "a pod's key may only delete its pod"}]}
            if "podFindAndDeployOnDemand" in query:
                self.calls.append("create")
                return self._create(argument(query, "podFindAndDeployOnDemand") or {})
            if "secretCreate" in query:
                self.calls.append("secret")
                spec = argument(query, "secretCreate") or {}
                if spec["name"] in self.secrets:
                    return 200, {"errors": [{"message": "a secret with this name exists"}]}
                secret_id = "sec" + secrets.token_hex(6)  # an id, never the name
                self.secrets[spec["name"]] = spec["value"]
                self.secret_ids[secret_id] = spec["name"]
                answer = {"id": secret_id, "name": spec["name"], "description": None}
                return 200, {"data": {"secretCreate": answer}}
            if "secretDelete" in query:
                self.calls.append("secret")
                match = re.search(r'secretDelete\s*\(\s*id\s*:\s*"([^"]*)"\s*\)', query)
                name = self.secret_ids.pop(match.group(1), None) if match else None
                if name is None:
                    return 200, {"errors": [{"message": "secret not found"}],
                                 "data": {"secretDelete": None}}  # fmt: skip
                self.secrets.pop(name, None)
                return 200, {"data": {"secretDelete": None}}
            if re.search(r"\bpod\s*\(\s*input", query):
                self.calls.append("get")
                pod_id = (argument(query, "pod") or {}).get("podId")
                if self.flaky_gets > 0:
                    self.flaky_gets -= 1
                    return 502, "<html>502 Bad Gateway</html>"
                pod = self.pods.get(pod_id or "")
                if pod is None or self.glitch_not_found > 0:
                    self.glitch_not_found -= pod is not None
                    return 200, {"data": {"pod": None}}
                pod.gets += 1
                return 200, {"data": {"pod": pod.describe(pod.gets > self.port_delay)}}
            if "gpuTypes" in query:
                self.calls.append("gpus")
                return 200, {"data": {"gpuTypes": self._gpus()}}
            if "dataCenters" in query:
                self.calls.append("datacenters")
                return 200, {"data": {"dataCenters": DATA_CENTERS}}
            if "networkVolumes" in query:
                self.calls.append("volumes")
                volumes = [{"id": "vol123", "name": "models", "size": 100,
                            "dataCenterId": "EU-RO-1"}]  # fmt: skip
                return 200, {"data": {"myself": {"networkVolumes": volumes}}}
            if "pods" in query:
                self.calls.append("list")
                pods = [p.describe(p.gets > self.port_delay) for p in self.pods.values()]
                return 200, {"data": {"myself": {"pods": pods}}}
            self.calls.append("unknown")
            return 200, {"errors": [{"message": "unknown query"}]}

    def _gpus(self) -> list[dict[str, Any]]:
        gpus = []
        for gpu in GPU_TYPES:
            stock = self.stock.get(gpu["id"], "High")
            gpus.append(
                {
                    **gpu,
                    "secureCloud": True,
                    "communityCloud": True,
                    "lowestPrice": {
                        # Runpod's docs: "High", "Medium", "Low" or "None" (a string).
                        "stockStatus": stock,
                        "uninterruptablePrice": gpu["securePrice"],
                    },
                }
            )
        return gpus

    def _create(self, spec: dict[str, Any]) -> tuple[int, Any]:
        gpu_type = spec.get("gpuTypeId", "")
        known = {gpu["id"]: gpu for gpu in GPU_TYPES}
        if self.no_credit:
            return 200, {"errors": [{"message": NO_CREDIT}]}
        if gpu_type in self.forbidden:
            return 200, {"errors": [{"message": f"Forbidden: {gpu_type} is not allowed"}]}
        if gpu_type not in known:
            return 200, {"errors": [{"message": f"invalid gpuTypeId {gpu_type}"}]}
        full = spec.get("dataCenterId") in self.full_data_centers
        if gpu_type in self.no_capacity or full or spec.get("cloudType") != "SECURE":
            return 200, {"errors": [{"message": NO_CAPACITY}]}
        env = {item["key"]: item["value"] for item in spec.get("env", [])}
        pod = Pod(
            id=secrets.token_hex(7),
            name=spec["name"],
            gpu_type=gpu_type,
            cost=known[gpu_type]["securePrice"],
            env=env,
            docker_args=spec.get("dockerArgs", ""),
            dir=self.root / "pods",
            ports={
                int(entry.split("/")[0]): _free_port()
                for entry in str(spec.get("ports") or "").split(",")
                if entry.strip().endswith("/tcp")
            },
            key="rpa_POD" + secrets.token_hex(12),
            gpu_count=int(spec.get("gpuCount") or 1),
        )
        pod.dir = self.root / "pods" / pod.id
        self.pods[pod.id] = pod
        self._boot(pod)
        answer = {"data": {"podFindAndDeployOnDemand": {"id": pod.id, "costPerHr": pod.cost,
                                                        "machineId": "m1"}}}  # fmt: skip
        if self.dropped_creates > 0:
            self.dropped_creates -= 1
            return 0, None
        if self.null_creates > 0:
            self.null_creates -= 1
            return 200, {"data": {"podFindAndDeployOnDemand": None}}
        if self.ambiguous_creates > 0:
            self.ambiguous_creates -= 1
            return 502, "<html>502 Bad Gateway</html>"
        return 200, answer

    def _terminate(self, pod_id: str | None, by: str) -> tuple[int, Any]:
        pod = self.pods.pop(pod_id or "", None)
        if pod is None:
            return 200, {"errors": [{"message": "pod not found"}]}
        self.deleted[pod.id] = pod
        self.terminated_by[pod.id] = by
        # The pod's own processes end after the answer (a watchdog deleting its pod must
        # hear back first, as over the network).
        threading.Timer(0.2, self._kill, args=(pod,)).start()
        return 200, {"data": {"podTerminate": None}}

    # The pods.

    def _boot(self, pod: Pod) -> None:
        home = pod.dir / "root"
        home.mkdir(parents=True)
        if self.image_sshd is not None:
            self._image_entrypoint(pod, self.image_sshd)
        env = {k: self._resolve(v) for k, v in pod.env.items()}
        session_env = {"HOME": str(home), **self.pod_env}
        env.update(
            {
                # This machine's, with /usr/sbin: the pod's sshd is the one the tests found.
                "PATH": search_path(os.environ.get("PATH", os.defpath)),
                "HOME": str(home),
                "RUNPOD_POD_ID": pod.id,
                "RUNPOD_API_KEY": pod.key,
                "OVERBRAINER_POD_ROOT": str(pod.dir),
                # The port the pod's sshd listens on, private, as the public one it maps to.
                "OVERBRAINER_SSH_PORT": str(
                    self._public(pod, int(env.get("OVERBRAINER_SSH_PORT") or 22))
                ),
                "OVERBRAINER_SSHD_EXTRA": "ListenAddress 127.0.0.1\nSetEnv "
                + " ".join(f'"{k}={v}"' for k, v in session_env.items()),  # spaces too
            }
        )
        if self.shell is not None:
            bin_dir = pod.dir / "bin"
            bin_dir.mkdir()
            if Path(self.shell).name == "busybox":
                (bin_dir / "sh").write_text(f'#!/bin/sh\nexec {shlex.quote(self.shell)} sh "$@"\n')
                (bin_dir / "sh").chmod(0o755)
            else:
                (bin_dir / "sh").symlink_to(self.shell)
            env["PATH"] = f"{bin_dir}:{env['PATH']}"
        with (pod.dir / "container.log").open("ab") as log:
            pod.process = subprocess.Popen(
                ["sh", "-c", pod.docker_args],
                cwd=pod.dir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )

    def _public(self, pod: Pod, private: int) -> int:
        """The loopback port standing for the pod's ``private`` one (exposed or not)."""
        if private not in pod.ports:
            pod.ports[private] = _free_port()
        return pod.ports[private]

    def _image_entrypoint(self, pod: Pod, port: int) -> None:
        """What axolotl-cloud's entrypoint does before the pod's command: with a
        ``PUBLIC_KEY``, the image's own sshd on ``port`` (its own host key): here a
        listener that greets and hangs up."""
        if not pod.env.get("PUBLIC_KEY"):
            return
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self._public(pod, port)))
        listener.listen()
        pod.image_sshd = listener

        def serve() -> None:
            while True:
                try:
                    connection, _ = listener.accept()
                except OSError:
                    return
                with contextlib.suppress(OSError), connection:
                    connection.sendall(b"SSH-2.0-OpenSSH_image\r\n")

        threading.Thread(target=serve, daemon=True).start()

    def _resolve(self, value: str) -> str:
        def secret(match: re.Match[str]) -> str:
            return "" if self.drop_secrets else self.secrets.get(match.group(1), "")

        return re.sub(r"\{\{\s*RUNPOD_SECRET_(\w+)\s*\}\}", secret, value)

    def _kill(self, pod: Pod) -> None:
        """Every process of the pod, found by its working directory or command line."""
        if pod.image_sshd is not None:
            with contextlib.suppress(OSError):
                pod.image_sshd.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                pod.image_sshd.close()
        for _ in range(50):
            pids = _pids_of(pod.dir)
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.05)
        if pod.process is not None:
            with contextlib.suppress(Exception):
                pod.process.wait(timeout=5)

    # The REST log stream.

    @property
    def podlogs(self) -> PodLogs:
        """The log stream's state and knobs, made on first use."""
        if "_podlogs" not in self.__dict__:
            self.__dict__["_podlogs"] = PodLogs()
        return self.__dict__["_podlogs"]

    def log_feed(self, pod_id: str) -> PodLogFeed:
        """The log of ``pod_id``, made with Runpod's own first lines."""
        with self._lock:
            if pod_id not in self.podlogs.feeds:
                pod = self.pods.get(pod_id) or self.deleted[pod_id]
                feed = PodLogFeed(pod.dir / "container.log")
                feed.add("create container fake/image", "system", at=pod.created)
                feed.add("start container", "system", at=pod.created)
                for line in self.podlogs.boot_lines:
                    feed.add(line, "container", at=pod.created)
                self.podlogs.feeds[pod_id] = feed
            return self.podlogs.feeds[pod_id]

    def pod_log(self, pod_id: str, line: str, source: str = "container") -> str:
        """Add a line to the log of ``pod_id``; its cursor."""
        return self.log_feed(pod_id).add(line, source)

    def _serve_logs(self, handler: BaseHTTPRequestHandler) -> None:
        from urllib.parse import parse_qs, urlsplit

        parts = urlsplit(handler.path)
        match = re.fullmatch(r"/v1/pods/([^/]+)/logs", parts.path)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        cursor = handler.headers.get("Last-Event-ID")
        self.podlogs.requests.append({**query, **({"cursor": cursor} if cursor else {})})
        if self.podlogs.on_request is not None:
            self.podlogs.on_request()
        key = handler.headers.get("Authorization", "").removeprefix("Bearer ")

        def refuse(status: int, message: str) -> None:
            body = json.dumps({"error": message}).encode()
            handler.send_response(status)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            handler.wfile.write(body)

        if match is None:
            return refuse(404, "not found")
        if key != self.api_key:
            return refuse(401, "Unauthorized")
        pod_id = match.group(1)
        if pod_id not in self.pods:
            return refuse(404, f"pod {pod_id} not found")
        feed = self.log_feed(pod_id)
        source = query.get("source")
        if source not in (None, "container", "system"):
            return refuse(400, "source must be container or system")
        try:
            start = feed.start(query, cursor, cursor in self.podlogs.refused)
        except ValueError as error:
            return refuse(400, str(error))
        drop = self.podlogs.drops.pop(0) if self.podlogs.drops else None
        handler.protocol_version = "HTTP/1.1"
        handler.close_connection = True
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Cache-Control", "no-cache")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()

        def chunk(data: bytes) -> None:
            handler.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            handler.wfile.flush()

        at, sent, beat = start, 0, time.monotonic()
        try:
            while pod_id in self.pods:
                for event in feed.events_from(at):
                    at += 1
                    if source is not None and event.source != source:
                        continue
                    frame = event.frame()
                    if drop is not None and sent == drop:
                        chunk(frame[: len(frame) // 2])
                        handler.connection.shutdown(socket.SHUT_RDWR)
                        return None
                    chunk(frame)
                    self.podlogs.sent.append(event.cursor)
                    sent += 1
                if time.monotonic() - beat >= self.podlogs.keepalive:
                    chunk(b": keepalive\n\n")
                    beat = time.monotonic()
                time.sleep(0.02)
            chunk(b"")  # the pod is gone: the stream ends
        except OSError:
            return None  # the client went away

    def alive(self) -> list[Pod]:
        with self._lock:
            return list(self.pods.values())

    def wait_until(self, check: Any, timeout: float = 30, what: str = "it") -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            time.sleep(0.05)


@dataclass
class PodLogs:
    """The state of the REST log stream of the fake (``FakeRunpod.podlogs``)."""

    feeds: dict[str, PodLogFeed] = field(default_factory=dict)
    """The log of each pod, made on first use."""
    requests: list[dict[str, str]] = field(default_factory=list)
    """Each log request: its query and ``Last-Event-ID`` (as ``cursor``)."""
    drops: list[int] = field(default_factory=list)
    """For each next connection: after this many events, half an event, then the
    connection is cut."""
    keepalive: float = 0.3
    """Seconds between two keepalive comments of a stream."""
    refused: set[str] = field(default_factory=set)
    """Cursors answered 400 (ones Runpod no longer knows)."""
    sent: list[str] = field(default_factory=list)
    """The cursor of every event sent, in order, over all connections."""
    boot_lines: list[str] = field(default_factory=list)
    """Container lines every pod's log starts with, after Runpod's own."""
    on_request: Callable[[], None] | None = None
    """Called as each log request arrives, before it is answered."""


@dataclass
class LogEvent:
    cursor: str
    ts: str
    source: str
    line: str
    raw: bool = False

    def frame(self) -> bytes:
        data = (
            self.line
            if self.raw
            else json.dumps({"ts": self.ts, "source": self.source, "line": self.line})
        )
        return f"id: {self.cursor}\ndata: {data}\n\n".encode()


class PodLogFeed:
    """A pod's log as Runpod's stream serves it: Runpod's system lines, the lines a test
    adds, and what the pod's command prints (its ``container.log``)."""

    def __init__(self, container_log: Path) -> None:
        self.container_log = container_log
        self.offset = 0
        self.events: list[LogEvent] = []
        self._lock = threading.Lock()

    def add(self, line: str, source: str = "container", at: float | None = None,
            raw: bool = False) -> str:  # fmt: skip
        with self._lock:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at or time.time()))
            ts = f"{stamp}.{len(self.events):06d}Z"
            event = LogEvent(f"{ts}/{len(self.events) + 1:012d}", ts, source, line, raw)
            self.events.append(event)
            return event.cursor

    def _ingest(self) -> None:
        try:
            with self.container_log.open("rb") as log:
                log.seek(self.offset)
                data = log.read()
        except OSError:
            return
        complete = data[: data.rfind(b"\n") + 1]
        self.offset += len(complete)
        for raw in complete.splitlines():
            self.add(raw.decode("utf-8", "replace"))

    def events_from(self, index: int) -> list[LogEvent]:
        self._ingest()
        with self._lock:
            return self.events[index:]

    def start(self, query: dict[str, str], cursor: str | None, refused: bool) -> int:
        """The index of the first event to send: after ``cursor``, from ``since``, or the
        last ``tail`` (of the source asked for; 100 by default, 5000 at most)."""
        self._ingest()
        with self._lock:
            events = list(self.events)
        if cursor is not None:
            known = [i for i, event in enumerate(events) if event.cursor == cursor]
            if refused or not known:
                raise ValueError("invalid Last-Event-ID")
            return known[0] + 1
        if "since" in query:
            if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", query["since"]):
                raise ValueError("since must be an RFC 3339 time")
            return next((i for i, e in enumerate(events) if e.ts >= query["since"]), len(events))
        tail = query.get("tail", "100")
        if not tail.isdigit() or not 1 <= int(tail) <= 5000:
            raise ValueError("tail must be between 1 and 5000")
        source = query.get("source")
        mine = [i for i, event in enumerate(events) if source in (None, event.source)]
        return mine[-int(tail)] if len(mine) >= int(tail) else 0


def _pids_of(directory: Path) -> list[int]:
    mark = str(directory)
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            cmdline = (entry / "cmdline").read_bytes().decode("utf-8", "replace")
            state = (entry / "stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if state == "Z":
            continue
        if cwd == mark or cwd.startswith(mark + "/") or mark in cmdline:
            found.append(int(entry.name))
    return found


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
