"""`runs show`'s `machine:` block: the latest sample of the run's machine, from its directory."""

from __future__ import annotations

import json

from tests.helpers.run_records import GIB, SAMPLE, write_run


def test_runs_show_prints_the_latest_machine_sample(run_cli, project_dir):
    run_dir = write_run(project_dir, "demo_20260922-143005", "2026-09-22T14:30:05Z", "running")
    (run_dir / "machine.json").write_text(json.dumps(SAMPLE))
    result = run_cli("runs", "show", "demo_20260922-143005")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("  machine: (sampled "))
    assert lines[at + 1 : at + 7] == [
        "    cpu: 42% busy, of 7.5 CPUs, load 3.25",
        "    memory: 3.0 GiB of 16.0 GiB",
        "    disk /workspace: 1.0 GiB of 900.0 GiB (network: the whole volume's)",
        "    disk /: 9.0 GiB of 20.0 GiB",
        "    gpu 0 NVIDIA A40: 97% busy, memory 40.0 GiB of 48.0 GiB, 71 °C, 290.5 of 300 W",
        "    gpu 1 NVIDIA A40: memory 0 B of 48.0 GiB, 30 °C",
    ]


def test_a_run_without_a_sample_or_with_a_broken_one_has_no_machine_block(run_cli, project_dir):
    run_dir = write_run(project_dir, "demo_20260922-143005", "2026-09-22T14:30:05Z")
    result = run_cli("runs", "show", "demo_20260922-143005")
    assert result.exit_code == 0 and "machine:" not in result.stdout
    (run_dir / "machine.json").write_text('{"format": 1, "cpu": ')
    result = run_cli("runs", "show", "demo_20260922-143005")
    assert result.exit_code == 0 and "machine:" not in result.stdout
    assert result.stderr == ""


def test_runs_show_json_has_the_latest_machine_sample(run_cli, project_dir):
    run_dir = write_run(project_dir, "demo_20260922-143005", "2026-09-22T14:30:05Z", "running")
    (run_dir / "machine.json").write_text(json.dumps(SAMPLE))
    [shown] = json.loads(run_cli("runs", "show", "--json").stdout)
    machine = shown["machine"]
    assert machine["cpu"] == {"usage": 0.42, "load1": 3.25, "cpus": 7.5}
    assert machine["memory"] == {"used_bytes": 3 * GIB, "limit_bytes": 16 * GIB}
    assert [disk["mount"] for disk in machine["disks"]] == ["/workspace", "/"]
    assert [(gpu["index"], gpu["utilization"]) for gpu in machine["gpus"]] == [(0, 0.97), (1, None)]


def test_the_first_sample_says_its_busy_share_is_not_known_yet(run_cli, project_dir):
    """The share is measured between two samples: the first has none, and says so rather
    than reading `cpu: of 2 CPUs`."""
    run_dir = write_run(project_dir, "demo_20260922-143005", "2026-09-22T14:30:05Z", "running")
    first = {**SAMPLE, "cpu": {"usage": None, "load1": 2.07, "cpus": 2, "container": False}}
    (run_dir / "machine.json").write_text(json.dumps(first))
    lines = run_cli("runs", "show", "demo_20260922-143005").stdout.splitlines()
    assert "    cpu: busy: not known yet (one sample), of 2 CPUs, load 2.07" in lines
