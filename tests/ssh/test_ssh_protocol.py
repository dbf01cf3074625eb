"""The job protocol over a real sshd: ``HostExecutor`` over ``SshHost``."""

from __future__ import annotations

import json
import shlex
import subprocess
import threading
from pathlib import Path

import pytest
from tests.helpers.sshd import cmdlines_holding
from tests.helpers.tools import need

from overbrainer.errors import UserError
from overbrainer.job.host import HostError
from overbrainer.job.spec import ArtifactSpec, JobState

WRITE_METRICS = (
    'printf \'{"event":"log","step":1}\\n\' >> metrics.jsonl; '
    "mkdir -p output && echo weights > output/adapter.bin; exit 0"
)
TOKEN = "hf_overbrainerTestToken7c1e9a"


def running(poll):
    return poll.status.state is JobState.RUNNING


def test_a_job_runs_detached_and_reports_its_lines_and_exit(bench):
    run = bench.launch(bench.new_run(), WRITE_METRICS + "; exit 0")
    assert run.job.pid > 1
    poll, lines = bench.wait(run)
    assert poll.status.state is JobState.EXITED
    assert poll.status.exit_code == 0
    assert [json.loads(line)["event"] for line in lines] == ["stage", "log"]


def test_the_exit_code_is_kept(bench):
    run = bench.launch(bench.new_run(), "exit 3")
    poll, _ = bench.wait(run)
    assert poll.status.exit_code == 3


def test_the_job_runs_in_its_own_session_with_no_pipe_to_the_connection(bench):
    run = bench.launch(bench.new_run(), "sleep 300")
    bench.wait(run, until=running)
    pid = run.job.pid
    session = subprocess.run(
        [need("ps"), "-o", "sid=", "-p", str(pid)], capture_output=True, text=True, check=True
    ).stdout
    assert session.strip() == str(pid)
    for fd in ("0", "1", "2"):
        target = Path(f"/proc/{pid}/fd/{fd}").resolve()
        assert str(target) in ("/dev/null", f"{run.remote_dir}/job.log")


def test_the_job_survives_the_connection_closing(bench):
    run = bench.launch(bench.new_run(), "while [ ! -f go ]; do sleep 0.05; done; " + WRITE_METRICS)
    _, lines = bench.wait(run, until=running)
    bench.executor.close()  # the connection is gone; the next call opens another
    poll, more = bench.wait(run, until=lambda p: True)
    assert poll.status.state is JobState.RUNNING
    bench.executor.host.write_file(f"{run.remote_dir}/go", b"")
    poll, rest = bench.wait(run)
    assert poll.status.exit_code == 0
    assert [json.loads(line)["event"] for line in lines + more + rest] == ["stage", "log"]


def test_the_secret_reaches_the_job_environment_and_no_command_line(bench):
    hits: list[str] = []
    scanning = threading.Event()
    scanning.set()

    def scan() -> None:  # client and server are this machine: every process is seen
        while scanning.is_set():
            hits.extend(cmdlines_holding(TOKEN.encode()))

    scanner = threading.Thread(target=scan, daemon=True)
    scanner.start()
    try:
        run = bench.launch(
            bench.new_run(),
            'printf %s "$HF_TOKEN" > seen; while [ ! -f go ]; do sleep 0.05; done',
            secrets={"HF_TOKEN": TOKEN},
        )
        bench.wait(run, until=running)
        seen = Path(run.remote_dir) / "seen"
        bench.wait(run, until=lambda p: seen.exists() and seen.read_text() == TOKEN)
        hits.extend(cmdlines_holding(TOKEN.encode()))  # the job and its wrapper, running
        (Path(run.remote_dir) / "go").touch()
        poll, _ = bench.wait(run)
    finally:
        scanning.clear()
        scanner.join()
    assert poll.status.exit_code == 0
    assert hits == []
    assert TOKEN not in (Path(run.remote_dir) / "job.log").read_text()
    assert TOKEN not in (Path(run.remote_dir) / "job.sh").read_text()


def test_a_secret_with_a_line_break_is_refused(bench):
    with pytest.raises(UserError, match="HF_TOKEN holds a line break"):
        bench.launch(bench.new_run(), "exit 0", secrets={"HF_TOKEN": "hf_a\nrm -rf /"})


