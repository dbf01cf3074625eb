"""The gauges of the machine a run's job runs on, as the runner samples them
(:mod:`overbrainer.job.target.machine_sample`): read from a target's ``machine.json`` into types,
kept at home, and told as ``runs show``'s ``machine:`` block.

A sample comes from the target, so it is read defensively: anything that is not the
expected number is left out, never an error.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from overbrainer import files
from overbrainer.errors import UserError
from overbrainer.job.layout import MACHINE_FILE
from overbrainer.redact import escape_controls

SAMPLE_LIMIT = 64 << 10


@dataclass(frozen=True, slots=True)
class Cpu:
    """``usage``: share of the CPUs busy since the sample before (None on the first);
    ``load1``: the load average over a minute (the host's, even in a container); ``cpus``:
    the container's quota when it has one, else ``nproc``."""

    usage: float | None
    load1: float | None
    cpus: float | None


@dataclass(frozen=True, slots=True)
class Memory:
    """Bytes in use (page cache the kernel can drop left out) and in all: the container's
    limit when it has one, else the machine's."""

    used_bytes: int
    limit_bytes: int


@dataclass(frozen=True, slots=True)
class Disk:
    """The file system mounted at ``mount`` (the job directory's, and ``/``); ``shared``: a
    network file system, whose figures are the whole cluster's."""

    mount: str
    used_bytes: int
    size_bytes: int
    shared: bool = False


@dataclass(frozen=True, slots=True)
class Gpu:
    """One GPU, as ``nvidia-smi`` reports it; a figure it does not support is None."""

    index: int
    name: str
    utilization: float | None
    memory_used_bytes: int | None
    memory_total_bytes: int | None
    temperature_celsius: float | None
    power_watts: float | None
    power_limit_watts: float | None


@dataclass(frozen=True, slots=True)
class MachineSample:
    """One sample of the machine, taken at ``time`` (Unix seconds, the target's clock)."""

    time: float | None
    cpu: Cpu | None
    memory: Memory | None
    disks: tuple[Disk, ...]
    gpus: tuple[Gpu, ...]


def parse_sample(text: str) -> MachineSample | None:
    """The sample in ``text`` (a ``machine.json``), or None when it is not one."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("format") != 1:
        return None
    cpu = _dict(data.get("cpu"))
    memory = _dict(data.get("memory"))
    used, limit = _count(memory.get("used_bytes")), _count(memory.get("limit_bytes"))
    return MachineSample(
        time=_real(data.get("time")),
        cpu=Cpu(_ratio(cpu.get("usage")), _real(cpu.get("load1")), _real(cpu.get("cpus")))
        if cpu
        else None,
        memory=Memory(used, limit) if used is not None and limit is not None else None,
        disks=tuple(d for d in map(_disk, _list(data.get("disks"))) if d is not None),
        gpus=tuple(g for g in map(_gpu, _list(data.get("gpus"))) if g is not None),
    )


def _disk(item: Any) -> Disk | None:
    disk = _dict(item)
    mount = disk.get("mount")
    used, size = _count(disk.get("used_bytes")), _count(disk.get("size_bytes"))
    if not isinstance(mount, str) or not mount or used is None or size is None:
        return None
    return Disk(escape_controls(mount), used, size, disk.get("shared") is True)


def _gpu(item: Any) -> Gpu | None:
    gpu = _dict(item)
    index = _count(gpu.get("index"))
    name = gpu.get("name")
    if index is None or not isinstance(name, str):
        return None
    return Gpu(
        index=index,
        name=escape_controls(name)[:100],
        utilization=_ratio(gpu.get("utilization")),
        memory_used_bytes=_count(gpu.get("memory_used_bytes")),
        memory_total_bytes=_count(gpu.get("memory_total_bytes")),
        temperature_celsius=_real(gpu.get("temperature_celsius")),
        power_watts=_real(gpu.get("power_watts")),
        power_limit_watts=_real(gpu.get("power_limit_watts")),
    )


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value[:64] if isinstance(value, list) else []


def _real(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _ratio(value: Any) -> float | None:
    number = _real(value)
    return number if number is not None and 0 <= number <= 1 else None


def _count(value: Any) -> int | None:
    number = _real(value)
    return int(number) if number is not None and number >= 0 else None


# At home.


def read_machine(run_dir: Path) -> MachineSample | None:
    """The latest sample of the run in ``run_dir``: the runner's own file for a job that runs
    here, the follower's copy for one that runs elsewhere; None without one."""
    try:
        text = files.read_text(run_dir / MACHINE_FILE, MACHINE_FILE, SAMPLE_LIMIT)
    except UserError:
        return None
    return parse_sample(text) if text is not None else None


def keep_machine(run_dir: Path, text: str) -> None:
    """Keep ``text``, the latest sample of a job running elsewhere, as the run's
    ``machine.json`` at home; a failure only means no gauges there."""
    try:
        files.write_atomic(run_dir / MACHINE_FILE, text.encode("utf-8"), MACHINE_FILE)
    except UserError:
        return


# Told.


def _cpu(cpu: Cpu) -> str:
    """``42% busy, of 7.5 CPUs, load 3.25``; the first sample has no busy share (it is
    measured between two)."""
    parts = [
        f"{cpu.usage * 100:.0f}% busy"
        if cpu.usage is not None
        else "busy: not known yet (one sample)"
    ]
    if cpu.cpus is not None:
        parts.append(f"of {cpu.cpus:g} CPUs")
    if cpu.load1 is not None:
        parts.append(f"load {cpu.load1:.2f}")
    return ", ".join(parts)


def machine_lines(sample: MachineSample, now: float | None = None) -> list[str]:
    """``runs show``'s ``machine:`` block: CPU, memory, each disk, each GPU."""
    age = ""
    if sample.time is not None:
        seconds = max((time.time() if now is None else now) - sample.time, 0.0)
        age = f" (sampled {_ago(seconds)} ago)"
    lines = [f"  machine:{age}"]
    if sample.cpu is not None:
        lines.append("    cpu: " + _cpu(sample.cpu))
    if sample.memory is not None:
        lines.append(
            f"    memory: {_bytes(sample.memory.used_bytes)} of {_bytes(sample.memory.limit_bytes)}"
        )
    for disk in sample.disks:
        shared = " (network: the whole volume's)" if disk.shared else ""
        lines.append(
            f"    disk {disk.mount}: {_bytes(disk.used_bytes)} of {_bytes(disk.size_bytes)}{shared}"
        )
    for gpu in sample.gpus:
        parts = []
        if gpu.utilization is not None:
            parts.append(f"{gpu.utilization * 100:.0f}% busy")
        if gpu.memory_used_bytes is not None and gpu.memory_total_bytes is not None:
            parts.append(
                f"memory {_bytes(gpu.memory_used_bytes)} of {_bytes(gpu.memory_total_bytes)}"
            )
        if gpu.temperature_celsius is not None:
            parts.append(f"{gpu.temperature_celsius:g} °C")
        if gpu.power_watts is not None:
            limit = f" of {gpu.power_limit_watts:g}" if gpu.power_limit_watts is not None else ""
            parts.append(f"{gpu.power_watts:g}{limit} W")
        lines.append(f"    gpu {gpu.index} {gpu.name}: " + ", ".join(parts))
    return lines


def machine_brief(sample: MachineSample) -> list[str]:
    """The gauges in two lines, where ``machine_lines`` does not fit (a terminal of 24
    rows): CPU, memory and disks in one, the GPUs in the other."""
    host = []
    if sample.cpu is not None and sample.cpu.usage is not None:
        host.append(f"cpu {sample.cpu.usage * 100:.0f}%")
    if sample.memory is not None:
        used, limit = sample.memory.used_bytes, sample.memory.limit_bytes
        host.append(f"memory {_bytes(used)} of {_bytes(limit)}")
    host += [
        f"disk {disk.mount} {_bytes(disk.used_bytes)} of {_bytes(disk.size_bytes)}"
        for disk in sample.disks
    ]
    gpus = []
    for gpu in sample.gpus:
        parts = [f"gpu {gpu.index}"]
        if gpu.utilization is not None:
            parts.append(f"{gpu.utilization * 100:.0f}%")
        if gpu.memory_used_bytes is not None and gpu.memory_total_bytes is not None:
            parts.append(f"{_bytes(gpu.memory_used_bytes)} of {_bytes(gpu.memory_total_bytes)}")
        gpus.append(" ".join(parts))
    return [line for line in (", ".join(host), "; ".join(gpus)) if line]


def _bytes(count: int) -> str:
    if count < 1024:
        return f"{count} B"
    value = count / 1024
    for unit in ("KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


def _ago(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
