"""The endpoint's series: `overbrainer_train_*` names for every figure of a run, dollars to
the micro-dollar, and no line age before a run's first metric."""

from __future__ import annotations

from tests.helpers.prometheus import sample, scraped

from overbrainer.events import Tokens, TrainEvent
from overbrainer.prometheus.collect import ProjectMetrics

RUN = "demo_20260922-143005"


def _line(metrics: ProjectMetrics, **event) -> None:
    metrics(TrainEvent(RUN, event, "training"))


def test_every_run_figure_is_a_train_gauge_and_the_reference_names_stay(tmp_path):
    metrics = ProjectMetrics(tmp_path, clock=lambda: 1000.0)
    _line(metrics, event="log", time=995.0, step=3, loss=2.5, learning_rate=1e-4)
    _line(metrics, event="log", time=996.0, step=3, eval_loss=2.75)
    samples = scraped(metrics)
    assert sample(samples, "overbrainer_train_eval_loss", run_id=RUN) == ("gauge", 2.75)
    assert sample(samples, "overbrainer_train_learning_rate", run_id=RUN) == ("gauge", 1e-4)
    assert sample(samples, "overbrainer_eval_loss", run_id=RUN) == ("gauge", 2.75)
    assert sample(samples, "overbrainer_learning_rate", run_id=RUN) == ("gauge", 1e-4)


def test_costs_show_to_the_micro_dollar(tmp_path):
    metrics = ProjectMetrics(tmp_path)
    for cost in (0.0001, 0.0007):  # 0.0007999999999999999 as floats add up
        metrics(Tokens("answers", "m", input_tokens=5, output_tokens=0, cost=cost, topic="t"))
    samples = scraped(metrics)
    assert sample(samples, "overbrainer_cost_usd_total", stage="answers", model="m") == (
        "counter",
        0.0008,
    )
    assert sample(samples, "overbrainer_topic_cost_usd_total", stage="answers", topic="t") == (
        "counter",
        0.0008,
    )


def test_pod_spend_shows_to_the_micro_dollar(tmp_path):
    run_dir = tmp_path / "runs" / RUN
    run_dir.mkdir(parents=True)
    (run_dir / "target.spend.json").write_text(
        '{"machines": [{"name": "pod", "usd_per_hour": 0.44, "started": 1000}]}'
    )
    metrics = ProjectMetrics(tmp_path, clock=lambda: 1001.0)  # 0.44 / 3600: 0.000122…
    samples = scraped(metrics)
    assert sample(samples, "overbrainer_runpod_spend_usd", run_id=RUN) == ("gauge", 0.000122)


def test_no_line_age_before_the_first_metric(tmp_path):
    clock = [1000.0]
    metrics = ProjectMetrics(tmp_path, clock=lambda: clock[0])
    _line(metrics, event="stage", name="train", time=900.0)
    _line(metrics, event="begin", time=950.0, max_steps=40)
    clock[0] = 1300.0  # the model still loading: no age climbing
    ages = [
        key for key in scraped(metrics) if key[0] == "overbrainer_train_last_metric_age_seconds"
    ]
    assert ages == []
    _line(metrics, event="log", time=1290.0, step=1, loss=3.0)
    assert sample(scraped(metrics), "overbrainer_train_last_metric_age_seconds", run_id=RUN) == (
        "gauge",
        10.0,
    )
