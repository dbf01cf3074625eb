"""The metrics of one project, on a private registry, fed by the event bus.

Counters are seeded from ``.overbrainer/history.jsonl`` (item results; tokens and cost of
entries naming a model) and then follow the running command's events; retries are not in
the history, so they count this command's only.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, assert_never

from loguru import logger
from prometheus_client import CollectorRegistry, Counter, Gauge, disable_created_metrics
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from overbrainer import __version__, files
from overbrainer.errors import UserError
from overbrainer.events import (
    Event,
    ItemCounted,
    ItemRateLimited,
    ItemRetry,
    StageEnd,
    StageStart,
    Tokens,
    TrainEnd,
    TrainEvent,
    TrainMachine,
    TrainPhase,
)
from overbrainer.job.layout import TARGET_SPEND
from overbrainer.job.spend import run_spend
from overbrainer.prometheus.dollars import DECIMALS, DollarCounter
from overbrainer.prometheus.machine import MachineGauges

STAGES = ("subtopics", "questions", "answers", "split")
RESULTS = ("done", "skipped", "failed", "excluded")
PHASES = ("training", "evaluating", "finalizing", "merging", "exporting", "retrieving")
HISTORY = Path(".overbrainer") / "history.jsonl"
RUN_GAUGES = {
    "loss": ("train_loss",),
    "eval_loss": ("train_eval_loss", "eval_loss"),
    "learning_rate": ("train_learning_rate", "learning_rate"),
    "epoch": ("train_epoch",),
    "grad_norm": ("train_grad_norm",),
}
"""metrics.jsonl field -> gauge attributes: every figure of a run is ``overbrainer_train_*``;
``overbrainer_eval_loss`` and ``overbrainer_learning_rate`` are the reference tool's names,
kept beside them so its dashboards still work (docs/seeing.md)."""


class ProjectMetrics:
    """Every series of the endpoint, for the project at ``project_dir``."""

    def __init__(self, project_dir: Path, clock: Callable[[], float] = time.time) -> None:
        disable_created_metrics()
        self.project_dir = project_dir
        self.clock = clock
        self.registry = CollectorRegistry(auto_describe=True)
        self._lock = threading.Lock()
        self._last_line: dict[str, float] = {}
        self._phase: dict[str, str] = {}
        r = self.registry
        self.items = Counter(
            "overbrainer_stage_items",
            "Dataset items by stage and result.",
            ["stage", "result"],
            registry=r,
        )
        self.tokens = Counter(
            "overbrainer_tokens",
            "Provider tokens by stage, model and direction (in, out).",
            ["stage", "model", "direction"],
            registry=r,
        )
        self.cost = DollarCounter(
            "overbrainer_cost_usd",
            "Provider cost in US dollars, known prices only.",
            ["stage", "model"],
            registry=r,
        )
        self.running = Gauge(
            "overbrainer_stage_running", "Stages running now.", ["stage"], registry=r
        )
        self.retries = Counter(
            "overbrainer_item_retries",
            "Retried provider requests in this command.",
            ["stage"],
            registry=r,
        )
        self.rate_limited = Counter(
            "overbrainer_rate_limited_requests",
            "Provider requests refused by a rate limit (429) and waited out, this command.",
            ["stage"],
            registry=r,
        )
        # By topic too (the reference has no topic label, so these are families of their
        # own); the history has no topics: these count this command's work only.
        self.topic_items = Counter(
            "overbrainer_topic_items",
            "Dataset items by stage, topic and result, this command.",
            ["stage", "topic", "result"],
            registry=r,
        )
        self.topic_tokens = Counter(
            "overbrainer_topic_tokens",
            "Provider tokens by stage, topic and direction, this command.",
            ["stage", "topic", "direction"],
            registry=r,
        )
        self.topic_cost = DollarCounter(
            "overbrainer_topic_cost_usd",
            "Provider cost in US dollars by stage and topic, this command, known prices only.",
            ["stage", "topic"],
            registry=r,
        )
        self.topic_retries = Counter(
            "overbrainer_topic_item_retries",
            "Retried provider requests by stage and topic, this command.",
            ["stage", "topic"],
            registry=r,
        )
        self.step = Gauge("overbrainer_train_step", "Last training step.", ["run_id"], registry=r)
        self.max_steps = Gauge(
            "overbrainer_train_max_steps",
            "Total training steps, once known.",
            ["run_id"],
            registry=r,
        )
        self.phase = Gauge(
            "overbrainer_train_phase",
            "1 for the current phase of a followed run.",
            ["run_id", "phase"],
            registry=r,
        )
        self.train_loss = Gauge(
            "overbrainer_train_loss", "Last training loss.", ["run_id"], registry=r
        )
        self.train_eval_loss = Gauge(
            "overbrainer_train_eval_loss", "Last eval loss.", ["run_id"], registry=r
        )
        self.train_learning_rate = Gauge(
            "overbrainer_train_learning_rate", "Last learning rate.", ["run_id"], registry=r
        )
        self.eval_loss = Gauge(
            "overbrainer_eval_loss",
            "overbrainer_train_eval_loss, as the reference named it.",
            ["run_id"],
            registry=r,
        )
        self.learning_rate = Gauge(
            "overbrainer_learning_rate",
            "overbrainer_train_learning_rate, as the reference named it.",
            ["run_id"],
            registry=r,
        )
        self.train_epoch = Gauge(
            "overbrainer_train_epoch", "Last epoch (fractional).", ["run_id"], registry=r
        )
        self.train_grad_norm = Gauge(
            "overbrainer_train_grad_norm", "Last gradient norm.", ["run_id"], registry=r
        )
        self.machine = MachineGauges(r)
        build = Gauge("overbrainer_build_info", "1; the version.", ["version"], registry=r)
        build.labels(version=__version__).set(1)
        for stage in STAGES:
            for result in RESULTS:
                self.items.labels(stage=stage, result=result)
            self.running.labels(stage=stage).set(0)
        r.register(_ScrapeTime(self))
        self.seed()

    def seed(self) -> None:
        """Counters from the history of the project's stage executions."""
        try:
            text = files.read_text(self.project_dir / HISTORY, str(HISTORY), files.READ_LIMIT)
        except UserError as error:  # a FIFO, a device: never read, never waited on
            logger.debug(f"metrics: {error}")
            return
        # Lines end with \n only: a record may hold U+2028, which str.splitlines cuts at.
        lines = text.split("\n") if text is not None else []
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if not isinstance(entry, dict) or not isinstance(entry.get("stage"), str):
                continue
            stage = entry["stage"]
            for result in RESULTS:
                count = entry.get(result)
                if _is_count(count) and count:
                    self.items.labels(stage=stage, result=result).inc(count)
            model = entry.get("model")
            if not isinstance(model, str) or not model:
                continue
            for key, direction in (("input_tokens", "in"), ("output_tokens", "out")):
                count = entry.get(key)
                if _is_count(count) and count:
                    self.tokens.labels(stage=stage, model=model, direction=direction).inc(count)
            cost = entry.get("cost")
            if isinstance(cost, int | float) and not isinstance(cost, bool) and 0 < cost < math.inf:
                self.cost.inc(cost, stage=stage, model=model)

    def __call__(self, event: Event) -> None:
        """Take one event of the bus."""
        with self._lock:
            match event:
                case StageStart(stage=stage):
                    self.running.labels(stage=stage).inc()
                case StageEnd(stage=stage):
                    self.running.labels(stage=stage).dec()
                case ItemCounted(stage=stage, count=count, topic=topic):
                    result = event.result
                    if topic:
                        self.topic_items.labels(stage=stage, topic=topic, result=result).inc(count)
                    self.items.labels(stage=stage, result=result).inc(count)
                case ItemRetry(stage=stage, topic=topic):
                    if topic:
                        self.topic_retries.labels(stage=stage, topic=topic).inc()
                    self.retries.labels(stage=stage).inc()
                case ItemRateLimited(stage=stage):
                    self.rate_limited.labels(stage=stage).inc()
                case Tokens():
                    self._tokens(event)
                case TrainEvent() | TrainPhase() | TrainMachine() | TrainEnd():
                    self._train(event)
                case _:
                    assert_never(event)

    def _train(self, event: TrainEvent | TrainPhase | TrainMachine | TrainEnd) -> None:
        """An event of a followed run."""
        match event:
            case TrainEvent(run_id=run_id, event=line, phase=phase):
                self._train_event(run_id, line)
                self._set_phase(run_id, phase)
            case TrainPhase(run_id=run_id, phase=phase):
                self._set_phase(run_id, phase)
            case TrainMachine(run_id=run_id, sample=sample):
                self.machine.set(run_id, sample)
            case TrainEnd(run_id=run_id):
                self._end(run_id)
            case _:
                assert_never(event)

    def _tokens(self, event: Tokens) -> None:
        """Tokens and cost by stage and model, and by topic where the event names one."""
        stage, topic = event.stage, event.topic
        model = event.model or "unknown"
        for count, direction in ((event.input_tokens, "in"), (event.output_tokens, "out")):
            if _is_count(count) and count:
                self.tokens.labels(stage=stage, model=model, direction=direction).inc(count)
                if topic:
                    self.topic_tokens.labels(stage=stage, topic=topic, direction=direction).inc(
                        count
                    )
        if event.cost is not None and event.cost > 0:
            self.cost.inc(event.cost, stage=stage, model=model)
            if topic:
                self.topic_cost.inc(event.cost, stage=stage, topic=topic)

    def _train_event(self, run_id: str, event: dict[str, Any]) -> None:
        # The age starts with the first metric (a `log` line): before it the model loads,
        # and a stage or begin line aging for minutes would read as a stalled run.
        if event.get("event") == "log" or run_id in self._last_line:
            when = event.get("time")
            self._last_line[run_id] = (
                float(when)
                if isinstance(when, int | float) and not isinstance(when, bool)
                else self.clock()
            )
        total = event.get("max_steps")
        if _is_count(total) and total:
            self.max_steps.labels(run_id=run_id).set(total)
        step = event.get("step")
        if isinstance(step, int) and _is_count(step) and event.get("event") in ("log", "end"):
            self.step.labels(run_id=run_id).set(step)
        if event.get("event") != "log":
            return
        for key, attributes in RUN_GAUGES.items():
            value = event.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool):
                for attribute in attributes:
                    getattr(self, attribute).labels(run_id=run_id).set(value)

    def _set_phase(self, run_id: str, phase: str) -> None:
        if phase not in PHASES or self._phase.get(run_id) == phase:
            return
        self._phase[run_id] = phase
        for name in PHASES:
            self.phase.labels(run_id=run_id, phase=name).set(1 if name == phase else 0)

    def _end(self, run_id: str) -> None:
        """Nothing follows the run any more: its phase series, line age and machine gauges
        go."""
        self.machine.remove(run_id)
        if self._phase.pop(run_id, None) is not None:
            for name in PHASES:
                self.phase.remove(run_id, name)
        self._last_line.pop(run_id, None)

    def line_ages(self) -> dict[str, float]:
        now = self.clock()
        with self._lock:
            return {run_id: max(now - when, 0.0) for run_id, when in self._last_line.items()}


