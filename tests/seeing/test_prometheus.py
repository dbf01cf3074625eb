"""`[metrics] listen`: the Prometheus endpoint, scraped while a real command runs against
the loopback provider, and parsed with prometheus_client's own OpenMetrics parser."""

from __future__ import annotations

import socket
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

import pytest
from tests.helpers.fake_provider import FakeProvider
from tests.helpers.pipeline_data import PIPELINE_CONFIG, write_project
from tests.helpers.prometheus import free_port, sample, scrape

from overbrainer import __version__
from overbrainer.events import TrainEnd, TrainEvent, TrainPhase
from overbrainer.prometheus.collect import ProjectMetrics
from overbrainer.prometheus.server import MetricsServer

OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"


@pytest.fixture
def project(tmp_path: Path, provider: FakeProvider) -> Path:
    return write_project(tmp_path / "project", provider.url)


@pytest.fixture
def project_dir(project: Path) -> Path:
    """What ``run_cli`` runs in: the pipeline project."""
    return project


def with_metrics(project: Path, listen: str, extra: str = "") -> None:
    text = PIPELINE_CONFIG + f'\n[metrics]\nlisten = "{listen}"\n{extra}'
    (project / "overbrainer.toml").write_text(text, encoding="utf-8")


def test_a_scrape_during_run_shows_the_finished_stage_and_the_running_one(
    project, provider, run_cli
):
    first = run_cli("subtopics")
    assert first.exit_code == 0, first.stderr
    port = free_port()
    with_metrics(project, f"127.0.0.1:{port}")
    url = f"http://127.0.0.1:{port}/metrics"
    scraped: list[tuple[str, dict]] = []

    def scrape_once(seen):
        if not scraped:
            scraped.append(scrape(url))
        return  # then the default reply

    # The first questions request of the run: subtopics is over, questions is running.
    provider.on(lambda seen: seen.prompt.startswith("questions|"), scrape_once, times=None)
    result = run_cli("run")
    assert result.exit_code == 0, result.stderr
    assert f"metrics at {url}" in result.stderr
    content_type, samples = scraped[0]
    assert content_type == OPENMETRICS
    # Seeded from the history (the first subtopics), then this run's own results.
    assert sample(samples, "overbrainer_stage_items_total", stage="subtopics", result="done") == (
        "counter",
        2.0,
    )
    assert sample(
        samples, "overbrainer_stage_items_total", stage="subtopics", result="skipped"
    ) == ("counter", 2.0)
    assert sample(samples, "overbrainer_stage_items_total", stage="split", result="failed") == (
        "counter",
        0.0,
    )
    assert sample(
        samples, "overbrainer_tokens_total", stage="subtopics", model="gen-model", direction="in"
    ) == ("counter", 20.0)
    assert sample(
        samples, "overbrainer_tokens_total", stage="subtopics", model="gen-model", direction="out"
    ) == ("counter", 40.0)
    kind, cost = sample(samples, "overbrainer_cost_usd_total", stage="subtopics", model="gen-model")
    assert kind == "counter" and cost == pytest.approx(20 * 1e-6 + 40 * 2e-6)
    assert sample(samples, "overbrainer_stage_running", stage="questions") == ("gauge", 1.0)
    assert sample(samples, "overbrainer_stage_running", stage="subtopics") == ("gauge", 0.0)
    assert sample(samples, "overbrainer_build_info", version=__version__) == ("gauge", 1.0)
    names = {name for name, _ in samples}
    assert not any(name.endswith("_created") for name in names)
    assert not any(name.startswith(("process_", "python_")) for name in names)
    # Labels never hold a prompt, an answer or the key.
    assert all(
        "|" not in value and "sk-" not in value for _, labels in samples for _, value in labels
    )
    # Served only while the command holds the lock.
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url, timeout=5)


