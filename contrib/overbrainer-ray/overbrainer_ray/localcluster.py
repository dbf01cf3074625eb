"""A small Ray cluster on this machine, for tests and benchmarks: a head and worker nodes.

Every node is one ``ray start --block`` process started here, bound to 127.0.0.1, with
its own ports (chosen free), a small object store, no usage statistics, and a temporary
directory of its own (short: Ray's Unix sockets live under it). ``stop`` ends exactly
what it started: each ``ray start`` and every process below it, found by pid (never
``ray stop``, which ends every Ray process of the machine), SIGTERM then SIGKILL.

    with LocalCluster(workers=1) as cluster:
        print(cluster.address)    # http://127.0.0.1:PORT, the Jobs API
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0
OBJECT_STORE_BYTES = 80 * 1000 * 1000  # Ray's floor is 75 MB


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _ray() -> str:
    """The ``ray`` command of the Python running this (the Ray package's environment)."""
    beside = Path(sys.executable).with_name("ray")
    found = str(beside) if beside.exists() else shutil.which("ray")
    if not found:
        raise RuntimeError("the `ray` command is not installed beside this Python")
    return found


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        tree.setdefault(parent, []).append(int(entry.name))
    return tree


def _start_time(pid: int) -> str | None:
    try:
        return (Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split())[19]
    except (OSError, IndexError):
        return None


def descendants(pid: int) -> dict[int, str]:
    """``pid`` and every process below it, each with its start time (a recycled pid is
    another process: it is never signalled)."""
    tree, found, todo = _children(), {}, [pid]
    while todo:
        current = todo.pop()
        started = _start_time(current)
        if started is not None:
            found[current] = started
            todo += tree.get(current, [])
    return found


def _alive(processes: dict[int, str]) -> dict[int, str]:
    return {
        pid: started
        for pid, started in processes.items()
        if _start_time(pid) == started and not _zombie(pid)
    }


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


class LocalCluster:
    """A head node and ``workers`` more, each with ``cpus`` CPUs, on 127.0.0.1; ``gpus``
    declares logical GPUs on each node (Ray schedules by what a node declares: for trying
    GPU-shaped requests on a machine without one)."""

    def __init__(
        self, workers: int = 1, cpus: int = 1, gpus: int = 0, root: Path | None = None
    ) -> None:
        self.workers = workers
        self.cpus = cpus
        self.gpus = gpus
        self.root = Path(root or tempfile.mkdtemp(prefix="obray-", dir="/tmp"))
        self._taken: set[int] = set()
        self.gcs_port = self._port()
        self.dashboard_port = self._port()
        self.nodes: list[subprocess.Popen[bytes]] = []
        self.started: dict[int, str] = {}

    def _port(self) -> int:
        """A free port (the kernel's pick, among its ephemeral ports) not handed out yet."""
        while (port := _free_port()) in self._taken:
            pass
        self._taken.add(port)
        return port

    @property
    def address(self) -> str:
        """The Jobs API (the dashboard's HTTP address)."""
        return f"http://127.0.0.1:{self.dashboard_port}"

    @property
    def temp_dir(self) -> Path:
        return self.root / "ray"

    def _node(self, *args: str) -> None:
        env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
        log = (self.root / f"node-{len(self.nodes)}.log").open("ab")
        with log:
            node = subprocess.Popen(
                [_ray(), "start", "--block", "--disable-usage-stats", *args],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        self.nodes.append(node)
        self.started[node.pid] = _start_time(node.pid) or ""

    def _common(self) -> list[str]:
        return [
            "--node-ip-address=127.0.0.1",
            f"--num-cpus={self.cpus}",
            f"--num-gpus={self.gpus}",
            f"--object-store-memory={OBJECT_STORE_BYTES}",
            f"--dashboard-agent-listen-port={self._port()}",
            f"--metrics-export-port={self._port()}",
            f"--min-worker-port={self._worker_ports}",
            f"--max-worker-port={self._worker_ports + 99}",
        ]

    def start(self) -> LocalCluster:
        self.root.mkdir(parents=True, exist_ok=True)
        # Workers' ports below the kernel's ephemeral range (32768 and up), where the ports
        # picked above live: the two never meet.
        self._worker_ports = 20000 + (os.getpid() % 100) * 100
        self._node(
            "--head",
            f"--port={self.gcs_port}",
            "--include-dashboard=true",
            "--dashboard-host=127.0.0.1",
            f"--dashboard-port={self.dashboard_port}",
            f"--ray-client-server-port={self._port()}",
            f"--temp-dir={self.temp_dir}",
            *self._common(),
        )
        self._wait_for(lambda: self._nodes_alive() >= 1, "the head node")
        for _ in range(self.workers):
            self._worker_ports += 100
            self._node(f"--address=127.0.0.1:{self.gcs_port}", *self._common())
        self._wait_for(lambda: self._nodes_alive() >= 1 + self.workers, "the worker nodes")
        return self

    def _nodes_alive(self) -> int:
        """Nodes the cluster counts as alive (0 while the dashboard does not answer)."""
        try:
            with urllib.request.urlopen(  # noqa: S310 - the loopback dashboard
                f"{self.address}/nodes?view=summary", timeout=5
            ) as reply:
                summary = json.load(reply)["data"]["summary"]
        except (OSError, ValueError, KeyError, TypeError):
            return 0
        return sum(1 for node in summary if node.get("raylet", {}).get("state") == "ALIVE")

    def _wait_for(self, ready: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not ready():
            for node in self.nodes:
                if node.poll() is not None:
                    self.stop()
                    raise RuntimeError(
                        f"{what} exited with code {node.returncode}: see {self.root}"
                    )
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{what} did not come up in {START_TIMEOUT_S:.0f} s")
            time.sleep(0.5)

    def processes(self) -> dict[int, str]:
        """Every live process this cluster started (its nodes and what they started)."""
        found: dict[int, str] = {}
        for node in self.nodes:
            found.update(descendants(node.pid))
        return _alive(found)

    def stop(self) -> None:
        """End every process the cluster started, workers first, and reap the nodes."""
        everything = self.processes()
        for node in reversed(self.nodes):
            if node.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    node.send_signal(signal.SIGTERM)  # `ray start --block` stops its node
            with contextlib.suppress(subprocess.TimeoutExpired):
                node.wait(timeout=STOP_TIMEOUT_S)
        everything.update(self.processes())
        deadline = time.monotonic() + 5
        while _alive(everything) and time.monotonic() < deadline:
            time.sleep(0.2)
        for pid in _alive(everything):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for node in self.nodes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                node.wait(timeout=5)

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()
