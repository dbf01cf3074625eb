"""A one-node Slurm on this machine, for tests and benchmarks, from Debian's packages.

It makes everything under one directory: a munge key and a ``munged`` with its own socket,
a ``slurm.conf`` (controller and node on 127.0.0.1, ports chosen free, no accounting
database, no cgroups: processes tracked by ancestry), then ``slurmctld -D`` and
``slurmd -D``. Commands find it through ``SLURM_CONF`` (``cluster.env``). ``stop`` cancels
what is still queued or running, then ends exactly the daemons it started, by pid (SIGTERM,
then SIGKILL).

    with LocalSlurm() as cluster:
        subprocess.run(["sinfo"], env={**os.environ, **cluster.env})
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
PROGRAMS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "scancel")
NODE = "node1"
PARTITION = "debug"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def find_program(name: str) -> str | None:
    """``name`` on PATH or in an ``sbin`` directory (the daemons live there)."""
    path = os.pathsep.join([os.environ.get("PATH", os.defpath), "/usr/sbin", "/sbin"])
    return shutil.which(name, path=path)


class LocalSlurm:
    """One controller and one node (``node1``, partition ``debug``) with ``cpus`` CPUs."""

    def __init__(self, cpus: int = 8, kill_wait_s: int = 30, root: Path | None = None) -> None:
        self.cpus = cpus
        self.kill_wait_s = kill_wait_s
        self.root = Path(root or tempfile.mkdtemp(prefix="obslurm-"))
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        """What a Slurm command needs to reach this cluster."""
        return {"SLURM_CONF": str(self.conf)}

    def _program(self, name: str) -> str:
        found = find_program(name)
        if found is None:
            raise RuntimeError(f"`{name}` is not installed (Debian: slurmctld slurmd munge)")
        return found

    def _write_config(self) -> None:
        root = self.root
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        for name in ("munge", "state", "spool", "log"):
            (root / name).mkdir(mode=0o700, exist_ok=True)
        key = root / "munge" / "munge.key"
        descriptor = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "wb") as file:
            file.write(os.urandom(1024))
        user = getpass.getuser()
        host = socket.gethostname().split(".")[0]  # slurmctld runs only where it is named
        self.conf.write_text(
            f"""\
ClusterName=overbrainer
SlurmctldHost={host}(127.0.0.1)
MailProg=/bin/true
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
SlurmUser={user}
SlurmdUser={user}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root / "munge" / "munge.socket"}
StateSaveLocation={root / "state"}
SlurmdSpoolDir={root / "spool"}
SlurmctldPidFile={root / "slurmctld.pid"}
SlurmdPidFile={root / "slurmd.pid"}
SlurmctldLogFile={root / "log" / "slurmctld.log"}
SlurmdLogFile={root / "log" / "slurmd.log"}
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
KillWait={self.kill_wait_s}
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1
MinJobAge=600
NodeName={NODE} NodeHostname={host} NodeAddr=127.0.0.1 CPUs={self.cpus} RealMemory=1000
PartitionName={PARTITION} Nodes={NODE} Default=YES MaxTime=INFINITE State=UP
""",
            encoding="utf-8",
        )

    def start(self) -> LocalSlurm:
        """Start munged, slurmctld and slurmd; return once the node takes jobs."""
        self._write_config()
        munge = self.root / "munge"
        env = {**os.environ, **self.env}
        logs = self.root / "log"
        self._spawn(
            "munged",
            [
                self._program("munged"),
                "--foreground",
                "--force",
                f"--socket={munge / 'munge.socket'}",
                f"--key-file={munge / 'munge.key'}",
                f"--pid-file={munge / 'munged.pid'}",
                f"--log-file={logs / 'munged.log'}",
                f"--seed-file={munge / 'munged.seed'}",
            ],
            env,
        )
        self._wait((munge / "munge.socket").exists, "munged's socket")
        self._spawn("slurmctld", [self._program("slurmctld"), "-D", "-i"], env)
        self._spawn("slurmd", [self._program("slurmd"), "-D", "-N", NODE], env)
        self._wait(self._idle, "the node to be idle")
        return self

    def _spawn(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        with (self.root / "log" / f"{name}.out").open("ab") as out:
            self.processes[name] = subprocess.Popen(
                argv,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def _wait(self, ready: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not ready():
            for name, process in self.processes.items():
                if process.poll() is not None:
                    raise RuntimeError(
                        f"{name} exited with code {process.returncode} while waiting for "
                        f"{what}; its log: {self.root / 'log'}"
                    )
            if time.monotonic() > deadline:
                raise RuntimeError(f"no {what} after {START_TIMEOUT_S:.0f} s: {self.root}/log")
            time.sleep(0.2)

    def command(self, *argv: str, check: bool = True) -> str:
        """A Slurm command's output, run against this cluster."""
        done = subprocess.run(
            [self._program(argv[0]), *argv[1:]],
            env={**os.environ, **self.env},
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip()}")
        return done.stdout

    def _idle(self) -> bool:
        done = subprocess.run(
            [self._program("sinfo"), "-h", "-n", NODE, "-o", "%T"],
            env={**os.environ, **self.env},
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        return done.returncode == 0 and done.stdout.strip() in ("idle", "mixed", "allocated")

    def jobs(self) -> list[str]:
        """The ids of the jobs still queued or running."""
        return self.command("squeue", "-h", "-o", "%i", check=False).split()

    def stop(self) -> None:
        """Cancel every job, then end the daemons started here, each by pid."""
        if "slurmctld" in self.processes and self.processes["slurmctld"].poll() is None:
            with contextlib.suppress(Exception):
                if self.jobs():
                    self.command("scancel", "--signal=KILL", "--full", *self.jobs(), check=False)
                    self.command("scancel", *self.jobs(), check=False)
                deadline = time.monotonic() + STOP_TIMEOUT_S
                while self.jobs() and time.monotonic() < deadline:
                    time.sleep(0.2)
        for name in ("slurmd", "slurmctld", "munged"):
            process = self.processes.pop(name, None)
            if process is None or process.poll() is not None:
                continue
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> LocalSlurm:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()
        self.remove()
