"""The machine sampler (``machine_sample.py``) on this machine's real ``/proc``, with a fake
``nvidia-smi`` and a fake cgroup, and the runner that writes its samples beside the job."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import time
from pathlib import Path

from tests.helpers.jobs import write_job

from overbrainer.job import wire
from overbrainer.job.layout import JOB_FILE, MACHINE_FILE, MACHINE_SAMPLER, RUNNER
from overbrainer.job.scripts import sampler_source
from overbrainer.job.target import machine_sample
from overbrainer.job.target.machine_sample import Sampler
from overbrainer.runs.machine import parse_sample

FAKE_NVIDIA_SMI = Path(__file__).parent / "fake_nvidia_smi"
MIB = 1 << 20


def test_the_sampler_is_python_3_7_and_stdlib_only():
    tree = ast.parse(sampler_source(), feature_version=(3, 7))
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in (node.names if isinstance(node, ast.Import) else [ast.alias(node.module)])
    }
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}


def test_this_machine_gives_sane_gauges(tmp_path):
    sampler = Sampler(str(tmp_path), nvidia_smi=str(tmp_path / "no-nvidia-smi"))
    first = sampler.sample()
    assert first["cpu"]["usage"] is None  # a ratio between two samples: none yet
    time.sleep(0.3)
    sample = sampler.sample()
    cpu, memory = sample["cpu"], sample["memory"]
    assert 0 <= cpu["usage"] <= 1
    assert cpu["load1"] >= 0 and cpu["cpus"] > 0
    assert 0 < memory["used_bytes"] <= memory["limit_bytes"]
    mounts = [disk["mount"] for disk in sample["disks"]]
    assert "/" in mounts and len(mounts) == len(set(mounts))
    for disk in sample["disks"]:
        assert 0 <= disk["used_bytes"] <= disk["size_bytes"]
    assert abs(sample["time"] - time.time()) < 60
    assert sample["gpus"] == []


def test_a_fake_nvidia_smi_gives_the_gpu_gauges(tmp_path):
    gpus = Sampler(str(tmp_path), nvidia_smi=str(FAKE_NVIDIA_SMI)).gpus()
    assert gpus == [
        {
            "index": 0,
            "name": "NVIDIA H100 80GB HBM3",
            "utilization": 0.87,
            "memory_used_bytes": 40000 * MIB,
            "memory_total_bytes": 81559 * MIB,
            "temperature_celsius": 61.0,
            "power_watts": 312.45,
            "power_limit_watts": 700.0,
        },
        {
            "index": 1,
            "name": "NVIDIA H100 80GB HBM3",
            "utilization": None,  # [N/A]
            "memory_used_bytes": 1024 * MIB,
            "memory_total_bytes": 81559 * MIB,
            "temperature_celsius": 35.0,
            "power_watts": None,
            "power_limit_watts": 700.0,
        },
    ]


def test_without_nvidia_smi_there_are_no_gpus_and_no_error(tmp_path):
    sampler = Sampler(str(tmp_path), nvidia_smi=str(tmp_path / "nowhere" / "nvidia-smi"))
    assert sampler.sample()["gpus"] == []


def test_a_hung_nvidia_smi_is_asked_no_more(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_NVIDIA_SMI_HANG", "1")
    monkeypatch.setattr(machine_sample, "GPU_TIMEOUT_S", 0.3)
    sampler = Sampler(str(tmp_path), nvidia_smi=str(FAKE_NVIDIA_SMI))
    assert sampler.gpus() == []
    assert sampler.gpus_stuck
    started = time.monotonic()
    assert sampler.gpus() == []
    assert time.monotonic() - started < 0.2  # not asked again


def _cgroup_v2(root: Path, usage_usec: int) -> None:
    root.mkdir(exist_ok=True)
    (root / "cpu.max").write_text("150000 100000\n")
    (root / "cpu.stat").write_text(f"usage_usec {usage_usec}\nuser_usec 1\nsystem_usec 1\n")
    (root / "memory.max").write_text(f"{1 << 30}\n")
    (root / "memory.current").write_text(f"{512 * MIB}\n")
    (root / "memory.stat").write_text(f"anon 1\ninactive_file {128 * MIB}\nactive_file 2\n")


def test_a_container_s_cgroup_v2_quota_and_limit_are_read(tmp_path):
    cgroup = tmp_path / "cgroup"
    _cgroup_v2(cgroup, 0)
    sampler = Sampler(str(tmp_path), cgroup=str(cgroup), nvidia_smi=str(tmp_path / "none"))
    sampler.cpu()
    _cgroup_v2(cgroup, 150_000)  # 0.15 s of CPU over ~0.2 s of 1.5 CPUs: about half busy
    time.sleep(0.2)
    sample = sampler.sample()
    assert sample["cpu"]["cpus"] == 1.5 and sample["cpu"]["container"] is True
    assert 0.2 < sample["cpu"]["usage"] <= 0.5
    assert sample["memory"] == {
        "used_bytes": (512 - 128) * MIB,  # the page cache the kernel can drop left out
        "limit_bytes": 1 << 30,
        "container": True,
    }


def test_a_cgroup_v1_limit_is_read_and_no_limit_is_the_machine_s(tmp_path):
    cgroup = tmp_path / "cgroup"
    (cgroup / "memory").mkdir(parents=True)
    (cgroup / "cpu").mkdir()
    (cgroup / "cpu" / "cpu.cfs_quota_us").write_text("200000\n")
    (cgroup / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    (cgroup / "memory" / "memory.limit_in_bytes").write_text(f"{2 << 30}\n")
    (cgroup / "memory" / "memory.usage_in_bytes").write_text(f"{300 * MIB}\n")
    (cgroup / "memory" / "memory.stat").write_text(f"total_inactive_file {100 * MIB}\n")
    sampler = Sampler(str(tmp_path), cgroup=str(cgroup))
    assert sampler.quota() == 2.0
    assert sampler.memory() == {
        "used_bytes": 200 * MIB,
        "limit_bytes": 2 << 30,
        "container": True,
    }
    (cgroup / "memory" / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    (cgroup / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    assert sampler.quota() is None
    assert sampler.memory()["container"] is False  # /proc/meminfo: the machine's


def test_the_runner_writes_samples_while_a_stage_runs(tmp_path):
    job = tmp_path / "job"
    write_job(job, "sleep 0.6")
    (job / MACHINE_SAMPLER).write_text(sampler_source(), encoding="utf-8")
    description = json.loads((job / JOB_FILE).read_text())
    (job / JOB_FILE).write_text(json.dumps({**description, "machine_sample_s": 0.2}))
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "nvidia-smi").symlink_to(FAKE_NVIDIA_SMI)
    env = {"PATH": f"{fake_bin}:/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, str(job / RUNNER)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stdout
    sample = parse_sample((job / MACHINE_FILE).read_text())
    assert sample is not None
    assert sample.cpu is not None and sample.cpu.usage is not None  # sampled more than once
    assert [gpu.name for gpu in sample.gpus] == ["NVIDIA H100 80GB HBM3"] * 2
    assert any(disk.mount == "/" for disk in sample.disks)


def test_a_job_without_the_sampler_runs_as_before(tmp_path):
    job = tmp_path / "job"
    write_job(job, "true")
    done = subprocess.run(
        [sys.executable, str(job / RUNNER)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0
    assert not (job / MACHINE_FILE).exists()


def test_the_status_script_brings_the_latest_sample(tmp_path):
    (tmp_path / "exit_code").write_text("0\n")
    (tmp_path / MACHINE_FILE).write_text('{"format": 1}')
    (tmp_path / "metrics.jsonl").write_text('{"a": 1}\n')
    done = subprocess.run(
        ["sh", "-c", wire.status_script(str(tmp_path), offset=0)],
        capture_output=True,
        timeout=30,
        check=True,
    )
    _, _, _, machine, size, rest = wire.parse_status(done.stdout)
    assert (machine, size, rest) == ('{"format": 1}', 9, b'{"a": 1}\n')
