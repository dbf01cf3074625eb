"""``runs logs RUN --pod`` and ``pod logs RUN``: the pod's logs kept in the run directory,
then Runpod's log stream (``GET /v1/pods/{id}/logs`` on the fake, a real event stream over
loopback); and the drain before a delete that keeps them once the pod is gone."""

from __future__ import annotations

import json
import secrets
import stat
import threading
from pathlib import Path

import pytest
from tests.helpers.fake_runpod import API_KEY, FakeRunpod, Pod

from overbrainer_runpod import logkept, logstream, record
from overbrainer_runpod.logkept import drain, kept_cursor, kept_lines
from overbrainer_runpod.logstream import LogClient
from overbrainer_runpod.record import PodRecord, PodState

RUN = "demo_20260922-143005"
HF_TOKEN = "hf_podLogsSecretToken0123456789"
TARGET = """
[targets.gpu]
kind = "runpod"
gpu_types = ["NVIDIA A40"]
max_hours = 1
"""


@pytest.fixture
def project(project_dir: Path, fake_runpod: FakeRunpod, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(logstream, "BACKOFF_MIN_S", 0.05)
    config = project_dir / "overbrainer.toml"
    config.write_text(config.read_text(encoding="utf-8") + TARGET, encoding="utf-8")
    return project_dir


def write_run(project_dir: Path, run_id: str = RUN, target: str = "gpu") -> Path:
    directory = project_dir / "runs" / run_id
    directory.mkdir(parents=True, exist_ok=True)
    run = {
        "id": run_id, "target": target, "created": "2026-09-22T14:30:05Z",
        "remote_dir": f"/workspace/overbrainer/{run_id}", "job": None, "state": "succeeded",
        "message": None, "snapshots": True,
    }  # fmt: skip
    (directory / "run.json").write_text(json.dumps(run), encoding="utf-8")
    return directory


def live_pod(fake: FakeRunpod, run_dir: Path, state: PodState = PodState.RUNNING) -> str:
    """A pod on the fake that runs nothing (its log is what the test adds), recorded in
    the run's ``pod.json``."""
    pod_id = secrets.token_hex(7)
    pod = Pod(
        id=pod_id, name=f"overbrainer-{run_dir.name}-1", gpu_type="NVIDIA A40", cost=0.44,
        env={}, docker_args="", dir=fake.root / "pods" / pod_id, ports={},
        key="rpa_POD" + secrets.token_hex(12),
    )  # fmt: skip
    pod.dir.mkdir(parents=True)
    fake.pods[pod_id] = pod
    record.save(run_dir, PodRecord(run_id=run_dir.name, state=state, pod_id=pod_id))
    return pod_id


def keep(run_dir: Path, lines: list[tuple[str, str]], cursor: str | None = None) -> None:
    (run_dir / "pod").mkdir(exist_ok=True)
    text = "".join(
        json.dumps({"ts": f"2026-09-22T14:31:0{i}Z", "source": source, "line": line}) + "\n"
        for i, (source, line) in enumerate(lines)
    )
    (run_dir / "pod" / "pod.log").write_text(text, encoding="utf-8")
    if cursor is not None:
        (run_dir / "pod" / "pod.log.cursor").write_text(cursor, encoding="utf-8")


def shown_lines(stdout: str) -> list[str]:
    """The lines printed, without their time."""
    return [line.partition(" ")[2] if line[:1].isdigit() else line for line in stdout.splitlines()]


# What the run directory keeps.


def test_kept_logs_print_with_headers_and_by_source(project, fake_runpod, run_cli):
    run_dir = write_run(project)
    live_pod(fake_runpod, run_dir, PodState.DELETED)
    (run_dir / "pod").mkdir()
    (run_dir / "pod" / "boot.log").write_text("boot 1\nboot 2\n")
    (run_dir / "pod" / "watchdog.log").write_text("watch 1\n")
    (run_dir / "pod" / "sshd.log").write_text("sshd noise\n")
    keep(run_dir, [("system", "pull image"), ("container", "step 1"), ("container", "step 2")])

    result = run_cli("runs", "logs", RUN, "--pod")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == (
        "== boot.log ==\nboot 1\nboot 2\n== watchdog.log ==\nwatch 1\n== pod ==\n"
        "2026-09-22T14:31:00Z sys pull image\n"
        "2026-09-22T14:31:01Z ctr step 1\n"
        "2026-09-22T14:31:02Z ctr step 2\n"
    )
    assert result.stderr == ""
    assert fake_runpod.podlogs.requests == [], "a deleted pod's logs are not asked for"

    system = run_cli("runs", "logs", RUN, "--pod", "--source", "system")
    assert system.stdout == "2026-09-22T14:31:00Z sys pull image\n"

    last = run_cli("runs", "logs", RUN, "--pod", "--source", "container", "--tail", "1")
    assert last.stdout == (
        "== boot.log ==\nboot 2\n== watchdog.log ==\nwatch 1\n== pod ==\n"
        "2026-09-22T14:31:02Z ctr step 2\n"
    )


def test_a_run_with_nothing_kept_and_no_pod_says_so(project, fake_runpod, run_cli):
    run_dir = write_run(project)
    live_pod(fake_runpod, run_dir, PodState.DELETED)
    result = run_cli("runs", "logs", RUN, "--pod")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"runs: no pod log kept for run {RUN}\n"


# The live stream.


def test_live_lines_follow_the_kept_ones_without_a_duplicate(project, fake_runpod, run_cli):
    run_dir = write_run(project)
    pod_id = live_pod(fake_runpod, run_dir)
    fake_runpod.pod_log(pod_id, "step 1")
    cursor = fake_runpod.pod_log(pod_id, "step 2")
    fake_runpod.pod_log(pod_id, "step 3")
    fake_runpod.pod_log(pod_id, "step 4", source="system")
    keep(run_dir, [("system", "create container fake/image"), ("system", "start container"),
                   ("container", "step 1"), ("container", "step 2")], cursor)  # fmt: skip

    result = run_cli("runs", "logs", RUN, "--pod")
    assert result.exit_code == 0, result.stderr
    assert shown_lines(result.stdout) == [
        "sys create container fake/image", "sys start container", "ctr step 1", "ctr step 2",
        "ctr step 3", "sys step 4",
    ]  # fmt: skip
    assert fake_runpod.podlogs.requests == [{"cursor": cursor}]
    assert (run_dir / "pod" / "pod.log.cursor").read_text() == cursor, "runs logs never writes"

    containers = run_cli("runs", "logs", RUN, "--pod", "--source", "container")
    assert shown_lines(containers.stdout) == ["ctr step 1", "ctr step 2", "ctr step 3"]
    assert fake_runpod.podlogs.requests[-1] == {"source": "container", "cursor": cursor}


def test_without_a_kept_cursor_the_stream_replays_its_tail(project, fake_runpod, run_cli):
    run_dir = write_run(project)
    pod_id = live_pod(fake_runpod, run_dir)
    for step in range(1, 6):
        fake_runpod.pod_log(pod_id, f"step {step}")
    result = run_cli("runs", "logs", RUN, "--pod", "--tail", "2")
    assert result.exit_code == 0, result.stderr
    assert shown_lines(result.stdout) == ["ctr step 4", "ctr step 5"]
    assert fake_runpod.podlogs.requests == [{"tail": "2"}]


def test_follow_reconnects_after_a_dropped_connection_and_ends_when_the_pod_is_gone(
    project, fake_runpod, run_cli
):
    run_dir = write_run(project)
    pod_id = live_pod(fake_runpod, run_dir)
    fake_runpod.pod_log(pod_id, "step 1")
    fake_runpod.pod_log(pod_id, "step 2")
    fake_runpod.podlogs.drops = [3]  # cut in the middle of "step 2"'s event

    def later() -> None:
        try:
            fake_runpod.wait_until(lambda: len(fake_runpod.podlogs.requests) >= 2, what="reconnect")
            last = fake_runpod.pod_log(pod_id, "step 3")
            fake_runpod.wait_until(lambda: last in fake_runpod.podlogs.sent, what="step 3 sent")
        finally:  # the pod goes in any case: following ends then
            fake_runpod._terminate(pod_id, "client")

    helper = threading.Thread(target=later)
    helper.start()
    result = run_cli("runs", "logs", RUN, "--pod", "--follow")
    helper.join()
    assert result.exit_code == 0, result.stderr
    assert shown_lines(result.stdout) == [
        "sys create container fake/image", "sys start container", "ctr step 1", "ctr step 2",
        "ctr step 3",
    ]  # fmt: skip
    assert result.stderr == (
        f"runs: pod {pod_id} no longer exists, so Runpod has no more of its logs\n"
    )
    second = fake_runpod.podlogs.requests[1]
    assert second["cursor"].endswith("/000000000003"), "resumed after the last whole event"
    assert len(fake_runpod.podlogs.requests) >= 3, "the end of the stream was followed by a 404"


def test_a_refused_cursor_is_given_up_for_its_time(project, fake_runpod, run_cli):
    run_dir = write_run(project)
    pod_id = live_pod(fake_runpod, run_dir)
    cursor = fake_runpod.pod_log(pod_id, "step 1")
    fake_runpod.pod_log(pod_id, "step 2")
    keep(run_dir, [("container", "step 1")], cursor)
    fake_runpod.podlogs.refused.add(cursor)
    result = run_cli("runs", "logs", RUN, "--pod")
    assert result.exit_code == 0, result.stderr
    # From the cursor's own time: its line comes again, none is lost.
    assert shown_lines(result.stdout) == ["ctr step 1", "ctr step 1", "ctr step 2"]
    assert fake_runpod.podlogs.requests[1] == {"since": cursor.partition("/")[0]}


def test_secrets_and_control_characters_never_reach_the_screen(project, fake_runpod, run_cli):
    run_dir = write_run(project)
    pod_id = live_pod(fake_runpod, run_dir)
    fake_runpod.pod_log(pod_id, f"token {HF_TOKEN} key {API_KEY}")
    fake_runpod.pod_log(pod_id, "red \x1b[31mtext\x07 and\nsecond line\ttab")
    fake_runpod.log_feed(pod_id).add("not json \x1b]0;title", raw=True)
    (run_dir / "pod").mkdir()
    (run_dir / "pod" / "boot.log").write_text(f"\x1b[2Jboot HF_TOKEN={HF_TOKEN}\n")

    result = run_cli("runs", "logs", RUN, "--pod")
    assert result.exit_code == 0, result.stderr
    assert HF_TOKEN not in result.stdout and API_KEY not in result.stdout
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    assert shown_lines(result.stdout)[:2] == ["== boot.log ==", "\\x1b[2Jboot HF_TOKEN=***"]
    assert "ctr token *** key ***" in shown_lines(result.stdout)
    assert "ctr red \\x1b[31mtext\\x07 and\\x0asecond line\ttab" in shown_lines(result.stdout)
    assert result.stdout.splitlines()[-1] == " raw not json \\x1b]0;title"


def test_an_unreachable_api_is_a_note_after_what_is_kept(
    project, fake_runpod, run_cli, monkeypatch
):
    run_dir = write_run(project)
    pod_id = live_pod(fake_runpod, run_dir)
    keep(run_dir, [("container", "kept line")])
    import socket

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    monkeypatch.setenv("OVERBRAINER_RUNPOD__REST_URL", f"http://127.0.0.1:{port}/v1")
    result = run_cli("runs", "logs", RUN, "--pod")
    assert result.exit_code == 0
    assert shown_lines(result.stdout) == ["ctr kept line"]
    assert result.stderr.startswith(
        f"runs: cannot read the logs of pod {pod_id} from Runpod: cannot reach 127.0.0.1"
    )


def test_a_refused_key_is_an_error_that_never_shows_it(project, fake_runpod, run_cli, monkeypatch):
    run_dir = write_run(project)
    pod_id = live_pod(fake_runpod, run_dir)
    wrong = "rpa_WRONGKEY0123456789abcdefghij"
    monkeypatch.setenv("OVERBRAINER_RUNPOD__API_KEY", wrong)
    result = run_cli("runs", "logs", RUN, "--pod")
    assert result.exit_code == 1
    assert result.stderr == (
        f"error: runs: Runpod refused the logs of pod {pod_id} (HTTP 401: "
        '{"error": "Unauthorized"}): check OVERBRAINER_RUNPOD__API_KEY\n'
    )


def test_an_https_only_rest_url_is_checked(project, fake_runpod, run_cli, monkeypatch):
    run_dir = write_run(project)
    pod_id = live_pod(fake_runpod, run_dir)
    monkeypatch.setenv("OVERBRAINER_RUNPOD__REST_URL", "http://rest.example.com/v1")
    result = run_cli("runs", "logs", RUN, "--pod")
    assert result.exit_code == 0
    assert result.stderr == (
        f"runs: cannot read the logs of pod {pod_id} from Runpod: OVERBRAINER_RUNPOD__REST_URL "
        "must be an https URL (http only on loopback)\n"
    )


# Refusals.


def test_pod_on_a_run_that_did_not_run_on_a_pod_is_refused(project, run_cli):
    write_run(project, target="local")
    result = run_cli("runs", "logs", RUN, "--pod")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == (
        f"error: runs: run {RUN} has no machine log (its target `local` keeps none): "
        "--pod has nothing to read\n"
    )


def test_pod_logs_of_a_run_that_did_not_run_on_a_pod_is_refused(project, run_cli):
    write_run(project, target="local")
    result = run_cli("pod", "logs", RUN)
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == (
        f"error: pod: run {RUN} did not run on a pod (its target `local` is not a runpod "
        "target): it has no pod log\n"
    )


def test_pod_logs_of_a_run_with_a_broken_record_says_so(project, run_cli):
    run_dir = write_run(project)
    (run_dir / "run.json").write_text('{"id": 3}', encoding="utf-8")
    result = run_cli("pod", "logs", RUN)
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: runs/{RUN}/run.json is not a valid run record (")


# `pod logs`: the plugin's own command, the same output under its own name.


def test_pod_logs_prints_what_runs_logs_pod_prints(project, fake_runpod, run_cli):
    run_dir = write_run(project)
    pod_id = live_pod(fake_runpod, run_dir)
    (run_dir / "pod").mkdir()
    (run_dir / "pod" / "boot.log").write_text("boot 1\nboot 2\n")
    cursor = fake_runpod.pod_log(pod_id, "step 1")
    fake_runpod.pod_log(pod_id, "step 2")
    keep(run_dir, [("system", "pull image"), ("container", "step 1")], cursor)

    result = run_cli("pod", "logs")  # the latest run
    assert result.exit_code == 0, result.stderr
    assert result.stdout == run_cli("pod", "logs", "latest").stdout
    assert shown_lines(result.stdout) == [
        "== boot.log ==", "boot 1", "boot 2", "== pod ==", "sys pull image", "ctr step 1",
        "ctr step 2",
    ]  # fmt: skip
    assert result.stdout == run_cli("runs", "logs", RUN, "--pod").stdout
    last = run_cli("pod", "logs", RUN[:8], "--source", "container", "--tail", "1")
    assert shown_lines(last.stdout) == [
        "== boot.log ==", "boot 2", "== pod ==", "ctr step 1", "ctr step 2",
    ]  # fmt: skip
    assert fake_runpod.podlogs.requests[-1] == {"source": "container", "cursor": cursor}


def test_pod_logs_speaks_as_pod(project, fake_runpod, run_cli, monkeypatch):
    run_dir = write_run(project)
    live_pod(fake_runpod, run_dir, PodState.DELETED)
    nothing = run_cli("pod", "logs", RUN)
    assert (nothing.exit_code, nothing.stdout) == (0, f"pod: no pod log kept for run {RUN}\n")

    pod_id = live_pod(fake_runpod, run_dir)
    monkeypatch.setenv("OVERBRAINER_RUNPOD__API_KEY", "rpa_WRONGKEY0123456789abcdefghij")
    refused = run_cli("pod", "logs", RUN)
    assert refused.exit_code == 1
    assert refused.stderr == (
        f"error: pod: Runpod refused the logs of pod {pod_id} (HTTP 401: "
        '{"error": "Unauthorized"}): check OVERBRAINER_RUNPOD__API_KEY\n'
    )


def test_pod_logs_of_an_unknown_run_is_refused(project, fake_runpod, run_cli):
    result = run_cli("pod", "logs", "nope_20260101-000000")
    assert result.exit_code == 1
    assert result.stderr == "error: no run nope_20260101-000000 in runs/\n"
    bad = run_cli("pod", "logs", RUN, "--source", "other")
    assert bad.exit_code == 2 and "'other' is not one of 'container', 'system'" in bad.stderr


def test_source_without_pod_is_a_usage_error(project, run_cli):
    write_run(project)
    result = run_cli("runs", "logs", RUN, "--source", "system")
    assert result.exit_code == 2
    assert "--source applies only to --pod" in result.stderr


# Keeping the logs before a delete.


def test_a_drain_keeps_the_log_and_its_cursor_private_then_resumes_after_it(
    project, fake_runpod
):
    run_dir = write_run(project)
    pod_id = live_pod(fake_runpod, run_dir)
    fake_runpod.pod_log(pod_id, f"HF_TOKEN={HF_TOKEN} and {API_KEY}")
    client = LogClient(API_KEY, f"{fake_runpod.url}/v1")
    drain(client, run_dir, pod_id)
    first = kept_cursor(run_dir)
    last = fake_runpod.pod_log(pod_id, "after the first drain")
    drain(client, run_dir, pod_id)

    log = run_dir / "pod" / "pod.log"
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    cursor_file = run_dir / "pod" / "pod.log.cursor"
    assert stat.S_IMODE(cursor_file.stat().st_mode) == 0o600
    assert kept_cursor(run_dir) == last
    assert [(line.source, line.line) for line in kept_lines(run_dir)] == [
        ("system", "create container fake/image"), ("system", "start container"),
        ("container", "HF_TOKEN=*** and ***"), ("container", "after the first drain"),
    ]  # fmt: skip
    assert HF_TOKEN not in log.read_text() and API_KEY not in log.read_text()
    assert fake_runpod.podlogs.requests == [{"tail": "5000"}, {"cursor": first}]


def test_a_drain_stops_at_the_cap_with_one_line_saying_so(project, fake_runpod, monkeypatch):
    monkeypatch.setattr(logkept, "POD_LOG_CAP", 4096)
    run_dir = write_run(project)
    pod_id = live_pod(fake_runpod, run_dir)
    for step in range(200):
        fake_runpod.pod_log(pod_id, f"step {step} " + "x" * 40)
    client = LogClient(API_KEY, f"{fake_runpod.url}/v1")
    drain(client, run_dir, pod_id)
    size = (run_dir / "pod" / "pod.log").stat().st_size
    lines = kept_lines(run_dir)
    assert size <= 4096
    assert lines[-1].source == "overbrainer"
    assert lines[-1].line == "the pod's log reached 0.00390625 MiB: later lines are not kept"
    fake_runpod.pod_log(pod_id, "after the cap")
    drain(client, run_dir, pod_id)
    assert (run_dir / "pod" / "pod.log").stat().st_size == size, "nothing after the cap"


def test_a_drain_never_follows_a_symbolic_link(project, fake_runpod, tmp_path):
    run_dir = write_run(project)
    pod_id = live_pod(fake_runpod, run_dir)
    (run_dir / "pod").mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("untouched\n")
    (run_dir / "pod" / "pod.log").symlink_to(elsewhere)
    drain(LogClient(API_KEY, f"{fake_runpod.url}/v1"), run_dir, pod_id)
    assert elsewhere.read_text() == "untouched\n"
    assert fake_runpod.podlogs.requests == []


# A run's pod, end to end: its log kept before the pod is deleted.


def test_a_run_keeps_its_pods_log_before_the_pod_is_deleted(trainer, run_cli):
    fake = trainer.fake
    fake.podlogs.boot_lines = [f"HF_TOKEN={HF_TOKEN} key {API_KEY}", "boot \x1b[31mdone"]
    result = run_cli("train")
    assert result.exit_code == 0, result.stderr
    run_id = trainer.run()["id"]
    run_dir = trainer.dir / "runs" / run_id
    assert trainer.pod(run_id)["state"] == "deleted"
    lines = kept_lines(run_dir)
    assert [(line.source, line.line) for line in lines[:4]] == [
        ("system", "create container fake/image"), ("system", "start container"),
        ("container", "HF_TOKEN=*** key ***"), ("container", "boot \x1b[31mdone"),
    ]  # fmt: skip
    log = run_dir / "pod" / "pod.log"
    assert HF_TOKEN not in log.read_text() and API_KEY not in log.read_text()
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert kept_cursor(run_dir) == fake.podlogs.sent[-1]
    assert len(fake.podlogs.requests) == 1, "one drain, before .pod/retrieved"

    shown = run_cli("runs", "logs", run_id, "--pod")
    assert shown.exit_code == 0, shown.stderr
    assert "== boot.log ==" in shown.stdout
    assert "ctr HF_TOKEN=*** key ***" in shown_lines(shown.stdout)
    assert "ctr boot \\x1b[31mdone" in shown_lines(shown.stdout)
    assert len(fake.podlogs.requests) == 1, "a deleted pod's log is not asked for"


def test_pod_rm_keeps_the_lines_logged_since(trainer, run_cli):
    result = run_cli("train", "--keep-pod")
    assert result.exit_code == 0, result.stderr
    run_id = trainer.run()["id"]
    pod_id = trainer.pod(run_id)["pod_id"]
    trainer.fake.pod_log(pod_id, "a line after the run")
    removed = run_cli("pod", "rm", run_id)
    assert removed.exit_code == 0, removed.stderr
    lines = [line.line for line in kept_lines(trainer.dir / "runs" / run_id)]
    assert lines[-1] == "a line after the run"
    assert len(lines) == len(set(lines)), "the second drain resumed after the first"


def test_a_closed_standard_output_ends_the_command_quietly(project, fake_runpod):
    import os
    import subprocess
    import sys

    run_dir = write_run(project)
    live_pod(fake_runpod, run_dir, PodState.DELETED)
    keep(run_dir, [("container", f"line {i} " + "x" * 60) for i in range(5000)])
    code = "import sys\nfrom overbrainer.cli import main\nsys.argv[0] = 'overbrainer'\nmain()\n"
    args = [sys.executable, "-c", code, "-C", str(project), "runs", "logs", RUN, "--pod"]
    with subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(os.environ)
    ) as process:
        assert process.stdout is not None and process.stderr is not None
        first = process.stdout.readline()
        process.stdout.close()  # `| head -1`
        stderr = process.stderr.read()
        code_ = process.wait(timeout=60)
    assert first.startswith(b"2026-09-22T14:31:00Z ctr line 0 ")
    assert (code_, stderr) == (0, b"")


def test_a_pod_gone_from_runpod_is_a_note(project, fake_runpod, run_cli):
    run_dir = write_run(project)
    pod_id = live_pod(fake_runpod, run_dir)
    keep(run_dir, [("container", "kept line")])
    fake_runpod._terminate(pod_id, "watchdog")  # pod.json still says running
    result = run_cli("runs", "logs", RUN, "--pod")
    assert result.exit_code == 0, result.stderr
    assert shown_lines(result.stdout) == ["ctr kept line"]
    assert result.stderr == (
        f"runs: pod {pod_id} no longer exists, so Runpod has no more of its logs\n"
    )


def test_a_kept_log_behind_a_symbolic_link_is_refused(project, fake_runpod, run_cli, tmp_path):
    run_dir = write_run(project)
    live_pod(fake_runpod, run_dir, PodState.DELETED)
    (run_dir / "pod").mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_text("not a log\n")
    (run_dir / "pod" / "boot.log").symlink_to(secret)
    result = run_cli("runs", "logs", RUN, "--pod")
    assert result.exit_code == 1
    assert "not a log" not in result.stdout
    assert result.stderr == (
        f"error: runs: cannot read the pod logs of run {RUN}: refusing to use "
        f"{run_dir / 'pod' / 'boot.log'}: it is a symbolic link\n"
    )


def test_a_log_that_cannot_be_read_never_fails_the_run(trainer, run_cli, monkeypatch):
    import socket

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    monkeypatch.setenv("OVERBRAINER_RUNPOD__REST_URL", f"http://127.0.0.1:{port}/v1")
    result = run_cli("train")
    assert result.exit_code == 0, result.stderr
    run_id = trainer.run()["id"]
    assert trainer.pod(run_id)["state"] == "deleted"
    assert kept_lines(trainer.dir / "runs" / run_id) == []
    assert "cannot keep" not in result.stderr


def test_a_drain_never_writes_through_a_symlinked_pod_directory(project, fake_runpod, tmp_path):
    run_dir = write_run(project)
    pod_id = live_pod(fake_runpod, run_dir)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (run_dir / "pod").symlink_to(elsewhere)
    drain(LogClient(API_KEY, f"{fake_runpod.url}/v1"), run_dir, pod_id)
    assert list(elsewhere.iterdir()) == []


@pytest.mark.parametrize(
    "command", [["pod", "logs", RUN, "-f"], ["runs", "logs", RUN, "--pod", "-f"]]
)
def test_ctrl_c_ends_following_quietly(project, fake_runpod, command):
    import os
    import signal
    import subprocess
    import sys

    run_dir = write_run(project)
    pod_id = live_pod(fake_runpod, run_dir)
    fake_runpod.pod_log(pod_id, "step 1")
    code = "import sys\nfrom overbrainer.cli import main\nsys.argv[0] = 'overbrainer'\nmain()\n"
    args = [sys.executable, "-c", code, "-C", str(project), *command]
    with subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(os.environ)
    ) as process:
        assert process.stdout is not None
        lines = [process.stdout.readline() for _ in range(3)]
        process.send_signal(signal.SIGINT)
        rest, stderr = process.communicate(timeout=30)
    assert lines[2].endswith(b" ctr step 1\n")
    assert (process.returncode, rest, stderr) == (0, b"", b"")
