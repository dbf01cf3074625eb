"""The gauges of the machine a job runs on: one sample of its CPU, memory, disks and GPUs.

overbrainer copies this file beside ``run_job.py``; the runner samples with it while its
stages run and rewrites ``machine.json`` in the job directory, which the follow loop's poll
reads with the job's status. Like the runner it needs the standard library alone (Python
3.7 or newer) and reads only POSIX ``/proc``, the cgroup files and ``nvidia-smi``.

Inside a container ``/proc/meminfo`` and ``nproc`` describe the host: the container's
cgroup (v2, then v1) comes first where it sets a limit, ``/proc`` otherwise. A figure the
machine does not give (no ``/proc``, no GPU) is missing from the sample, never an error.

``python machine_sample.py [DIR]`` prints one sample (the disks of DIR and of ``/``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

FORMAT = 1
GPU_QUERY = (
    "index,name,utilization.gpu,memory.used,memory.total,temperature.gpu,power.draw,power.limit"
)
GPU_TIMEOUT_S = 5.0
"""``nvidia-smi`` may hang on a stuck driver: it gets this long, then is asked no more."""
MIB = 1 << 20
V1_UNLIMITED = 1 << 62
"""A cgroup v1 memory limit from 2^62 bytes on is no limit (v1 writes "none" as ~2^63)."""
NETWORK_TYPES = frozenset(
    {"nfs", "nfs4", "cifs", "smb3", "smbfs", "ceph", "glusterfs", "lustre", "9p"}
)
LOCAL_FUSE = frozenset({"fuse.fuse-overlayfs", "fuse.lxcfs", "fuse.gvfsd-fuse"})


def _read(path: str, limit: int = 1 << 16) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            return file.read(limit)
    except OSError:
        return None


def _number(text: str | None) -> float | None:
    try:
        return float(text.split()[0]) if text else None
    except (ValueError, IndexError):
        return None


def _field(text: str | None, name: str) -> float | None:
    """The number after ``name`` at the start of a line of ``text`` (``key value``)."""
    for line in (text or "").splitlines():
        words = line.split()
        if len(words) >= 2 and words[0].rstrip(":") == name:
            return _number(words[1])
    return None


class Sampler:
    """Samples the machine of the job in ``job_dir``; keeps the CPU counters of the last
    sample, since the usage is a ratio between two samples. The roots are parameters so a
    test can hand it a fake cgroup."""

    def __init__(
        self,
        job_dir: str,
        proc: str = "/proc",
        cgroup: str = "/sys/fs/cgroup",
        nvidia_smi: str = "nvidia-smi",
    ) -> None:
        self.job_dir = job_dir
        self.proc = proc
        self.cgroup = cgroup
        self.nvidia_smi = nvidia_smi
        self.gpus_stuck = False
        self._times: tuple[str, float, float] | None = None

    def sample(self) -> dict:
        """One sample, as ``machine.json`` holds it."""
        return {
            "format": FORMAT,
            "time": round(time.time(), 3),
            "cpu": self.cpu(),
            "memory": self.memory(),
            "disks": self.disks(),
            "gpus": self.gpus(),
        }

    # CPU.

    def _cgroup(self, *names: str) -> str | None:
        for name in names:
            text = _read(os.path.join(self.cgroup, name))
            if text is not None:
                return text
        return None

    def quota(self) -> float | None:
        """The container's CPU quota in CPUs (cgroup v2 ``cpu.max``, v1 CFS), if any."""
        text = self._cgroup("cpu.max")
        if text is not None:
            words = text.split()
            if len(words) >= 2 and words[0] != "max":
                quota, period = _number(words[0]), _number(words[1])
                if quota and period:
                    return quota / period
            return None
        quota = _number(self._cgroup("cpu/cpu.cfs_quota_us", "cpu,cpuacct/cpu.cfs_quota_us"))
        period = _number(self._cgroup("cpu/cpu.cfs_period_us", "cpu,cpuacct/cpu.cfs_period_us"))
        if quota is not None and quota > 0 and period:
            return quota / period
        return None

    def cpu(self) -> dict | None:
        quota = self.quota()
        cpus = quota if quota is not None else float(_nproc())
        load = _number(_read(os.path.join(self.proc, "loadavg")))
        now = self._cgroup_times(cpus) if quota is not None else None
        if now is None:
            now = self._proc_times()
        usage = None
        before = self._times
        if before is not None and now is not None and before[0] == now[0]:
            busy, total = now[1] - before[1], now[2] - before[2]
            if total > 0 and busy >= 0:
                usage = round(min(busy / total, 1.0), 4)
        self._times = now
        if load is None and now is None:
            return None
        return {"usage": usage, "load1": load, "cpus": cpus, "container": quota is not None}

    def _cgroup_times(self, cpus: float) -> tuple[str, float, float] | None:
        """Busy and available CPU seconds of the container: ``usage_usec`` of cgroup v2's
        ``cpu.stat`` (v1: ``cpuacct.usage`` in ns) against the clock times its quota."""
        busy = _field(self._cgroup("cpu.stat"), "usage_usec")
        if busy is not None:
            busy /= 1e6
        else:
            ns = _number(self._cgroup("cpuacct/cpuacct.usage", "cpu,cpuacct/cpuacct.usage"))
            busy = ns / 1e9 if ns is not None else None
        if busy is None:
            return None
        return (f"cgroup/{cpus}", busy, time.monotonic() * cpus)

    def _proc_times(self) -> tuple[str, float, float] | None:
        """Busy and total jiffies of every CPU, from the first line of ``/proc/stat``."""
        text = _read(os.path.join(self.proc, "stat"), 4096)
        words = (text or "").split("\n", 1)[0].split()
        if len(words) < 5 or words[0] != "cpu":
            return None
        try:
            # user nice system idle iowait irq softirq steal (guest time is in user already)
            values = [float(v) for v in words[1:9]]
        except ValueError:
            return None
        total = sum(values)
        idle = values[3] + (values[4] if len(values) > 4 else 0.0)
        return ("proc", total - idle, total)

    # Memory.

    def memory(self) -> dict | None:
        meminfo = _read(os.path.join(self.proc, "meminfo"))
        total = _field(meminfo, "MemTotal")
        total = total * 1024 if total is not None else None
        for limit_name, current_name, stat_name, inactive in (
            ("memory.max", "memory.current", "memory.stat", "inactive_file"),
            (
                "memory/memory.limit_in_bytes",
                "memory/memory.usage_in_bytes",
                "memory/memory.stat",
                "total_inactive_file",
            ),
        ):
            limit = _number(self._cgroup(limit_name))
            current = _number(self._cgroup(current_name))
            if limit is None or current is None or limit >= V1_UNLIMITED:
                continue
            if total is not None:
                limit = min(limit, total)
            dropped = _field(self._cgroup(stat_name), inactive) or 0.0
            return {
                "used_bytes": int(max(current - dropped, 0)),
                "limit_bytes": int(limit),
                "container": True,
            }
        available = _field(meminfo, "MemAvailable")
        if total is None or available is None:
            return None
        return {
            "used_bytes": int(max(total - available * 1024, 0)),
            "limit_bytes": int(total),
            "container": False,
        }

    # Disks.

    def disks(self) -> list:
        """The file systems of the job directory and of ``/`` (once when they are one)."""
        found: list = []
        types = _mount_types(os.path.join(self.proc, "self", "mounts"))
        for path in (self.job_dir, "/"):
            mount = _mount_point(path)
            if mount is None or any(disk["mount"] == mount for disk in found):
                continue
            try:
                fs = os.statvfs(mount)
            except OSError:
                continue
            fstype = types.get(mount)
            found.append(
                {
                    "mount": mount,
                    "fstype": fstype,
                    "shared": _shared(fstype),
                    "used_bytes": (fs.f_blocks - fs.f_bfree) * fs.f_frsize,
                    "size_bytes": fs.f_blocks * fs.f_frsize,
                    "available_bytes": fs.f_bavail * fs.f_frsize,
                }
            )
        return found

    # GPUs.

    def gpus(self) -> list:
        """The GPUs ``nvidia-smi`` lists; none without it, when it fails, or ever again
        once it hung (a stuck driver's ``nvidia-smi`` can outlive KILL: never pile them)."""
        if self.gpus_stuck:
            return []
        try:
            done = subprocess.run(
                [self.nvidia_smi, "--query-gpu=" + GPU_QUERY, "--format=csv,noheader,nounits"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                timeout=GPU_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            self.gpus_stuck = True
            return []
        except OSError:
            return []
        if done.returncode != 0:
            return []
        gpus = []
        for line in done.stdout.decode("utf-8", "replace").splitlines():
            gpu = _gpu(line)
            if gpu is not None:
                gpus.append(gpu)
        return gpus


def _nproc() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _mount_point(path: str) -> str | None:
    try:
        path = os.path.realpath(path)
        while not os.path.ismount(path):
            parent = os.path.dirname(path)
            if parent == path:
                break
            path = parent
    except OSError:
        return None
    return path


def _mount_types(path: str) -> dict:
    """Mount point -> file system type, the last mount on a point winning."""
    types = {}
    for line in (_read(path, 1 << 20) or "").splitlines():
        words = line.split()
        if len(words) >= 3:
            # /proc/mounts escapes a space in a mount point as \040
            types[words[1].replace("\\040", " ")] = words[2]
    return types


def _shared(fstype: str | None) -> bool:
    """A network file system (a Runpod network volume is FUSE ``mfs``): its figures are the
    whole cluster's, not what the run may use."""
    if fstype is None:
        return False
    return fstype in NETWORK_TYPES or (fstype.startswith("fuse.") and fstype not in LOCAL_FUSE)


def _gpu(line: str) -> dict | None:
    fields = [field.strip() for field in line.split(",")]
    if len(fields) < 8 or not fields[0].isdigit():
        return None

    def value(index: int, scale: float = 1.0) -> float | None:
        number = _number(fields[index])  # "[N/A]", "[Not Supported]": None
        return None if number is None else round(number * scale, 4)

    memory_used, memory_total = value(3, MIB), value(4, MIB)
    return {
        "index": int(fields[0]),
        "name": "".join(c for c in fields[1] if c.isprintable())[:100],
        "utilization": value(2, 0.01),
        "memory_used_bytes": None if memory_used is None else int(memory_used),
        "memory_total_bytes": None if memory_total is None else int(memory_total),
        "temperature_celsius": value(5),
        "power_watts": value(6),
        "power_limit_watts": value(7),
    }


def main(argv: list) -> int:
    sampler = Sampler(argv[0] if argv else os.getcwd())
    sampler.cpu()  # the first counters: the usage is measured over the next second
    time.sleep(1.0)
    print(json.dumps(sampler.sample(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
