"""The gauges of the machine a followed run's job runs on, from its samples
(:mod:`overbrainer.runs.machine`): the reference tool's names, labelled ``run_id`` (and
``mount``, ``gpu``, ``name``), gone once nothing follows the run."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Gauge

from overbrainer.runs.machine import MachineSample

RUN = ("run_id",)
MOUNT = ("run_id", "mount")
GPU = ("run_id", "gpu")


class MachineGauges:
    """The families, registered in ``registry``; ``set`` one run's sample, ``remove`` it."""

    def __init__(self, registry: CollectorRegistry) -> None:
        def gauge(name: str, doc: str, labels: tuple[str, ...]) -> Gauge:
            return Gauge(name, doc, list(labels), registry=registry)

        self.cpu_usage = gauge(
            "overbrainer_target_cpu_usage_ratio",
            "Share of the CPUs of a run's target busy since the previous sample, 0 to 1.",
            RUN,
        )
        self.cpu_load1 = gauge(
            "overbrainer_target_cpu_load1",
            "Load average over one minute on a run's target (the host's, even in a container).",
            RUN,
        )
        self.cpus = gauge(
            "overbrainer_target_cpus", "CPUs of a run's target: its container's quota, else nproc.",
            RUN,
        )
        self.memory_used = gauge(
            "overbrainer_target_memory_used_bytes",
            "Memory used on a run's target, page cache that can be dropped left out.",
            RUN,
        )
        self.memory_limit = gauge(
            "overbrainer_target_memory_limit_bytes",
            "Memory of a run's target: its container's limit, else the machine's.",
            RUN,
        )
        self.sampled = gauge(
            "overbrainer_target_sample_timestamp_seconds",
            "When the target of a run was last sampled, in Unix seconds (its clock).",
            RUN,
        )
        self.disk_used = gauge(
            "overbrainer_target_disk_used_bytes",
            "Bytes used on a file system of a run's target (its run directory's, and /); "
            "a network file system is left out.",
            MOUNT,
        )
        self.disk_size = gauge(
            "overbrainer_target_disk_size_bytes", "Size of a file system of a run's target.", MOUNT
        )
        self.gpu_utilization = gauge(
            "overbrainer_gpu_utilization_ratio",
            "Share of time a GPU of a run's target ran a kernel, 0 to 1.",
            GPU,
        )
        self.gpu_memory_used = gauge(
            "overbrainer_gpu_memory_used_bytes", "Memory used on a GPU of a run's target.", GPU
        )
        self.gpu_memory_total = gauge(
            "overbrainer_gpu_memory_total_bytes", "Memory of a GPU of a run's target.", GPU
        )
        self.gpu_temperature = gauge(
            "overbrainer_gpu_temperature_celsius", "Temperature of a GPU of a run's target.", GPU
        )
        self.gpu_power = gauge(
            "overbrainer_gpu_power_watts", "Power drawn by a GPU of a run's target.", GPU
        )
        self.gpu_power_limit = gauge(
            "overbrainer_gpu_power_limit_watts", "Power limit of a GPU of a run's target.", GPU
        )
        self.gpu_info = gauge(
            "overbrainer_gpu_info",
            "1 for a GPU of a run's target; name is its model.",
            ("run_id", "gpu", "name"),
        )
        self._series: dict[str, set[tuple[Gauge, tuple[str, ...]]]] = {}

    def set(self, run_id: str, sample: MachineSample) -> None:
        """The series of ``sample``, set in place; those of the run's previous sample that
        this one lacks (a GPU gone, a figure no longer given) removed after, so a scrape
        sees every series of one sample or the other."""
        now: set[tuple[Gauge, tuple[str, ...]]] = set()

        def put(gauge: Gauge, labels: tuple[str, ...], value: float | None) -> None:
            if value is not None:
                gauge.labels(*labels).set(value)
                now.add((gauge, labels))

        run = (run_id,)
        cpu, memory = sample.cpu, sample.memory
        put(self.cpu_usage, run, cpu.usage if cpu else None)
        put(self.cpu_load1, run, cpu.load1 if cpu else None)
        put(self.cpus, run, cpu.cpus if cpu else None)
        put(self.memory_used, run, memory.used_bytes if memory else None)
        put(self.memory_limit, run, memory.limit_bytes if memory else None)
        put(self.sampled, run, sample.time)
        for disk in sample.disks:
            if not disk.shared:  # a network volume's figures are the whole cluster's
                put(self.disk_used, (run_id, disk.mount), disk.used_bytes)
                put(self.disk_size, (run_id, disk.mount), disk.size_bytes)
        for gpu in sample.gpus:
            one = (run_id, str(gpu.index))
            put(self.gpu_utilization, one, gpu.utilization)
            put(self.gpu_memory_used, one, gpu.memory_used_bytes)
            put(self.gpu_memory_total, one, gpu.memory_total_bytes)
            put(self.gpu_temperature, one, gpu.temperature_celsius)
            put(self.gpu_power, one, gpu.power_watts)
            put(self.gpu_power_limit, one, gpu.power_limit_watts)
            put(self.gpu_info, (*one, gpu.name), 1)
        for gauge, labels in self._series.get(run_id, set()) - now:
            gauge.remove(*labels)
        self._series[run_id] = now

    def remove(self, run_id: str) -> None:
        """Every series of the run: nothing follows it any more."""
        for gauge, labels in self._series.pop(run_id, set()):
            gauge.remove(*labels)