def test_artifacts_with_any_name_come_home_verified(bench):
    names = ["plain.txt", "with space.txt", "quote'and\"double.txt", "new\nline.txt", "ünï.txt"]
    script = (
        "mkdir -p output/sub output/checkpoint-3 && "
        + " && ".join(f"printf %s {shlex.quote(n)} > output/sub/{shlex.quote(n)}" for n in names)
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
    assert (dest / "metrics.jsonl").read_text() == "{}\n"
    assert not (dest / "output" / "checkpoint-3").exists()


def test_a_file_changed_after_the_manifest_is_caught(bench):
    run = bench.launch(bench.new_run(), "mkdir -p output && echo original > output/model.bin")
    bench.wait(run)
    host = bench.executor.host
    real_download = host.download

    def download_after_a_change(root, files, dest):
        host.check(f"echo changed on the target > {shlex.quote(root)}/output/model.bin\n")
        real_download(root, files, dest)

    host.download = download_after_a_change
    spec = ArtifactSpec(paths=("output",), required=("output",))
    mismatch = r'"output/model.bin" differs from the target \(SHA-256 mismatch\)'
    with pytest.raises(UserError, match=mismatch):
        bench.executor.collect(run, spec, bench.tmp / "runs" / run.id)


def _pids_in_group(pgid: int) -> list[str]:
    """The live processes of group ``pgid`` (zombies left for a slow init do not run)."""
    cmd = [need("ps"), "-eo", "pid=,pgid=,stat="]
    table = subprocess.run(cmd, capture_output=True, text=True, check=True)
    rows = (line.split() for line in table.stdout.splitlines())
    return [pid for pid, group, stat in rows if group == str(pgid) and not stat.startswith("Z")]


def test_cancel_kills_the_remote_process_group_children_included(bench):
    run = bench.launch(bench.new_run(), "sleep 300 & sleep 300 & echo started > started; wait")
    bench.wait(run, until=lambda p: (Path(run.remote_dir) / "started").exists())
    assert len(_pids_in_group(run.job.pid)) >= 4  # wrapper, job script, two children
    assert bench.executor.cancel(run).state is JobState.CANCELLED
    assert _pids_in_group(run.job.pid) == []
    assert bench.executor.cancel(run).state is JobState.CANCELLED  # a no-op the second time
    assert bench.executor.poll(run).status.state is JobState.CANCELLED


def test_polls_fail_while_sshd_is_down_and_reconnect_once_it_is_back(bench, sshd):
    run = bench.launch(bench.new_run(), "while [ ! -f go ]; do sleep 0.05; done; " + WRITE_METRICS)
    _, lines = bench.wait(run, until=running)
    sshd.stop()
    for _ in range(2):
        with pytest.raises(HostError, match=r"cannot reach target `box`|lost the connection"):
            bench.executor.poll(run)
    (Path(run.remote_dir) / "go").touch()  # the job kept running without its connection
    sshd.start()
    poll, more = bench.wait(run)
    assert poll.status.state is JobState.EXITED
    assert poll.status.exit_code == 0
    assert [json.loads(line)["event"] for line in lines + more] == ["stage", "log"]


def test_a_snapshot_request_reaches_the_job(bench):
    run = bench.launch(
        bench.new_run(),
        "while [ ! -f snapshot.request ]; do sleep 0.05; done; "
        'echo \'{"checkpoint":"output/checkpoint-2","step":2}\' > snapshot.json',
    )
    bench.executor.request_snapshot(run, "deadline")
    poll, _ = bench.wait(run)
    assert poll.snapshot_request == "deadline"
    assert json.loads(poll.snapshot)["step"] == 2


def test_upload_and_stream_out_carry_a_tree(bench, tmp_path):
    source = tmp_path / "tree"
    (source / "a b").mkdir(parents=True)
    (source / "a b" / "big.bin").write_bytes(bytes(range(256)) * 20000)
    (source / "skip.me").write_text("no")
    root = f"{bench.executor.root}/upload"
    bench.executor.host.upload(source, root, skip=("skip.me",))
    assert (Path(root) / "a b" / "big.bin").read_bytes() == bytes(range(256)) * 20000
    assert not (Path(root) / "skip.me").exists()


def test_a_container_job_gets_its_secret_from_the_environment(make_bench, sshd):
    # A fake engine first on the remote PATH records how it was called.
    fake_bin = sshd.dir / "bin"
    fake_bin.mkdir()
    engine = fake_bin / "docker"
    engine.write_text(
        '#!/bin/sh\nprintf "%s\\n" "$@" > "$HOME/engine.args"\n'
        'printf %s "$HF_TOKEN" > "$HOME/engine.token"\n'
    )
    engine.chmod(0o755)
    sshd.stop()
    sshd.env["PATH"] = f"{fake_bin}:/usr/bin:/bin"
    sshd.start()
    bench = make_bench(runtime="docker", image="example/axolotl:1", device="gpu")
    run = bench.launch(bench.new_run(), "exit 0", secrets={"HF_TOKEN": TOKEN})
    poll, _ = bench.wait(run)
    assert poll.status.exit_code == 0
    args = (sshd.home / "engine.args").read_text().splitlines()
    assert args[:6] == ["run", "--rm", "--name", f"overbrainer-{run.id}", "--gpus", "all"]
    assert args[args.index("-e") + 1] == "HF_TOKEN"
    # The image runs the job's runner, from the run directory mounted at /workspace/run.
    assert args[-3:] == ["example/axolotl:1", "python3", "/workspace/run/run_job.py"]
    assert TOKEN not in "\n".join(args)
    assert (sshd.home / "engine.token").read_text() == TOKEN


def test_a_container_job_on_a_host_without_a_gpu_asks_for_none(make_bench, sshd):
    fake_bin = sshd.dir / "bin"
    fake_bin.mkdir()
    engine = fake_bin / "docker"
    engine.write_text('#!/bin/sh\nprintf "%s\\n" "$@" > "$HOME/engine.args"\n')
    engine.chmod(0o755)
    sshd.stop()
    sshd.env["PATH"] = f"{fake_bin}:/usr/bin:/bin"
    sshd.start()
    bench = make_bench(runtime="docker")
    assert bench.executor.describe().device == "cpu"  # no nvidia-smi on this host
    run = bench.launch(bench.new_run(), "exit 0")
    bench.wait(run)
    args = (sshd.home / "engine.args").read_text().splitlines()
    assert "--gpus" not in args and "--device" not in args
