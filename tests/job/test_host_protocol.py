"""The job protocol on a POSIX host, through the real local transport and sh."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pytest
from tests.helpers.tools import need
from tests.helpers.trainer import group_alive

from overbrainer.errors import UserError
from overbrainer.plugin import ArtifactSpec, JobHandle, JobState
from overbrainer.plugin.host import HostRuntime, LocalHost

WRITE_METRICS = (
    'printf \'{"event":"log","step":1}\\n\' >> metrics.jsonl; '
    "mkdir -p output && echo weights > output/adapter.bin; exit 0"
)


def test_a_job_runs_detached_and_reports_its_lines_and_exit(bench):
    run = bench.launch(bench.new_run(), WRITE_METRICS)
    assert run.job.pid > 1
    poll, lines = bench.wait(run)
    assert poll.status.state is JobState.EXITED and poll.status.exit_code == 0
    events = [json.loads(line)["event"] for line in lines]
    assert events == ["stage", "log"]
    assert json.loads(lines[0])["name"] == "train"


def test_the_exit_code_is_kept(bench):
    run = bench.launch(bench.new_run(), "exit 3")
    poll, _ = bench.wait(run)
    assert poll.status.exit_code == 3


def test_the_job_sees_an_allowlisted_environment_and_what_the_target_passes(bench, monkeypatch):
    for name, value in {
        "OVERBRAINER_SECRET_THING": "x",
        "VAULT_TOKEN": "y",
        "OPENAI_API_KEY": "sk-shell-secret",
        "ANTHROPIC_API_KEY": "sk-ant-shell",
        "AWS_SECRET_ACCESS_KEY": "aws-shell",
        "CUDA_VISIBLE_DEVICES": "0",
        "WANTED_SETTING": "passed",
    }.items():
        monkeypatch.setenv(name, value)
    bench.executor.host = LocalHost(os.environ)
    bench.executor.env = dict(os.environ)
    bench.executor.target = replace(bench.executor.target, pass_env=("WANTED_*", "*SECRET*"))
    run = bench.launch(bench.new_run(), "env > env.txt", env={"GREETING": "hello world"})
    bench.wait(run)
    env = dict(
        line.split("=", 1)
        for line in (Path(run.remote_dir) / "env.txt").read_text().splitlines()
        if "=" in line
    )
    assert env["GREETING"] == "hello world"
    assert env["WANTED_SETTING"] == "passed"
    assert env["CUDA_VISIBLE_DEVICES"] == "0" and "PATH" in env and "HOME" in env
    assert env["AWS_SECRET_ACCESS_KEY"] == "aws-shell"  # asked for by "*SECRET*"
    for never in ("OVERBRAINER_SECRET_THING", "VAULT_TOKEN", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        assert never not in env


def test_a_host_runtime_drives_the_protocol_without_a_host_target(bench, monkeypatch):
    """A target of another shape (a machine it makes for the run) hands its runtime keys
    alone."""
    monkeypatch.setenv("WANTED_SETTING", "passed")
    bench.executor.host = LocalHost(os.environ)
    bench.executor.env = dict(os.environ)
    bench.executor.target = HostRuntime(device="cpu", pass_env=("WANTED_*",))
    assert bench.executor.describe().device == "cpu"
    run = bench.launch(bench.new_run(), "env > env.txt")
    poll, _ = bench.wait(run)
    assert (poll.status.state, poll.status.exit_code) == (JobState.EXITED, 0)
    env = (Path(run.remote_dir) / "env.txt").read_text().splitlines()
    assert "WANTED_SETTING=passed" in env


def test_a_host_target_gives_its_runtime_keys_by_name(tmp_path):
    from overbrainer_local import LocalTarget

    assert LocalTarget(kind="local").host_runtime() == HostRuntime()
    target = LocalTarget(kind="local", venv="/opt/ax", device="cpu", install="axolotl",
                         setup="true", pass_env="A_*,B")  # fmt: skip
    assert target.host_runtime() == HostRuntime(
        venv="/opt/ax", device="cpu", install="axolotl", setup="true", pass_env=("A_*", "B")
    )


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"runtime": "docker", "venv": "/opt/ax"}, 'venv applies only to runtime = "native"'),
        ({"runtime": "docker", "install": "axolotl"},
         'install applies only to runtime = "native"'),
        ({"image": "some/image"}, 'image applies only to runtime = "docker"'),
        ({"install": "axolotl"}, "install needs venv: the directory to install Axolotl into"),
        ({"pass_env": ("OVERBRAINER_PROVIDERS__MAIN__API_KEY",)},
         "pass_env 'OVERBRAINER_PROVIDERS__MAIN__API_KEY': overbrainer's own settings and "
         "Vault credentials never reach a job"),
        ({"pass_env": ("A-B",)}, "pass_env 'A-B': a variable name, or a glob of names"),
    ],
)  # fmt: skip
def test_a_host_runtime_is_checked_as_a_host_target_is(keys, message):
    from overbrainer_local import LocalTarget

    with pytest.raises(ValueError) as made:
        HostRuntime(**keys)
    assert message in str(made.value)
    table = {**keys, "pass_env": list(keys.get("pass_env", ()))}
    with pytest.raises(ValueError) as set_:
        LocalTarget(kind="local", **table)
    assert message.split(": ", 1)[-1] in str(set_.value)


def test_only_complete_metric_lines_are_read(bench):
    script = (
        'printf \'{"event":"log","step":1}\\n{"event":"log",\' >> metrics.jsonl; '
        "sleep 0.6; printf '\"step\":2}\\n' >> metrics.jsonl"
    )
    run = bench.launch(bench.new_run(), script)
    _first, lines = bench.wait(run, until=lambda p: any('"step":1' in line for line in p.lines))
    assert all(line.endswith("}") for line in lines)
    _poll, more = bench.wait(run)
    assert [json.loads(line)["step"] for line in lines + more if "step" in line] == [1, 2]


def test_a_second_claim_of_the_same_id_is_refused(bench):
    bench.new_run("same_20260101-000000")
    assert bench.executor.claim("same_20260101-000000") == ""


def test_a_snapshot_request_and_the_saved_snapshot_are_seen(bench):
    run = bench.launch(
        bench.new_run(),
        "while [ ! -f snapshot.request ]; do sleep 0.05; done; "
        'echo \'{"checkpoint":"output/checkpoint-2","step":2}\' > snapshot.json',
    )
    bench.executor.request_snapshot(run, "deadline")
    poll, _ = bench.wait(run)
    assert poll.snapshot_request == "deadline"
    assert json.loads(poll.snapshot)["step"] == 2


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_cancel_kills_the_whole_group_at_once_even_a_child_that_ignores_term(bench):
    script = "trap '' TERM; sleep 300 & sleep 300 & wait"
    run = bench.launch(bench.new_run(), script)
    bench.wait(run, until=lambda p: p.status.state is JobState.RUNNING)
    started = time.monotonic()
    status = bench.executor.cancel(run)
    assert status.state is JobState.CANCELLED
    # The runner takes the TERM of a cancel and kills its group: no 10 s wait for KILL.
    assert time.monotonic() - started < 5
    assert not group_alive(run.job.pid)
    ps = subprocess.run(
        [need("ps"), "-eo", "pgid=,stat="], capture_output=True, text=True, check=True
    )
    live = [line.split() for line in ps.stdout.splitlines()]
    assert not [f for f in live if f[0] == str(run.job.pid) and not f[1].startswith("Z")]
    assert bench.executor.cancel(run).state is JobState.CANCELLED  # a no-op the second time
    assert bench.executor.poll(run).status.state is JobState.CANCELLED


def _process_alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


# A rank as torch's launcher starts one: in a session of its own, out of the job's group.
RANK_IN_ITS_OWN_SESSION = (
    "python3 -c \"import subprocess; p = subprocess.Popen(['sleep', '300'], "
    "start_new_session=True); open('rank.pid', 'w').write(str(p.pid)); p.wait()\""
)


def test_cancel_kills_a_process_of_the_job_in_a_session_of_its_own(bench):
    run = bench.launch(bench.new_run(), RANK_IN_ITS_OWN_SESSION)
    rank_file = Path(run.remote_dir, "rank.pid")
    bench.wait(run, until=lambda p: rank_file.exists() and rank_file.read_text().isdigit())
    rank = int(rank_file.read_text())
    try:
        assert os.getpgid(rank) != run.job.pid and _process_alive(rank)
        assert bench.executor.cancel(run).state is JobState.CANCELLED
        assert not _process_alive(rank)
    finally:
        if _process_alive(rank):
            os.kill(rank, signal.SIGKILL)


def test_cancel_kills_what_carries_the_token_when_the_group_is_gone_already(bench):
    # The runner died (the OOM killer, a KILL) and left a rank in a session of its own.
    run = bench.new_run()
    gone = subprocess.Popen(["true"])
    gone.wait()
    rank = _foreign_group(bench.tmp, token="b" * 32)
    try:
        run = run.evolve(job=JobHandle(dir=run.remote_dir, pid=gone.pid, token="b" * 32),
                         state="running")  # fmt: skip
        Path(run.remote_dir, "job.pid").write_text(f"{gone.pid}\n")
        time.sleep(0.2)
        assert bench.executor.cancel(run).state is JobState.CANCELLED
        rank.wait(timeout=5)
        assert not group_alive(rank.pid)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(rank.pid, signal.SIGKILL)
        rank.wait()


def _foreign_group(tmp_path: Path, token: str | None = None) -> subprocess.Popen:
    """A process group of its own that ignores TERM, carrying ``token`` as a job would."""
    env = {**os.environ, "OVERBRAINER_JOB": token} if token else dict(os.environ)
    env.pop("OVERBRAINER_JOB", None) if token is None else None
    return subprocess.Popen(
        ["sh", "-c", "trap '' TERM; sleep 300 & wait"],
        start_new_session=True,
        env=env,
        cwd=tmp_path,
    )


def test_cancel_sends_kill_after_ten_seconds_to_a_job_group_that_ignores_term(bench):
    run = bench.new_run()
    group = _foreign_group(bench.tmp, token="a" * 32)
    try:
        job = JobHandle(dir=run.remote_dir, pid=group.pid, token="a" * 32)
        run = run.evolve(job=job, state="running")
        Path(run.remote_dir, "job.pid").write_text(f"{group.pid}\n")
        time.sleep(0.2)
        started = time.monotonic()
        assert bench.executor.cancel(run).state is JobState.CANCELLED
        assert time.monotonic() - started >= 9  # TERM was ignored: KILL after the 10 s wait
        assert not group_alive(group.pid)
    finally:
        group.kill()
        group.wait()


def test_cancel_refuses_a_recorded_pid_that_is_not_the_job(bench):
    # A stale or edited run.json naming another process group: it is never signalled.
    run = bench.launch(bench.new_run(), "sleep 300")
    bench.wait(run, until=lambda p: p.status.state is JobState.RUNNING)
    other = _foreign_group(bench.tmp)
    try:
        time.sleep(0.2)
        stale = run.evolve(job=run.job.model_copy(update={"pid": other.pid}))
        with pytest.raises(UserError) as refused:
            bench.executor.cancel(stale)
        assert str(refused.value) == (
            f"cannot cancel the job of run {run.id}: process group {other.pid} is not this "
            "job's: none of its processes carries the job's token (its leader runs in "
            f"{bench.tmp})"
        )
        assert group_alive(other.pid)
        assert not Path(run.remote_dir, "cancelling").exists()
        # A job.pid rewritten to name the other group reads lost, never running.
        pid_file = Path(run.remote_dir, "job.pid")
        pid_file.write_text(f"{other.pid}\n")
        assert bench.executor.poll(run).status.state is JobState.LOST
        pid_file.write_text(f"{run.job.pid}\n")
        assert bench.executor.poll(run).status.state is JobState.RUNNING
    finally:
        other.kill()
        other.wait()
    assert bench.executor.cancel(run).state is JobState.CANCELLED


def test_without_a_token_a_group_is_the_jobs_only_when_it_runs_in_the_jobs_directory(bench):
    # The reference tool's records and older ones carry no token: the directory ties them.
    run = bench.launch(bench.new_run(), "sleep 300")
    bench.wait(run, until=lambda p: p.status.state is JobState.RUNNING)
    untied = run.evolve(job=run.job.model_copy(update={"token": None}))
    assert bench.executor.poll(untied).status.state is JobState.RUNNING
    elsewhere = bench.tmp / "elsewhere"
    elsewhere.mkdir()
    other = _foreign_group(elsewhere)
    try:
        time.sleep(0.2)
        stale = untied.evolve(job=untied.job.model_copy(update={"pid": other.pid}))
        with pytest.raises(UserError) as refused:
            bench.executor.cancel(stale)
        assert str(refused.value) == (
            f"cannot cancel the job of run {run.id}: process group {other.pid} is not this "
            "job's: its run record has no job token and none of its processes runs in the "
            f"job's directory (they run in {elsewhere.resolve()}); nothing was signalled"
        )
        assert group_alive(other.pid)
        assert not Path(run.remote_dir, "cancelling").exists()
        pid_file = Path(run.remote_dir, "job.pid")
        pid_file.write_text(f"{other.pid}\n")
        assert bench.executor.poll(untied).status.state is JobState.LOST
        pid_file.write_text(f"{run.job.pid}\n")
    finally:
        os.killpg(other.pid, signal.SIGKILL)
        other.wait()
    assert bench.executor.cancel(untied).state is JobState.CANCELLED
    assert not group_alive(run.job.pid)


def test_cancel_never_signals_a_finished_job(bench):
    run = bench.launch(bench.new_run(), "exit 0")
    bench.wait(run)
    status = bench.executor.cancel(run)
    assert status.state is JobState.EXITED and status.exit_code == 0
    assert not (Path(run.remote_dir) / "cancelled").exists()


def test_a_killed_wrapper_reads_lost(bench):
    run = bench.launch(bench.new_run(), "sleep 300")
    bench.wait(run, until=lambda p: p.status.state is JobState.RUNNING)
    os.killpg(run.job.pid, signal.SIGKILL)
    poll, _ = bench.wait(run)
    assert poll.status.state is JobState.LOST


def test_artifacts_with_any_name_come_home_verified(bench):
    names = ["plain.txt", "with space.txt", "quote'and\"double.txt", "new\nline.txt", "ünï.txt"]
    script = (
        "mkdir -p output/sub output/checkpoint-3 && "
        + " && ".join(f"printf %s {_sh(n)} > output/sub/{_sh(n)}" for n in names)
        + " && echo ckpt > output/checkpoint-3/w && echo '{}' > metrics.jsonl"
    )
    run = bench.launch(bench.new_run(), script)
    bench.wait(run)
    dest = bench.tmp / "runs" / run.id
    spec = ArtifactSpec(
        paths=("output", "metrics.jsonl", "job.log"),
        required=("output",),
        exclude=("checkpoint-*",),
    )
    got = bench.executor.collect(run, spec, dest)
    assert sorted(Path(p).name for p in got if p.startswith("output/")) == sorted(names)
    for name in names:
        assert (dest / "output" / "sub" / name).read_text() == name
    assert not (dest / "output" / "checkpoint-3").exists()


def test_a_missing_required_artifact_is_named(bench):
    run = bench.launch(bench.new_run(), "echo '{}' > metrics.jsonl")
    bench.wait(run)
    spec = ArtifactSpec(paths=("output", "metrics.jsonl"), required=("output",))
    with pytest.raises(UserError, match='"output" is not on the target'):
        bench.executor.collect(run, spec, bench.tmp / "runs" / run.id)


def test_a_file_changed_after_the_manifest_is_caught(bench):
    run = bench.launch(bench.new_run(), "mkdir -p output && echo original > output/model.bin")
    bench.wait(run)
    host = bench.executor.host
    real_download = host.download

    def download_after_a_change(root, files, dest):
        Path(root, "output", "model.bin").write_text("changed on the target\n")
        real_download(root, files, dest)

    host.download = download_after_a_change
    spec = ArtifactSpec(paths=("output",), required=("output",))
    with pytest.raises(
        UserError, match=r'"output/model.bin" differs from the target \(SHA-256 mismatch\)'
    ):
        bench.executor.collect(run, spec, bench.tmp / "runs" / run.id)


def _sh(name: str) -> str:
    import shlex

    return shlex.quote(name)


def test_a_manifest_that_cannot_be_made_is_an_error_not_an_empty_list(bench):
    import shutil

    from overbrainer.job.host import HostError

    run = bench.launch(bench.new_run(), "mkdir -p output && echo x > output/a")
    bench.wait(run)
    # the wrapper's last move (exit_code.tmp to exit_code) may still be under way
    deadline = time.monotonic() + 20
    while Path(run.remote_dir, "exit_code.tmp").exists() or not Path(
        run.remote_dir, "exit_code"
    ).exists():
        assert time.monotonic() < deadline, "the wrapper never wrote exit_code"
        time.sleep(0.05)
    shutil.rmtree(run.remote_dir)
    spec = ArtifactSpec(paths=("output",), required=("output",))
    with pytest.raises(HostError, match="cannot list the job's files on the target"):
        bench.executor.collect(run, spec, bench.tmp / "runs" / run.id)


def test_a_group_of_zombies_only_is_not_alive(bench):
    # A job whose processes all ended but were not reaped yet (a slow or absent init): the
    # group answers `kill -0`, yet the job must read lost, not running for ever.
    run = bench.new_run()
    zombie = subprocess.Popen(["true"], start_new_session=True)  # never waited for: a zombie
    try:
        time.sleep(0.3)
        assert _group_alive(zombie.pid)  # kill -0 still answers for it
        Path(run.remote_dir, "job.pid").write_text(f"{zombie.pid}\n")
        assert bench.executor.poll(run).status.state is JobState.LOST
    finally:
        zombie.wait()


def test_what_stays_at_home_is_never_uploaded(bench):
    bench.executor.home_only = (*bench.executor.home_only, "pod.json", "ssh")  # as runpod's
    run = bench.new_run()
    local = bench.tmp / "runs" / run.id
    (local / "run.json").write_text("{}")
    (local / "target.note").write_text("pod running\n")
    (local / "pod.json").write_text("{}")
    (local / "ssh").mkdir()
    (local / "ssh" / "id").write_text("a key")
    run = bench.launch(run, "exit 0")
    bench.wait(run)
    remote = Path(run.remote_dir)
    assert (remote / "job.json").is_file()
    assert not any((remote / name).exists() for name in ("run.json", "target.note", "pod.json"))
    assert not (remote / "ssh").exists()
