"""The gauges of a followed run's machine on the endpoint: the reference tool's names,
labelled by run (and mount, GPU), gone with what a sample no longer has and once nothing
follows the run; and end to end, from the runner's samples of a real `train`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from contextlib import suppress
from pathlib import Path

from tests.helpers.prometheus import free_port, sample, scrape, scraped
from tests.helpers.run_dirs import write_examples
from tests.helpers.seeing_project import TRAINING
from tests.helpers.trainer import BOOT

from overbrainer.events import TrainEnd, TrainMachine
from overbrainer.prometheus.collect import ProjectMetrics
from overbrainer.runs.machine import parse_sample
from overbrainer.testing.fake_axolotl import make_fake_venv

RUN = "demo_20260922-143005"
FAKE_NVIDIA_SMI = Path(__file__).parents[1] / "job" / "fake_nvidia_smi"
GIB = 1 << 30
H100 = "NVIDIA H100 80GB HBM3"

NAMES = (
    "overbrainer_target_cpu_usage_ratio",
    "overbrainer_target_cpu_load1",
    "overbrainer_target_cpus",
    "overbrainer_target_memory_used_bytes",
    "overbrainer_target_memory_limit_bytes",
    "overbrainer_target_sample_timestamp_seconds",
)
GPU_NAMES = (
    "overbrainer_gpu_utilization_ratio",
    "overbrainer_gpu_memory_used_bytes",
    "overbrainer_gpu_memory_total_bytes",
    "overbrainer_gpu_temperature_celsius",
    "overbrainer_gpu_power_watts",
    "overbrainer_gpu_power_limit_watts",
)


def machine(gpus: int = 1, **extra) -> dict:
    return {
        "format": 1,
        "time": 1000.5,
        "cpu": {"usage": 0.25, "load1": 3.5, "cpus": 8, "container": True},
        "memory": {"used_bytes": 3 * GIB, "limit_bytes": 16 * GIB, "container": True},
        "disks": [
            {"mount": "/workspace", "shared": False, "used_bytes": 5 * GIB, "size_bytes": 50 * GIB},
            {"mount": "/", "shared": False, "used_bytes": 9 * GIB, "size_bytes": 20 * GIB},
            {"mount": "/volume", "shared": True, "used_bytes": GIB, "size_bytes": 900 * GIB},
        ],
        "gpus": [
            {
                "index": index,
                "name": H100,
                "utilization": 0.9,
                "memory_used_bytes": 40 * GIB,
                "memory_total_bytes": 80 * GIB,
                "temperature_celsius": 61,
                "power_watts": 312.5,
                "power_limit_watts": 700,
            }
            for index in range(gpus)
        ],
        **extra,
    }


def _info(samples: dict, run_id: str, gpu: str) -> tuple[str, float]:
    """``overbrainer_gpu_info`` of the GPU (its ``name`` label is the H100's)."""
    labels = {"run_id": run_id, "gpu": gpu, "name": H100}
    return samples[("overbrainer_gpu_info", tuple(sorted(labels.items())))]


def _sample(metrics: ProjectMetrics, data: dict) -> None:
    sampled = parse_sample(json.dumps(data))
    assert sampled is not None
    metrics(TrainMachine(RUN, sampled))


def test_a_sample_sets_every_gauge_by_run_mount_and_gpu(tmp_path):
    metrics = ProjectMetrics(tmp_path)
    _sample(metrics, machine())
    samples = scraped(metrics)
    assert sample(samples, "overbrainer_target_cpu_usage_ratio", run_id=RUN) == ("gauge", 0.25)
    assert sample(samples, "overbrainer_target_cpus", run_id=RUN) == ("gauge", 8)
    assert sample(samples, "overbrainer_target_memory_limit_bytes", run_id=RUN) == (
        "gauge",
        16 * GIB,
    )
    for name in NAMES:
        assert sample(samples, name, run_id=RUN)[0] == "gauge"
    for mount, used in (("/workspace", 5 * GIB), ("/", 9 * GIB)):
        assert sample(samples, "overbrainer_target_disk_used_bytes", run_id=RUN, mount=mount) == (
            "gauge",
            used,
        )
        assert sample(samples, "overbrainer_target_disk_size_bytes", run_id=RUN, mount=mount)
    assert not [key for key in samples if ("mount", "/volume") in key[1]]  # a network volume
    for name in GPU_NAMES:
        assert sample(samples, name, run_id=RUN, gpu="0")[0] == "gauge"
    assert sample(samples, "overbrainer_gpu_utilization_ratio", run_id=RUN, gpu="0") == (
        "gauge",
        0.9,
    )
    assert _info(samples, RUN, "0") == ("gauge", 1)


def test_what_a_sample_lacks_goes_and_everything_goes_when_the_run_is_no_longer_followed(
    tmp_path,
):
    metrics = ProjectMetrics(tmp_path)
    _sample(metrics, machine(gpus=2))
    assert sample(scraped(metrics), "overbrainer_gpu_power_watts", run_id=RUN, gpu="1")
    _sample(metrics, machine(gpus=1, memory=None))
    samples = scraped(metrics)
    assert not [key for key in samples if ("gpu", "1") in key[1]]
    assert not [key for key in samples if key[0].startswith("overbrainer_target_memory")]
    assert sample(samples, "overbrainer_gpu_power_watts", run_id=RUN, gpu="0")
    metrics(TrainEnd(RUN))
    samples = scraped(metrics)
    assert not [key for key in samples if ("run_id", RUN) in key[1]]


def test_a_followed_run_has_its_machine_gauges(project_dir, start_training, monkeypatch, tmp_path):
    fake_bin = tmp_path / "fake-bin"
    fake_bin.mkdir()
    (fake_bin / "nvidia-smi").symlink_to(FAKE_NVIDIA_SMI)
    monkeypatch.setenv("PATH", f"{fake_bin}{os.pathsep}{os.environ['PATH']}")
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    start_training(f'\n[metrics]\nlisten = "127.0.0.1:{port}"\n')
    run_id = next((project_dir / "runs").iterdir()).name
    deadline = time.monotonic() + 60
    while True:
        _, samples = scrape(url)
        if ("overbrainer_target_cpu_usage_ratio", (("run_id", run_id),)) in samples:
            break
        assert time.monotonic() < deadline, "no machine gauges in the metrics"
        time.sleep(0.2)
    kind, usage = sample(samples, "overbrainer_target_cpu_usage_ratio", run_id=run_id)
    assert kind == "gauge" and 0 <= usage <= 1
    assert sample(samples, "overbrainer_target_cpus", run_id=run_id)[1] > 0
    kind, size = sample(samples, "overbrainer_target_disk_size_bytes", run_id=run_id, mount="/")
    assert size > 0
    assert _info(samples, run_id, "1") == ("gauge", 1)
    assert sample(samples, "overbrainer_gpu_temperature_celsius", run_id=run_id, gpu="0") == (
        "gauge",
        61,
    )



def test_a_job_running_elsewhere_has_its_latest_sample_kept_at_home(project_dir, tmp_path, run_cli):
    """A local target whose work directory is not the project's `runs/`: the job's samples
    reach home only through the follower, as from an ssh host or a pod."""
    work = tmp_path / "work"
    venv = make_fake_venv(tmp_path / "fake-venv")
    write_examples(project_dir / "data" / "train.jsonl", range(10))
    write_examples(project_dir / "data" / "eval.jsonl", range(10, 12))
    config = project_dir / "overbrainer.toml"
    config.write_text(config.read_text() + TRAINING.format(venv=venv) + f'workdir = "{work}"\n')
    env = {**os.environ, "FAKE_AXOLOTL_STEP_SECONDS": "0.1", "FAKE_AXOLOTL_STEPS": "100000"}
    process = subprocess.Popen(
        [sys.executable, "-c", BOOT, "-C", str(project_dir), "train"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        deadline = time.monotonic() + 60
        kept = None
        while kept is None or not kept.exists():
            assert time.monotonic() < deadline, "no machine sample kept at home"
            time.sleep(0.2)
            found = sorted((project_dir / "runs").glob("*/run.json"))
            kept = found[-1].parent / "machine.json" if found else None
        run_id = kept.parent.name
        assert (work / run_id / "machine.json").exists()  # the runner's, on the "target"
        result = run_cli("runs", "show", run_id)
        assert result.exit_code == 0, result.stderr
        assert "  machine: (sampled " in result.stdout
        assert "    disk /: " in result.stdout
    finally:
        process.kill()
        process.wait()
        for pid_file in work.glob("*/job.pid"):
            with suppress(ProcessLookupError, ValueError):
                os.killpg(int(pid_file.read_text()), signal.SIGKILL)