def test_retries_count_in_this_command(project, provider, run_cli):
    port = free_port()
    with_metrics(project, f"127.0.0.1:{port}")
    url = f"http://127.0.0.1:{port}/metrics"
    from tests.helpers.fake_provider import Reply

    provider.on(lambda seen: seen.prompt.startswith("subtopics|"), Reply(status=503), times=1)
    scraped: list[tuple[str, dict]] = []

    def scrape_once(seen):
        if not scraped:
            scraped.append(scrape(url))

    provider.on(lambda seen: seen.prompt.startswith("questions|"), scrape_once, times=None)
    result = run_cli("run")
    assert result.exit_code == 0, result.stderr
    _, samples = scraped[0]
    assert sample(samples, "overbrainer_item_retries_total", stage="subtopics") == ("counter", 1.0)
    # By topic as well: this command's work only.
    for topic in ("ownership", "lifetimes"):
        assert sample(
            samples,
            "overbrainer_topic_items_total",
            stage="subtopics",
            topic=topic,
            result="done",
        ) == ("counter", 1.0)
        kind, tokens = sample(
            samples,
            "overbrainer_topic_tokens_total",
            stage="subtopics",
            topic=topic,
            direction="out",
        )
        assert kind == "counter" and tokens > 0
    retries = [
        value
        for (name, labels), (_, value) in samples.items()
        if name == "overbrainer_topic_item_retries_total"
    ]
    assert sum(retries) == 1.0
    assert sample(samples, "overbrainer_stage_items_total", stage="subtopics", result="done") == (
        "counter",
        2.0,
    )


def test_training_gauges_follow_the_run_and_the_phase_goes_with_it(tmp_path):
    clock = [1000.0]
    metrics = ProjectMetrics(tmp_path, clock=lambda: clock[0])
    server = MetricsServer(metrics.registry, "127.0.0.1", 0)
    url = f"http://{server.address}/metrics"
    try:
        run = "demo_20260922-143005"
        metrics(TrainPhase(run, "training"))
        metrics(TrainEvent(run, {"event": "begin", "time": 990.0, "max_steps": 40}, "training"))
        metrics(
            TrainEvent(
                run,
                {
                    "event": "log",
                    "time": 995.0,
                    "step": 12,
                    "epoch": 0.3,
                    "loss": 2.5,
                    "learning_rate": 1e-4,
                    "grad_norm": 0.7,
                },
                "training",
            )
        )
        metrics(
            TrainEvent(
                run, {"event": "log", "time": 996.0, "step": 12, "eval_loss": 2.75}, "evaluating"
            )
        )
        _, samples = scrape(url)
        assert sample(samples, "overbrainer_train_step", run_id=run) == ("gauge", 12.0)
        assert sample(samples, "overbrainer_train_max_steps", run_id=run) == ("gauge", 40.0)
        assert sample(samples, "overbrainer_train_epoch", run_id=run) == ("gauge", 0.3)
        assert sample(samples, "overbrainer_train_loss", run_id=run) == ("gauge", 2.5)
        assert sample(samples, "overbrainer_eval_loss", run_id=run) == ("gauge", 2.75)
        assert sample(samples, "overbrainer_learning_rate", run_id=run) == ("gauge", 1e-4)
        assert sample(samples, "overbrainer_train_phase", run_id=run, phase="evaluating") == (
            "gauge",
            1.0,
        )
        assert sample(samples, "overbrainer_train_phase", run_id=run, phase="training") == (
            "gauge",
            0.0,
        )
        assert sample(samples, "overbrainer_train_last_metric_age_seconds", run_id=run) == (
            "gauge",
            4.0,
        )
        metrics(TrainEnd(run))
        _, samples = scrape(url)
        assert not [name for name, _ in samples if name == "overbrainer_train_phase"]
        assert sample(samples, "overbrainer_train_loss", run_id=run) == ("gauge", 2.5)
    finally:
        server.close()


def test_pod_spend_is_read_at_each_scrape(tmp_path):
    run_dir = tmp_path / "runs" / "demo_20260922-143005"
    run_dir.mkdir(parents=True)
    (run_dir / "target.spend.json").write_text(
        '{"machines": [{"name": "pod", "usd_per_hour": 3.6, "started": 1000}]}'
    )
    gone = tmp_path / "runs" / "demo_20260921-143005"
    gone.mkdir()
    (gone / "target.spend.json").write_text('{"machines": [{"name": "pod", "spent_usd": 1.25}]}')
    metrics = ProjectMetrics(tmp_path, clock=lambda: 1100.0)
    server = MetricsServer(metrics.registry, "127.0.0.1", 0)
    try:
        _, samples = scrape(f"http://{server.address}/metrics")
    finally:
        server.close()
    assert sample(samples, "overbrainer_runpod_spend_usd", run_id="demo_20260922-143005") == (
        "gauge",
        pytest.approx(0.1),
    )
    assert sample(samples, "overbrainer_runpod_spend_usd", run_id="demo_20260921-143005") == (
        "gauge",
        1.25,
    )