class _ScrapeTime(Collector):
    """Series computed when scraped: the age of a followed run's last metrics line, and what
    the machines of each run cost, as its target records it (``runs/<id>/target.spend.json``,
    :mod:`overbrainer.job.spend`)."""

    def __init__(self, metrics: ProjectMetrics) -> None:
        self.metrics = metrics

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterator[GaugeMetricFamily]:
        age = GaugeMetricFamily(
            "overbrainer_train_last_metric_age_seconds",
            "Seconds since the followed run's last metrics line.",
            labels=["run_id"],
        )
        for run_id, seconds in sorted(self.metrics.line_ages().items()):
            age.add_metric([run_id], seconds)
        yield age
        spend = GaugeMetricFamily(
            # Named for the reference tool's only paying target; any target's machines.
            "overbrainer_runpod_spend_usd",
            "Estimated spend of the run's machines (pods) in US dollars.",
            labels=["run_id"],
        )
        for run_id, dollars in _spend(self.metrics.project_dir, self.metrics.clock()):
            spend.add_metric([run_id], round(dollars, DECIMALS))
        yield spend


def _spend(project_dir: Path, now: float) -> Iterator[tuple[str, float]]:
    """(run id, USD) for every run whose target records what its machines cost."""
    runs = project_dir / "runs"
    if not runs.is_dir():
        return
    for path in sorted(runs.glob(f"*/{TARGET_SPEND}")):
        dollars = run_spend(path.parent, now)
        if dollars is not None:
            yield path.parent.name, dollars


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0

