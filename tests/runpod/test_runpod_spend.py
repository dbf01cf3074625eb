"""The runpod target reports its pods' spend through the core's channel (``target.spend.json``),
and the Prometheus endpoint reads it from there alone."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from tests.helpers.prometheus import sample, scrape

from overbrainer.prometheus.collect import ProjectMetrics
from overbrainer.prometheus.server import MetricsServer
from overbrainer_runpod import record
from overbrainer_runpod.record import PodRecord, PodState

RUN = "demo_20260922-143005"


def spend_metric(project_dir, now: float) -> float | None:
    metrics = ProjectMetrics(project_dir, clock=lambda: now)
    server = MetricsServer(metrics.registry, "127.0.0.1", 0)
    try:
        _, samples = scrape(f"http://{server.address}/metrics")
    finally:
        server.close()
    found = [key for key in samples if key[0] == "overbrainer_runpod_spend_usd"]
    return sample(samples, "overbrainer_runpod_spend_usd", run_id=RUN)[1] if found else None


def test_both_pods_of_a_run_are_summed(tmp_path):
    # Training's pod is gone; the pod of an export runs.
    run_dir = tmp_path / "runs" / RUN
    record.save(run_dir, PodRecord(
        run_id=RUN, state=PodState.DELETED, cost_per_hour=0.44, estimated_spend=1.25,
    ))
    record.save(run_dir / record.AFTER_DIR, PodRecord(
        run_id=RUN, state=PodState.READY, cost_per_hour=3.6, created="2026-09-22T14:30:05Z",
    ))
    started = datetime(2026, 9, 22, 14, 30, 5, tzinfo=UTC).timestamp()
    assert json.loads((run_dir / "target.spend.json").read_text()) == {
        "version": 1,
        "machines": [
            {"name": "training", "usd_per_hour": 0.44, "spent_usd": 1.25},
            {"name": "after-training", "usd_per_hour": 3.6, "started": started},
        ],
    }
    assert spend_metric(tmp_path, started + 100) == pytest.approx(1.35)


def test_a_pod_record_alone_is_not_read(tmp_path):
    run_dir = tmp_path / "runs" / RUN
    run_dir.mkdir(parents=True)
    (run_dir / "pod.json").write_text('{"estimated_spend": 1.25, "cost_per_hour": 0.44}')
    assert spend_metric(tmp_path, 1000.0) is None


def test_a_pod_with_no_price_yet_has_no_spend(tmp_path):
    record.save(tmp_path / "runs" / RUN, PodRecord(run_id=RUN))
    assert spend_metric(tmp_path, 1000.0) is None


def test_a_run_s_deleted_pod_reports_its_final_spend(trainer, run_cli):
    result = run_cli("train")
    assert result.exit_code == 0, result.stderr
    run_id = trainer.run()["id"]
    pod = trainer.pod(run_id)
    assert pod["state"] == "deleted" and pod["estimated_spend"] is not None
    spend = json.loads((trainer.dir / "runs" / run_id / "target.spend.json").read_text())
    [machine] = spend["machines"]
    assert machine["name"] == "training"
    assert machine["spent_usd"] == pod["estimated_spend"]
    assert machine["usd_per_hour"] == pod["cost_per_hour"]