def test_other_paths_and_methods_are_404(tmp_path):
    server = MetricsServer(ProjectMetrics(tmp_path).registry, "127.0.0.1", 0)
    base = f"http://{server.address}"
    try:
        for path, method in (
            ("/", "GET"),
            ("/metrics/x", "GET"),
            ("/metrics", "POST"),
            ("/metrics", "DELETE"),
        ):
            request = urllib.request.Request(
                base + path, method=method, data=b"" if method == "POST" else None
            )
            with pytest.raises(urllib.error.HTTPError) as error:
                urllib.request.urlopen(request, timeout=5)
            assert error.value.code == 404, (path, method)
    finally:
        server.close()


@pytest.mark.parametrize(
    ("listen", "problem"),
    [
        ("localhost:9464", "'localhost' is not an IP address (a host name is refused)"),
        ("::1:9464", "an IPv6 address goes in brackets"),
        ("127.0.0.1:99999", "port '99999' is not a number from 0 to 65535"),
        ("9464", "must be an IP address and a port"),
        ("0.0.0.0:9464", "is not a loopback address and the endpoint has no authentication"),
    ],
)
def test_bad_listen_settings_are_refused(project, run_cli, listen, problem):
    with_metrics(project, listen)
    result = run_cli("split")
    assert result.exit_code == 1
    assert "metrics.listen" in result.stderr or "metrics" in result.stderr
    assert problem in result.stderr


def test_a_remote_address_needs_consent_and_warns(project, run_cli):
    port = free_port()
    with_metrics(project, f"0.0.0.0:{port}", "allow_remote = true\n")
    result = run_cli("split")
    assert f"metrics at http://0.0.0.0:{port}/metrics" in result.stderr
    assert "open to the network without authentication" in result.stderr


def test_a_port_in_use_is_a_warning_and_the_command_goes_on(project, run_cli):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with_metrics(project, f"127.0.0.1:{port}")
        result = run_cli("subtopics")
    assert result.exit_code == 0, result.stderr
    assert f"warning: metrics: cannot listen on 127.0.0.1:{port}" in result.stderr
    assert result.stdout.startswith("subtopics: 2 done")


def test_ipv6_loopback_and_port_0(tmp_path):
    try:
        server = MetricsServer(ProjectMetrics(tmp_path).registry, "::1", 0)
    except OSError:
        pytest.skip("no IPv6 loopback here")
    try:
        assert server.address.startswith("[::1]:")
        content_type, _ = scrape(f"http://{server.address}/metrics")
        assert content_type == OPENMETRICS
    finally:
        server.close()


def test_a_followed_run_has_its_gauges(project, start_training):
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    start_training(f'\n[metrics]\nlisten = "127.0.0.1:{port}"\n')
    deadline = time.monotonic() + 60
    while True:
        _, samples = scrape(url)
        steps = [v for (name, _), (_, v) in samples.items() if name == "overbrainer_train_step"]
        if steps and steps[0] >= 2:
            break
        assert time.monotonic() < deadline, "no training step in the metrics"
        time.sleep(0.2)
    run_id = next((project / "runs").iterdir()).name
    assert sample(samples, "overbrainer_train_max_steps", run_id=run_id)[0] == "gauge"
    kind, loss = sample(samples, "overbrainer_train_loss", run_id=run_id)
    assert kind == "gauge" and loss > 0
    assert sample(samples, "overbrainer_learning_rate", run_id=run_id)[0] == "gauge"
    assert sample(samples, "overbrainer_train_phase", run_id=run_id, phase="training") == (
        "gauge",
        1.0,
    )
    kind, age = sample(samples, "overbrainer_train_last_metric_age_seconds", run_id=run_id)
    assert kind == "gauge" and 0 <= age < 30


