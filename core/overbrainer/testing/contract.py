"""The executor conformance suite: every test an executor must pass, in one class.

An executor package subclasses :class:`ExecutorContract` in its tests and gives one fixture,
``contract_target``, returning a :class:`ContractTarget`: its plugin, a target table, and
how to reach the job directory when it can. Every test then drives the plugin's hooks
exactly as the core does, with the fake trainer (:mod:`overbrainer.testing.fake_axolotl`)
as Axolotl, so a whole contract run takes seconds::

    from overbrainer.testing import ContractTarget, ExecutorContract, make_fake_venv

    class TestMyExecutor(ExecutorContract):
        @pytest.fixture
        def contract_target(self, tmp_path):
            venv = make_fake_venv(tmp_path / "venv")
            return ContractTarget(plugin=my_plugin, table={"kind": "mine", "venv": str(venv)})
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets as tokens
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from overbrainer.errors import ArtifactMismatch, MissingArtifact
from overbrainer.hookcalls import Hooks
from overbrainer.job import layout
from overbrainer.job.interface import Executor
from overbrainer.job.record import RunRecord, RunState
from overbrainer.job.serving import ServeHandle, ServeSpec
from overbrainer.job.spec import ArtifactSpec, JobPoll, JobSpec, JobState, JobStatus, TargetInfo
from overbrainer.project import Project
from overbrainer.testing.jobs import contract_settings, manager_with, prepare_job
from overbrainer.testing.processes import announced, carrying, with_their_runners

POLL_S = 0.05
DEADLINE_S = 60.0
SECRET_NAME = "HF_TOKEN"  # noqa: S105 - the variable's name
RESULTS = ArtifactSpec(
    paths=(layout.OUTPUT_DIR, layout.METRICS_FILE, layout.JOB_LOG),
    required=(layout.OUTPUT_DIR,),
    exclude=(layout.CHECKPOINTS,),
)


@dataclass
class ContractTarget:
    """What an executor package gives the suite.

    Attributes:
        plugin: what the plugin's entry point names: its ``ExecutorHooks`` object, or the
            module of its hooks. Its ``create_executor`` makes an ``Executor``; the suite
            drives it through the hooks, as the core does (the core's dispatcher calling its
            methods, or the plugin's own hooks where it writes them).
        table: the ``[targets.NAME]`` table, ``kind`` included, validated by the model the
            plugin registers; it must make the fake trainer the job's ``axolotl`` (a
            ``venv`` from :func:`~overbrainer.testing.make_fake_venv`, say).
        name: the target's name.
        env: overbrainer's environment as the project sees it.
        job_dir: where the job directory of a run is, when this machine can read it (the
            tests that alter or scan the target's files are skipped without it).
        signal_runner: sends the job's runner SIGTERM as the platform would (a scheduler's
            stop); the graceful-stop-by-signal test is skipped without it.
        signal_job: sends SIGTERM to every process of the job at once, as Slurm (at a time
            limit, on ``scancel``), systemd and Ray's ``stop_job`` do; the test that this is a
            graceful stop too is skipped without it.
    """

    plugin: object
    table: Mapping[str, Any]
    name: str = "contract"
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    job_dir: Callable[[RunRecord], Path | None] | None = None
    signal_runner: Callable[[RunRecord], None] | None = None
    signal_job: Callable[[RunRecord], None] | None = None


@dataclass
class Driver:
    """Drives one ``Executor`` through the hooks, as the training commands do."""

    hook: Hooks
    executor: Executor
    target: ContractTarget
    project: Path
    info: TargetInfo
    runs: list[RunRecord] = field(default_factory=list)

    def new_run(self, suffix: str = "") -> RunRecord:
        run_id = f"contract_20260101-{len(self.runs):06d}{suffix}"
        remote = self.hook.claim_run_dir(executor=self.executor, run_id=run_id)
        assert remote, f"claim_run_dir returned {remote!r} for a new id"
        (self.project / "runs" / run_id).mkdir(parents=True, exist_ok=True)
        run = RunRecord(
            id=run_id, target=self.target.name, created="2026-01-01T00:00:00Z", remote_dir=remote
        )
        self.runs.append(run)
        return run

    def local_dir(self, run: RunRecord) -> Path:
        return self.project / "runs" / run.id

    def launch(
        self,
        run: RunRecord | None = None,
        knobs: Mapping[str, str] | None = None,
        secrets: Mapping[str, str] | None = None,
        resume: tuple[Path, int] | None = None,
    ) -> RunRecord:
        """Prepare a job of the fake trainer (``knobs``: its ``FAKE_AXOLOTL_*`` settings)
        and launch it; the record as ``running``."""
        run = run or self.new_run()
        prepare_job(
            self.local_dir(run),
            cpu=self.info.cpu,
            env={"FAKE_AXOLOTL_STEP_SECONDS": "0.02", **(knobs or {})},
            resume=resume,
        )
        job = JobSpec(
            run_id=run.id,
            local_dir=self.local_dir(run),
            secrets={k: SecretStr(v) for k, v in (secrets or {}).items()},
        )
        handle = self.hook.launch_job(executor=self.executor, run=run, job=job)
        assert handle is not None, "launch_job returned None for the plugin's own executor"
        run = run.evolve(job=handle, state=RunState.RUNNING, snapshots=True)
        self.runs[-1] = run
        return run

    def poll(self, run: RunRecord) -> JobPoll:
        poll = self.hook.poll_job(executor=self.executor, run=run)
        assert poll is not None, "poll_job returned None for the plugin's own executor"
        return poll

    def follow(
        self, run: RunRecord, until: Callable[[JobPoll, list[str]], bool] | None = None
    ) -> tuple[JobPoll, list[str]]:
        """Poll until ``until`` (default: the job ended and nothing new came)."""
        lines: list[str] = []
        deadline = time.monotonic() + DEADLINE_S
        ended = False
        while True:
            poll = self.poll(run)
            lines += poll.lines
            if until is not None and until(poll, lines):
                return poll, lines
            if until is None and poll.status.state is not JobState.RUNNING:
                if ended and not poll.lines:
                    return poll, lines
                ended = True
                continue
            assert time.monotonic() < deadline, f"the job did not end; last {poll.status}"
            time.sleep(POLL_S)

    def training(self, run: RunRecord) -> tuple[JobPoll, list[str]]:
        """Follow until the trainer logged a step."""
        return self.follow(run, until=lambda _poll, lines: any('"log"' in x for x in lines))

    def collect(self, run: RunRecord, spec: ArtifactSpec = RESULTS) -> list[str]:
        got = self.hook.collect_artifacts(
            executor=self.executor, run=run, artifacts=spec, dest=self.local_dir(run)
        )
        assert got is not None, "collect_artifacts returned None for the plugin's own executor"
        return list(got)

    def cancel(self, run: RunRecord) -> JobStatus:
        status = self.hook.cancel_job(executor=self.executor, run=run)
        assert status is not None, "cancel_job returned None for the plugin's own executor"
        return status

    def log(self, run: RunRecord, offset: int = 0) -> tuple[bytes, int]:
        chunk = self.hook.read_job_log(executor=self.executor, run=run, offset=offset)
        assert chunk is not None, "read_job_log returned None for the plugin's own executor"
        return chunk.data, chunk.offset

    def whole_log(self, run: RunRecord) -> bytes:
        data, offset = b"", 0
        while True:
            chunk, offset = self.log(run, offset)
            if not chunk:
                return data
            data += chunk


def _events(lines: list[str]) -> list[dict[str, Any]]:
    events = []
    for line in lines:
        event = json.loads(line)  # every line complete: a partial one would not parse
        assert isinstance(event, dict) and isinstance(event.get("event"), str), line
        events.append(event)
    return events


def _snapshot(poll: JobPoll) -> dict[str, Any]:
    assert poll.snapshot is not None, "the job saved no snapshot.json"
    snapshot = json.loads(poll.snapshot)
    assert snapshot["checkpoint"] == f"output/checkpoint-{snapshot['step']}"
    return snapshot


class ExecutorContract:
    """The contract tests. Subclass it (``class TestMine(ExecutorContract)``) and define the
    ``contract_target`` fixture."""

    @pytest.fixture
    def contract_target(self) -> ContractTarget:
        raise NotImplementedError("define the contract_target fixture in your subclass")

    @pytest.fixture
    def driver(self, contract_target: ContractTarget, tmp_path: Path) -> Iterator[Driver]:
        plugins = manager_with(contract_target.plugin)
        kind = contract_target.table["kind"]
        assert kind in plugins.kinds, f"the plugin registers no target kind `{kind}`"
        model = plugins.kinds[kind].model_validate(dict(contract_target.table))
        project_dir = tmp_path / "contract-project"
        (project_dir / "runs").mkdir(parents=True)
        project = Project(
            dir=project_dir,
            settings=contract_settings(contract_target.name, model),
            env=dict(contract_target.env),
        )
        hook = plugins.hook
        executor = hook.create_executor(
            name=contract_target.name, target=model, project=project, run=None
        )
        assert executor is not None, "create_executor returned None for the plugin's own kind"
        info = hook.describe_target(executor=executor)
        assert isinstance(info, TargetInfo), "describe_target must return a TargetInfo"
        hook.prepare_target(executor=executor)
        driver = Driver(hook, executor, contract_target, project_dir, info)
        yield driver
        for run in driver.runs:
            if run.job is not None:
                # Best effort: nothing a test started may outlive it.
                with contextlib.suppress(Exception):
                    hook.cancel_job(executor=executor, run=run)
        hook.release_executor(executor=executor, run=None, outcome=None)

    # Launch, follow, results.

    def test_a_job_runs_to_its_end_with_complete_metric_lines(self, driver: Driver) -> None:
        run = driver.launch(knobs={"FAKE_AXOLOTL_STEPS": "4"})
        poll, lines = driver.follow(run)
        assert poll.status == JobStatus.exited(0)
        events = _events(lines)
        kinds = [event["event"] for event in events]
        assert kinds[0] == "stage" and events[0]["name"] == "train"
        assert kinds.count("begin") == 1 and kinds.count("end") == 1
        assert [e["step"] for e in events if e["event"] == "log" and "loss" in e] == [1, 2, 3, 4]

    def test_the_results_come_home_verified(self, driver: Driver) -> None:
        run = driver.launch(knobs={"FAKE_AXOLOTL_STEPS": "3"})
        driver.follow(run)
        got = driver.collect(run)
        local = driver.local_dir(run)
        assert "output/adapter_model.safetensors" in got
        assert (local / "output" / "adapter_model.safetensors").read_bytes() == (
            b"fake adapter weights"
        )
        assert not any(p.startswith("output/checkpoint-") for p in got)
        assert (local / layout.METRICS_FILE).is_file()

    def test_a_corrupted_result_is_refused(self, driver: Driver) -> None:
        run = driver.launch(knobs={"FAKE_AXOLOTL_STEPS": "2"})
        driver.follow(run)
        where = driver.target.job_dir(run) if driver.target.job_dir else None
        if where is None:
            pytest.skip("the job directory is not readable from this machine")
        if where.resolve() == driver.local_dir(run).resolve():
            pytest.skip("the job runs in the run directory at home: nothing travels")
        (where / "output" / "adapter_model.safetensors").write_bytes(b"flipped on the target")
        with pytest.raises(ArtifactMismatch, match=r"adapter_model\.safetensors"):
            driver.collect(run)

    def test_a_job_without_output_is_a_missing_artifact(self, driver: Driver) -> None:
        run = driver.launch(knobs={"FAKE_AXOLOTL_STEPS": "2", "FAKE_AXOLOTL_NO_OUTPUT": "1"})
        poll, _ = driver.follow(run)
        assert poll.status == JobStatus.exited(0)
        with pytest.raises(MissingArtifact) as missing:
            driver.collect(run)
        assert missing.value.path == layout.OUTPUT_DIR

    def test_the_exit_code_of_a_failed_job_is_reported(self, driver: Driver) -> None:
        run = driver.launch(knobs={"FAKE_AXOLOTL_STEPS": "1", "FAKE_AXOLOTL_EXIT": "3"})
        poll, _ = driver.follow(run)
        assert poll.status == JobStatus.exited(3)

    # Snapshots and resume.

    def test_a_snapshot_on_request_stops_the_job_with_its_checkpoint(self, driver: Driver) -> None:
        run = driver.launch(knobs={"FAKE_AXOLOTL_HANG": "1"})
        driver.training(run)
        asked = driver.hook.request_snapshot(executor=driver.executor, run=run, reason="deadline")
        assert asked is True
        poll, _ = driver.follow(run)
        assert poll.status == JobStatus.exited(0)
        snapshot = _snapshot(poll)
        assert snapshot["reason"] in ("deadline", "requested")
        spec = ArtifactSpec(
            paths=(snapshot["checkpoint"], layout.SNAPSHOT_FILE), required=(snapshot["checkpoint"],)
        )
        got = driver.collect(run, spec)
        assert f"{snapshot['checkpoint']}/trainer_state.json" in got

    def test_sigterm_to_the_runner_is_a_graceful_snapshot(self, driver: Driver) -> None:
        if driver.target.signal_runner is None:
            pytest.skip("no way to signal the job's runner given")
        run = driver.launch(knobs={"FAKE_AXOLOTL_HANG": "1", "FAKE_AXOLOTL_WORKERS": "2"})
        driver.training(run)
        driver.target.signal_runner(run)
        poll, _ = driver.follow(run)
        assert poll.status == JobStatus.exited(0)
        assert _snapshot(poll)["reason"] == "requested"

    def test_sigterm_to_every_process_of_the_job_is_a_graceful_snapshot(
        self, driver: Driver
    ) -> None:
        # The fake's workers die of TERM as torch's DataLoader workers do, and fail the
        # trainer: such a stop must still end in a snapshot.
        if driver.target.signal_job is None:
            pytest.skip("no way to signal every process of the job given")
        run = driver.launch(knobs={"FAKE_AXOLOTL_HANG": "1", "FAKE_AXOLOTL_WORKERS": "2"})
        driver.training(run)
        _wait_announced(driver, run, worker=2)
        driver.target.signal_job(run)
        poll, _ = driver.follow(run)
        log = driver.whole_log(run)
        assert poll.status == JobStatus.exited(0), log[-2000:].decode("utf-8", "replace")
        assert b"DataLoader worker" not in log
        assert _snapshot(poll)["reason"] == "requested"

    def test_a_run_resumes_from_a_snapshot(self, driver: Driver) -> None:
        run = driver.launch(knobs={"FAKE_AXOLOTL_HANG": "1"})
        driver.training(run)
        driver.hook.request_snapshot(executor=driver.executor, run=run, reason="requested")
        poll, _ = driver.follow(run)
        snapshot = _snapshot(poll)
        step = snapshot["step"]
        spec = ArtifactSpec(paths=(snapshot["checkpoint"],), required=(snapshot["checkpoint"],))
        driver.collect(run, spec)
        checkpoint = driver.local_dir(run) / snapshot["checkpoint"]
        resumed = driver.launch(
            knobs={"FAKE_AXOLOTL_STEPS": str(step + 2)}, resume=(checkpoint, step)
        )
        poll, lines = driver.follow(resumed)
        assert poll.status == JobStatus.exited(0)
        steps = [e["step"] for e in _events(lines) if e["event"] == "log" and "loss" in e]
        assert steps == [step + 1, step + 2]

    # Cancel.

    def test_cancel_stops_a_running_job_and_is_idempotent(self, driver: Driver) -> None:
        run = driver.launch(knobs={"FAKE_AXOLOTL_HANG": "1", "FAKE_AXOLOTL_CHILD": "1"})
        driver.training(run)
        assert driver.cancel(run).state is JobState.CANCELLED
        assert driver.cancel(run).state is JobState.CANCELLED
        assert driver.poll(run).status.state is JobState.CANCELLED
        before = len(driver.whole_log(run))
        time.sleep(0.5)
        assert len(driver.whole_log(run)) == before, "the job still writes after its cancel"

    def test_cancel_ends_every_process_of_the_job_and_again_does_nothing(
        self, driver: Driver
    ) -> None:
        token = tokens.token_hex(8)
        mark = f"{MARK_VARIABLE}={token}"
        knobs = {"FAKE_AXOLOTL_HANG": "1", "FAKE_AXOLOTL_CHILD": "1", "FAKE_AXOLOTL_WORKERS": "2"}
        run = driver.launch(knobs={**knobs, MARK_VARIABLE: token})
        driver.training(run)
        named = _wait_announced(driver, run, child=1, worker=2)
        seen = with_their_runners(carrying(mark))
        if seen:
            missing = set(named) - {process.pid for process in seen}
            assert not missing, f"the fake's child and workers {sorted(missing)} do not run"
        assert driver.cancel(run).state is JobState.CANCELLED
        deadline = time.monotonic() + KILL_GRACE_S  # a KILL sent is not yet a KILL served
        while left := {process for process in seen if process.running()} | carrying(mark):
            assert time.monotonic() < deadline, (
                f"processes of the job outlived its cancel: {sorted(left)}"
            )
            time.sleep(POLL_S)

        before = (_files(driver, run), driver.whole_log(run))
        assert driver.cancel(run).state is JobState.CANCELLED
        assert (_files(driver, run), driver.whole_log(run)) == before, (
            "a second cancel changed the job's files or log"
        )
        assert driver.poll(run).status.state is JobState.CANCELLED
        if not seen:
            pytest.skip("the job's processes are not visible from this machine: only the "
                        "second cancel was checked")

    def test_cancel_never_signals_a_finished_job(self, driver: Driver) -> None:
        run = driver.launch(knobs={"FAKE_AXOLOTL_STEPS": "2"})
        driver.follow(run)
        assert driver.cancel(run) == JobStatus.exited(0)
        assert driver.poll(run).status == JobStatus.exited(0)
        assert "output/adapter_model.safetensors" in driver.collect(run)

    # Logs.

    def test_the_log_is_readable_while_the_job_runs_and_after(self, driver: Driver) -> None:
        run = driver.launch(knobs={"FAKE_AXOLOTL_HANG": "1"})
        driver.training(run)
        deadline = time.monotonic() + DEADLINE_S
        while b"fake axolotl: step" not in driver.whole_log(run):
            assert time.monotonic() < deadline, "no step in the log of a running job"
            time.sleep(POLL_S)
        driver.cancel(run)
        finished = driver.launch(knobs={"FAKE_AXOLOTL_STEPS": "2"})
        driver.follow(finished)
        data, offset = driver.log(finished, 0)
        assert b"fake axolotl: training completed" in driver.whole_log(finished)
        assert offset >= len(data) > 0
        assert driver.log(finished, len(driver.whole_log(finished)))[0] == b""

    # Secrets.

    def test_a_secret_reaches_the_job_and_nothing_else(self, driver: Driver) -> None:
        secret = "hf_" + tokens.token_hex(16)
        run = driver.launch(
            knobs={"FAKE_AXOLOTL_HANG": "1", "FAKE_AXOLOTL_SHOW_SECRET": SECRET_NAME},
            secrets={SECRET_NAME: secret},
        )
        driver.training(run)
        digest = hashlib.sha256(secret.encode()).hexdigest()
        deadline = time.monotonic() + DEADLINE_S
        while f"{SECRET_NAME} sha256 {digest}".encode() not in driver.whole_log(run):
            assert time.monotonic() < deadline, "the job never saw its secret"
            time.sleep(POLL_S)
        holders = _cmdlines_holding(secret.encode())
        assert not holders, f"the secret is on a command line: {holders}"
        driver.hook.request_snapshot(executor=driver.executor, run=run, reason="requested")
        driver.follow(run)
        driver.collect(run)
        places = [driver.local_dir(run)]
        if driver.target.job_dir is not None and (where := driver.target.job_dir(run)):
            places.append(where)
        for place in places:
            for path in place.rglob("*"):
                if path.is_file() and not path.is_symlink():
                    assert secret.encode() not in path.read_bytes(), f"the secret is in {path}"
        assert secret not in run.model_dump_json()

    # Claims.

    def test_a_claimed_run_id_is_not_claimed_again(self, driver: Driver) -> None:
        run = driver.new_run()
        again = driver.hook.claim_run_dir(executor=driver.executor, run_id=run.id)
        assert again == ""

    # Serving (capability "serve"): a long-lived process on the target's loopback.

    def test_a_served_process_is_reached_from_here_and_ended(self, driver: Driver) -> None:
        hook, executor = driver.hook, driver.executor
        handle = _serve(driver, idle_seconds=600)
        try:
            url = _reached(driver, handle)
            assert url.startswith("http://127.0.0.1:"), f"reach_serve gave {url!r}"
        finally:
            ended = hook.stop_serve(executor=executor, handle=handle, keep_log=False)
        assert ended is True, "stop_serve of a running process must answer True"
        assert hook.reach_serve(executor=executor, handle=handle) == "", "it is still up"
        again = hook.stop_serve(executor=executor, handle=handle, keep_log=False)
        assert again is False, "stop_serve again must do nothing and answer False"

    def test_a_stale_serve_handle_signals_nothing(self, driver: Driver) -> None:
        hook, executor = driver.hook, driver.executor
        handle = _serve(driver, idle_seconds=600)
        try:
            _reached(driver, handle)
            stale = ServeHandle(handle.serve_id, handle.dir + "-other", handle.pid, handle.port)
            assert hook.stop_serve(executor=executor, handle=stale, keep_log=False) is False
            assert hook.reach_serve(executor=executor, handle=stale) == ""
            assert hook.reach_serve(executor=executor, handle=handle), "a stale handle ended it"
        finally:
            hook.stop_serve(executor=executor, handle=handle, keep_log=False)

    def test_a_served_process_without_a_connection_ends_at_its_idle_limit(
        self, driver: Driver
    ) -> None:
        hook, executor = driver.hook, driver.executor
        handle = _serve(driver, idle_seconds=1)
        try:
            deadline = time.monotonic() + DEADLINE_S
            while hook.reach_serve(executor=executor, handle=handle):
                assert time.monotonic() < deadline, "the idle watchdog did not end it"
                time.sleep(0.5)
        finally:
            hook.stop_serve(executor=executor, handle=handle, keep_log=False)


def _serve(driver: Driver, idle_seconds: int) -> ServeHandle:
    """Python's own HTTP server, served on the target (skipped where it cannot serve)."""
    if "serve" not in driver.executor.capabilities:
        pytest.skip("the executor does not declare the capability serve")

    def command(port: int, bin_dir: str) -> list[str]:
        return ["python3", "-m", "http.server", str(port), "--bind", "127.0.0.1"]

    spec = ServeSpec(f"contract-{tokens.token_hex(4)}", command, idle_seconds)
    handle = driver.hook.start_serve(executor=driver.executor, spec=spec)
    assert isinstance(handle, ServeHandle), "start_serve must return a ServeHandle"
    return handle