def test_pod_spend_sums_a_run_s_machines(tmp_path):
    # Training's machine is gone; the machine of an export runs (the runpod target's own
    # records give the same: tests/runpod/test_runpod_spend.py).
    from overbrainer.plugin.files import MachineSpend, write_spend

    run_dir = tmp_path / "runs" / "demo_20260922-143005"
    started = datetime(2026, 9, 22, 14, 30, 5, tzinfo=UTC).timestamp()
    write_spend(run_dir, [
        MachineSpend("training", usd_per_hour=0.44, spent_usd=1.25),
        MachineSpend("after-training", usd_per_hour=3.6, started=started),
    ])
    metrics = ProjectMetrics(tmp_path, clock=lambda: started + 100)
    server = MetricsServer(metrics.registry, "127.0.0.1", 0)
    try:
        _, samples = scrape(f"http://{server.address}/metrics")
    finally:
        server.close()
    assert sample(samples, "overbrainer_runpod_spend_usd", run_id="demo_20260922-143005") == (
        "gauge",
        pytest.approx(1.35),
    )


def test_clients_that_reset_their_connection_leave_one_debug_line_each(tmp_path, capfd):
    # Any local user can connect: a reset must never print a traceback into the command's
    # terminal, only a debug line.
    import struct

    from loguru import logger

    seen: list[str] = []
    sink = logger.add(lambda message: seen.append(str(message)), level="DEBUG")
    server = MetricsServer(ProjectMetrics(tmp_path).registry, "127.0.0.1", 0)
    host, port = server.address.rsplit(":", 1)
    try:
        for _ in range(10):
            client = socket.create_connection((host, int(port)))
            client.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # the request unfinished
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            client.close()  # a reset (RST), not a clean close
        deadline = time.monotonic() + 30
        while sum("metrics: a request from" in line for line in seen) < 10:
            assert time.monotonic() < deadline, seen
            time.sleep(0.05)
        content_type, _ = scrape(f"http://{server.address}/metrics")
        assert content_type == OPENMETRICS  # still serving
    finally:
        server.close()
        logger.remove(sink)
    errors = capfd.readouterr().err
    assert "Traceback" not in errors and "ConnectionResetError" not in errors


def test_a_fifo_as_the_spend_record_or_history_never_blocks_a_scrape(tmp_path):
    import os

    run_dir = tmp_path / "runs" / "demo_20260922-143005"
    run_dir.mkdir(parents=True)
    os.mkfifo(run_dir / "target.spend.json")
    (tmp_path / ".overbrainer").mkdir()
    os.mkfifo(tmp_path / ".overbrainer" / "history.jsonl")
    metrics = ProjectMetrics(tmp_path, clock=lambda: 1100.0)  # seeds from the history
    server = MetricsServer(metrics.registry, "127.0.0.1", 0)
    try:
        for _ in range(3):
            _, samples = scrape(f"http://{server.address}/metrics")
            assert not [key for key in samples if key[0] == "overbrainer_runpod_spend_usd"]
    finally:
        server.close()


def test_the_history_seeds_every_whole_line_and_no_infinite_cost(tmp_path):
    """A line holding U+2028 was cut in two (str.splitlines) and not counted; a cost of
    Infinity (Python's json reads it) made the dollar counter infinite."""
    import json

    (tmp_path / ".overbrainer").mkdir()
    lines = [
        {"stage": "answers", "done": 3, "model": "m", "cost": 0.5, "error": "a\u2028b"},
        {"stage": "answers", "done": 1, "model": "m", "cost": float("inf")},
    ]
    (tmp_path / ".overbrainer" / "history.jsonl").write_text(
        "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
    )
    metrics = ProjectMetrics(tmp_path, clock=lambda: 1100.0)
    sample = metrics.registry.get_sample_value
    assert sample("overbrainer_stage_items_total", {"stage": "answers", "result": "done"}) == 4
    assert sample("overbrainer_cost_usd_total", {"stage": "answers", "model": "m"}) == 0.5