def _reached(driver: Driver, handle: ServeHandle) -> str:
    """The URL reach_serve gives, once the served server answers a GET there."""
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    deadline = time.monotonic() + DEADLINE_S
    while True:
        url = driver.hook.reach_serve(executor=driver.executor, handle=handle)
        assert url, "reach_serve says the served process is gone"
        try:
            with direct.open(url + "/", timeout=5) as reply:
                assert reply.status == 200
                return url
        except OSError:
            assert time.monotonic() < deadline, f"nothing answered at {url}"
            time.sleep(0.2)


KILL_GRACE_S = 2.0
"""How long after ``cancel_job`` returned a process of the job may still be dying."""
MARK_VARIABLE = "CONTRACT_JOB_MARK"
"""A variable of the job's environment that every process of the job inherits: how the
cancel test finds them on this machine."""


def _wait_announced(driver: Driver, run: RunRecord, **counts: int) -> list[int]:
    """The pids of the processes the fake trainer started, once it named ``counts`` of them
    (``child=1, worker=2``) in the job's log."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        named = announced(driver.whole_log(run))
        if all(len(named.get(kind, [])) >= count for kind, count in counts.items()):
            return [pid for kind in counts for pid in named[kind]]
        assert time.monotonic() < deadline, f"the fake never named its {counts} in the log"
        time.sleep(POLL_S)


def _files(driver: Driver, run: RunRecord) -> dict[str, tuple[int, int]]:
    """Every file of the job directory with its size and modification time; empty when
    this machine cannot read the directory."""
    where = driver.target.job_dir(run) if driver.target.job_dir else None
    if where is None or not where.is_dir():
        return {}
    files = {}
    for path in sorted(where.rglob("*")):
        if path.is_file() and not path.is_symlink():
            stat = path.stat()
            files[str(path.relative_to(where))] = (stat.st_size, stat.st_mtime_ns)
    return files


def _cmdlines_holding(secret: bytes) -> list[str]:
    """Processes of this machine whose command line holds ``secret``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if secret in (entry / "cmdline").read_bytes():
                    found.append(entry.name)
            except OSError:
                continue
    return found
