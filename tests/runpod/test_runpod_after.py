"""export and compare of a Runpod run, on the fake Runpod: the run's pod is gone after
training, so each command makes a pod of its own (an sshd on 127.0.0.1), works there with
the stand-ins of the runtime and llama.cpp, brings its results home and deletes the pod;
``--keep-pod`` keeps it for the next command; a killed CLI leaves a recorded pod that
``pod ls``/``pod rm`` see and its watchdog deletes."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.helpers.compare import JUDGE_PROMPT, eval_record
from tests.helpers.fake_provider import openai_completion
from tests.helpers.fake_runpod import API_KEY, TIMING, FakeRunpod
from tests.helpers.stand_ins import FAKE_TORCH, FAKE_TRANSFORMERS, Finished
from tests.helpers.trainer import Trainer

from overbrainer_runpod.record import PodRecord, PodState

RUNPOD_TARGET = """
[training]
target = "gpu"
base_model = "models/tiny"
adapter = "lora"

[targets.gpu]
kind = "runpod"
gpu_types = ["NVIDIA A40"]
max_hours = 4
venv = "{venv}"
boot_grace_minutes = 30
retrieve_grace_minutes = 1
"""
HF_TOKEN = "hf_afterPodToken5d2b7c81e0"


class PodRun:
    """A finished run of the ``runpod`` target ``gpu`` whose training pod is deleted."""

    def __init__(self, done: Finished, fake: FakeRunpod) -> None:
        self.finished = done
        self.fake = fake
        self.run_id = done.run_id
        self.run_dir = done.run_dir
        self.cli = Trainer(done.dir, done.venv)

    def after_pod(self) -> dict:
        return json.loads((self.run_dir / "after-pod" / "pod.json").read_text())

    def pod_dirs(self) -> list[Path]:
        return sorted((self.fake.root / "pods").glob(f"*/workspace/overbrainer/{self.run_id}"))


@pytest.fixture
def pod_run(
    finished: Finished,
    fake_runpod: FakeRunpod,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[PodRun]:
    # A lease of 10 s, renewed every 2.5 s: a loaded machine does not lose it.
    monkeypatch.setenv("RUNPOD_OVERBRAINER_TIMING", f"{TIMING},lease_minutes=20")
    # The training image's runtime: the stand-in Python (torch, transformers) and axolotl.
    axolotl = finished.venv / "bin" / "axolotl"
    axolotl.write_text("#!/bin/sh\nexit 0\n")
    axolotl.chmod(0o755)
    config = finished.dir / "overbrainer.toml"
    config.write_text(
        config.read_text().split("\n[training]")[0] + RUNPOD_TARGET.format(venv=finished.venv)
    )
    # Where training worked, on its pod (deleted): nothing is written there any more.
    remote = finished.dir.parent / "deleted-pod" / "workspace" / "overbrainer" / finished.run_id
    finished.record(target="gpu", remote_dir=str(remote))
    training_pod = PodRecord(
        run_id=finished.run_id,
        state=PodState.DELETED,
        pod_id="trainpod0001",
        pod_name=f"overbrainer-{finished.run_id}-1",
        workdir="/workspace/overbrainer",
        deleted_by="client",
    )
    (finished.run_dir / "pod.json").write_text(training_pod.model_dump_json())
    (finished.run_dir / "data").mkdir()
    (finished.run_dir / "data" / "eval.jsonl").write_text(
        "".join(json.dumps(eval_record(i)) + "\n" for i in range(3))
    )
    run = PodRun(finished, fake_runpod)
    yield run
    run.cli.stop_all(fake_runpod.root / "pods")


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_export_makes_a_pod_brings_the_gguf_home_and_deletes_the_pod(pod_run, run_cli):
    result = run_cli("export", pod_run.run_id, "--quantize", "Q8_0")
    assert result.exit_code == 0, result.stderr
    run_id = pod_run.run_id
    gguf = pod_run.run_dir / "output" / "gguf" / f"{run_id}-Q8_0.gguf"
    assert gguf.read_bytes() == b"GGUF converted auto from ../../output quantized 7"
    [record] = pod_run.run_dir.glob("exports/*/export.json")
    assert json.loads(record.read_text())["sha256"] == _sha(gguf)
    assert (record.parent / "export.log").read_text().startswith("converting")
    assert f"export: creating a pod (NVIDIA A40) for run {run_id}" in result.stderr
    assert f"ready for run {run_id}" in result.stderr
    pod = pod_run.after_pod()
    assert pod["state"] == "deleted" and pod["deleted_by"] == "client"
    assert pod["pod_name"] == f"overbrainer-{run_id}-a1"
    assert pod["estimated_spend"] is not None
    assert f"export: pod {pod['pod_id']} of run {run_id} deleted" in result.stderr
    assert not pod_run.fake.alive()
    assert not pod_run.fake.secrets, "the host key's secret outlived the start"
    # The inputs went up to the new pod, where the export ran.
    [remote] = pod_run.pod_dirs()
    assert (remote / "output" / "config.json").is_file()
    assert (remote / "axolotl.yaml").is_file()
    assert (pod_run.run_dir / "after-pod" / "pod" / "boot.log").is_file()
    assert "watching run" in (pod_run.run_dir / "after-pod" / "pod" / "watchdog.log").read_text()
    assert not (pod_run.finished.dir.parent / "deleted-pod").exists()
    # The training pod's record is left alone.
    assert json.loads((pod_run.run_dir / "pod.json").read_text())["pod_id"] == "trainpod0001"


def test_keep_pod_keeps_it_and_the_next_export_reuses_it(pod_run, run_cli):
    run_id = pod_run.run_id
    kept = run_cli("export", run_id, "--quantize", "Q8_0", "--keep-pod")
    assert kept.exit_code == 0, kept.stderr
    pod = pod_run.after_pod()
    assert pod["state"] == "kept"
    assert [p.id for p in pod_run.fake.alive()] == [pod["pod_id"]]
    assert f"overbrainer pod rm {run_id}" in kept.stderr
    listed = run_cli("runs", "ls")
    assert f"pod deleted; after-training pod kept {pod['pod_id']} $0.44/h" in listed.stdout
    time.sleep(1.1)  # export ids are to the second
    again = run_cli("export", run_id, "--quantize", "F16")
    assert again.exit_code == 0, again.stderr
    assert "orphan" not in again.stderr and "no run of this project follows" not in again.stderr
    assert f"export: using the kept pod {pod['pod_id']} of run {run_id}" in again.stderr
    assert pod_run.fake.calls.count("create") == 1
    gguf = pod_run.run_dir / "output" / "gguf" / f"{run_id}-F16.gguf"
    assert gguf.read_bytes() == b"GGUF converted f16 from ../../output"
    # Without --keep-pod this time: deleted at its end.
    assert pod_run.after_pod()["state"] == "deleted"
    assert not pod_run.fake.alive()
    assert "after-training pod deleted about $" in run_cli("runs", "ls").stdout


def test_a_kept_training_pod_is_used_and_left_kept(pod_run, run_cli):
    from overbrainer_runpod.api import RunpodApi
    from overbrainer_runpod.pods import PodLifecycle
    from overbrainer_runpod.timing import timing

    # Make a kept training pod the way `train --keep-pod` leaves it (ready, job ended, kept).
    api = RunpodApi(API_KEY, pod_run.fake.url)
    executor = _executor(pod_run)
    (pod_run.run_dir / "pod.json").unlink()
    remote = executor.claim(pod_run.run_id)
    session = executor.sessions[pod_run.run_id]
    session.host.check(f"cd {remote} && mkdir -p .pod && touch .pod/keep exit_code job.pid\n")
    PodLifecycle(api, pod_run.run_dir, timing()).save(state=PodState.KEPT, keep=True)
    session.host.close()
    pod_run.finished.record(remote_dir=remote)
    pod_id = json.loads((pod_run.run_dir / "pod.json").read_text())["pod_id"]

    result = run_cli("export", pod_run.run_id, "--quantize", "Q8_0")
    assert result.exit_code == 0, result.stderr
    assert f"export: using the kept pod {pod_id} of run {pod_run.run_id}" in result.stderr
    assert "stays kept" in result.stderr
    assert pod_run.fake.calls.count("create") == 1
    assert [p.id for p in pod_run.fake.alive()] == [pod_id]
    assert not (pod_run.run_dir / "after-pod").exists()
    assert (Path(remote) / "exports").is_dir()
    removed = run_cli("pod", "rm", pod_run.run_id)
    assert removed.exit_code == 0, removed.stderr
    assert not pod_run.fake.alive()


def _executor(pod_run: PodRun):
    import overbrainer_runpod
    from overbrainer.plugin import Project
    from overbrainer.testing.jobs import contract_settings, manager_with

    plugins = manager_with(overbrainer_runpod.plugin)
    table = {"kind": "runpod", "gpu_types": ["NVIDIA A40"], "max_hours": 4,
             "venv": str(pod_run.finished.venv), "boot_grace_minutes": 10}  # fmt: skip
    model = plugins.kinds["runpod"].model_validate(table)
    project = Project(pod_run.finished.dir, contract_settings("gpu", model), dict(os.environ))
    return plugins.hook.create_executor(name="gpu", target=model, project=project, run=None)


def test_a_shell_after_training_needs_the_run_and_is_opened_once(pod_run):
    from overbrainer.plugin import UserError
    from overbrainer.plugin.commands import read_run
    from overbrainer_runpod.after import AfterPod

    executor = _executor(pod_run)
    with pytest.raises(UserError) as refused:
        executor.open_shell("export", False)
    assert refused.value.message == "target `gpu`: a shell after training needs the run"
    executor.run = read_run(executor.project, pod_run.run_id)
    executor.after_pod = AfterPod(executor.site, executor.run, "export", False)
    with pytest.raises(UserError) as again:
        executor.open_shell("compare", False)
    assert again.value.message == (
        f"target `gpu`: a shell after training is open already (export of run {pod_run.run_id})"
    )
    assert pod_run.fake.calls.count("create") == 0


def test_compare_of_a_runpod_run_answers_on_a_pod_priced_by_it(
    pod_run, run_cli, provider, monkeypatch
):
    run_id = pod_run.run_id
    gguf = pod_run.run_dir / "output" / "gguf" / f"{run_id}-Q8_0.gguf"
    gguf.parent.mkdir(parents=True)
    gguf.write_bytes(b"GGUF made earlier")
    export_dir = pod_run.run_dir / "exports" / "export_20260101-000000"
    export_dir.mkdir(parents=True)
    (export_dir / "export.json").write_text(
        json.dumps({"quantize": "Q8_0", "file": f"output/gguf/{gguf.name}", "sha256": _sha(gguf),
                    "size": gguf.stat().st_size, "created": "2026-01-01T00:00:00Z"})
    )  # fmt: skip
    monkeypatch.setenv("OVERBRAINER_PROVIDERS__MAIN__BASE_URL", provider.url)
    provider.on(
        lambda seen: JUDGE_PROMPT in seen.prompt,
        openai_completion('{"verdict": "B", "reason": "B says more."}'),
        times=None,
    )
    # Against the parent alone: the base model `models/tiny` is a Hub id the pod would look
    # up (tests/after/test_ssh.py makes a base's GGUF on a remote target).
    result = run_cli("compare", "--run", run_id, "--limit", "3", "--against", "parent")
    assert result.exit_code == 0, result.stderr
    assert f"compare: creating a pod (NVIDIA A40) for run {run_id}" in result.stderr
    [directory] = pod_run.run_dir.glob("compares/*")
    data = json.loads((directory / "compare.json").read_text())
    assert [q["child"] for q in data["questions"]] == [
        f"Child answer to: Question {i}: what is ownership?" for i in range(3)
    ]
    assert data["child_price_from_pod"] is True
    assert json.loads((directory / "setup.json").read_text())["pod_price_per_hour"] == 0.44
    assert "its Runpod pod's" in (directory / "compare.md").read_text()
    [remote] = pod_run.pod_dirs()
    assert (remote / "output" / "gguf" / gguf.name).read_bytes() == gguf.read_bytes()
    assert pod_run.after_pod()["state"] == "deleted"
    assert not pod_run.fake.alive()


def test_a_failing_export_still_deletes_its_pod_and_says_why(pod_run, run_cli):
    stubs = pod_run.finished.venv.parent / "stubs" / "transformers"
    (stubs / "__init__.py").unlink()
    stubs.rmdir()
    result = run_cli("export", pod_run.run_id)
    assert result.exit_code == 1
    assert f"of run {pod_run.run_id} failed: " in result.stderr
    assert "transformers" in result.stderr
    [log] = pod_run.run_dir.glob("exports/*/export.log")
    assert "transformers" in log.read_text()
    assert pod_run.after_pod()["state"] == "deleted"
    assert not pod_run.fake.alive()


def test_an_image_without_the_runtime_is_refused_and_its_pod_deleted(pod_run, run_cli):
    (pod_run.finished.venv / "bin" / "axolotl").unlink()
    result = run_cli("export", pod_run.run_id)
    assert result.exit_code == 1
    assert "error: targets.gpu.venv: the pod's image has no Axolotl in" in result.stderr
    assert pod_run.after_pod()["state"] == "deleted"
    assert not pod_run.fake.alive()


def _slow_export(pod_run: PodRun, env: dict[str, str] | None = None):
    """An export CLI process whose converter hangs on the pod, once it hangs there."""
    (pod_run.finished.toolchain / "slow").write_text("")
    cli = pod_run.cli.spawn("export", pod_run.run_id, env=env)

    def converting() -> bool:
        return any(list(d.glob("exports/*/converter.pid")) for d in pod_run.pod_dirs())

    pod_run.fake.wait_until(converting, timeout=60, what="the converter on the pod")
    return cli


def test_ctrl_c_during_an_export_deletes_its_pod(pod_run):
    cli = _slow_export(pod_run)
    os.kill(cli.pid, signal.SIGINT)
    _, err = cli.communicate(timeout=60)
    assert cli.returncode != 0
    assert "interrupted: export export_" in err and f"of run {pod_run.run_id} cancelled" in err
    assert pod_run.after_pod()["state"] == "deleted"
    assert not pod_run.fake.alive()


def test_ctrl_c_while_the_logs_come_home_still_deletes_the_pod(pod_run, run_cli):
    # Ctrl-C once the export is done, as Runpod's log of the pod is read before the delete.
    main = threading.main_thread().ident
    assert main is not None
    pod_run.fake.podlogs.on_request = lambda: signal.pthread_kill(main, signal.SIGINT)
    result = run_cli("export", pod_run.run_id, "--quantize", "Q8_0")
    assert result.exit_code == 130, result.stderr
    assert "interrupted while the logs of pod" in result.stderr
    assert pod_run.fake.podlogs.requests, "the logs step was not reached"
    pod = pod_run.after_pod()
    assert pod["state"] == "deleted" and pod["deleted_by"] == "client"
    # The client marks the results retrieved, then deletes the pod: its watchdog, told by
    # that mark, may ask first (within a tick: 0.2 s here, a minute on Runpod). The client
    # asks all the same; whoever comes second finds the pod gone.
    assert (pod["pod_id"], "client") in pod_run.fake.terminates
    assert not pod_run.fake.alive()


def test_logs_that_cannot_come_home_are_said_and_the_pod_deleted(pod_run, run_cli, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (pod_run.run_dir / "after-pod").mkdir()
    (pod_run.run_dir / "after-pod" / "pod").symlink_to(elsewhere)
    result = run_cli("export", pod_run.run_id, "--quantize", "Q8_0")
    assert result.exit_code == 0, result.stderr
    pod = pod_run.after_pod()
    assert (
        f"export: the logs of pod {pod['pod_id']} could not come home: "
        f"runs/{pod_run.run_id}/after-pod/pod is a symbolic link: refusing to write through it"
    ) in result.stderr
    assert list(elsewhere.iterdir()) == []
    assert pod["state"] == "deleted" and not pod_run.fake.alive()


def test_a_pod_that_cannot_be_marked_kept_is_said_and_recorded_kept(pod_run, run_cli):
    (pod_run.finished.toolchain / "slow").write_text("")
    cli = pod_run.cli.spawn("export", pod_run.run_id, "--keep-pod")

    def converter() -> list[Path]:
        return [p for d in pod_run.pod_dirs() for p in d.glob("exports/*/converter.pid")]

    pod_run.fake.wait_until(converter, timeout=60, what="the converter on the pod")
    [remote] = pod_run.pod_dirs()
    # `touch .pod/keep` fails (root or not) through a link to nowhere.
    (remote / ".pod" / "keep").symlink_to(remote / "nowhere" / "keep")
    [pid_file] = converter()
    os.kill(int(pid_file.read_text()), signal.SIGKILL)  # the export ends (failed)
    _, err = cli.communicate(timeout=60)
    pod = pod_run.after_pod()
    assert f"runpod: cannot mark pod {pod['pod_id']} kept: " in err
    assert pod["state"] == "kept"
    removed = run_cli("pod", "rm", pod_run.run_id)
    assert removed.exit_code == 0, removed.stderr
    assert not pod_run.fake.alive()


def test_a_killed_export_leaves_a_recorded_pod_that_pod_ls_and_pod_rm_see(pod_run, run_cli):
    env = {"OVERBRAINER_HF_TOKEN": HF_TOKEN}
    cli = _slow_export(pod_run, env)
    # No secret on any command line, here or on the pod, while it works.
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            assert API_KEY.encode() not in argv and HF_TOKEN.encode() not in argv
    os.kill(cli.pid, signal.SIGKILL)
    cli.wait()
    pod = pod_run.after_pod()
    assert pod["state"] == "ready" and pod["pod_id"]
    listed = run_cli("pod", "ls")
    assert listed.exit_code == 0, listed.stderr
    assert f"{pod['pod_id']}  RUNNING" in listed.stdout
    assert f"run {pod_run.run_id} (after training)" in listed.stdout
    assert "not of this project" not in listed.stdout
    removed = run_cli("pod", "rm", pod_run.run_id)
    assert removed.exit_code == 0, removed.stderr
    assert f"pod {pod['pod_id']} of run {pod_run.run_id} (after training) deleted" in (
        removed.stdout
    )
    assert not pod_run.fake.alive()
    assert pod_run.after_pod()["deleted_by"] == "pod rm"


def test_the_watchdog_deletes_the_pod_of_a_killed_export(pod_run):
    cli = _slow_export(pod_run)
    pod_id = pod_run.fake.alive()[0].id
    os.kill(cli.pid, signal.SIGKILL)
    cli.wait()
    # Its lease (20 "minutes", 10 s) is no longer renewed: the watchdog deletes the pod.
    pod_run.fake.wait_until(lambda: not pod_run.fake.alive(), timeout=60, what="the deletion")
    assert pod_run.fake.terminated_by[pod_id] == "watchdog"
    [pod] = pod_run.fake.deleted.values()
    log = (pod.dir / "root" / ".overbrainer-pod" / "watchdog.log").read_text()
    assert "its lease ran out" in log


def test_no_secret_reaches_the_api_the_pod_or_a_file(pod_run, run_cli, monkeypatch):
    monkeypatch.setenv("OVERBRAINER_HF_TOKEN", HF_TOKEN)
    result = run_cli("export", pod_run.run_id, "--quantize", "Q8_0")
    assert result.exit_code == 0, result.stderr
    private = (pod_run.run_dir / "after-pod" / "ssh" / "client_ed25519").read_text()
    body = private.split("-----")[2].strip().splitlines()[1]
    assert oct((pod_run.run_dir / "after-pod" / "ssh" / "client_ed25519").stat().st_mode) \
        .endswith("600")  # fmt: skip
    creates = [r for r in pod_run.fake.requests if "podFindAndDeployOnDemand" in r]
    assert creates
    for secret in (API_KEY, HF_TOKEN, body):
        assert not any(secret in request for request in creates)
        assert secret not in json.dumps([p.env for p in pod_run.fake.deleted.values()])
        assert secret not in result.stderr and secret not in result.stdout
        for path in pod_run.run_dir.rglob("*"):
            if path.is_file() and path.name != "client_ed25519":
                assert secret not in path.read_text(errors="replace"), path
        for pod in pod_run.fake.deleted.values():
            for path in (pod.dir / "root" / ".overbrainer-pod").glob("*.log"):
                assert secret not in path.read_text(errors="replace"), path


@pytest.mark.parametrize("during", ["the create", "the wait for SSH"])
def test_ctrl_c_while_the_pod_starts_deletes_it(pod_run, during, monkeypatch):
    pod_run.fake.port_delay = 10**6  # the client never learns the SSH port
    if during == "the create":  # the pod is made; the answer comes seconds later
        answer = pod_run.fake.answer

        def late(query: str, key: str):
            result = answer(query, key)
            if "podFindAndDeployOnDemand" in query:
                time.sleep(3)
            return result

        monkeypatch.setattr(pod_run.fake, "answer", late)
    cli = pod_run.cli.spawn("export", pod_run.run_id)
    pod_run.fake.wait_until(pod_run.fake.alive, timeout=60, what="a pod")
    pod_id = pod_run.fake.alive()[0].id
    os.kill(cli.pid, signal.SIGINT)
    _, err = cli.communicate(timeout=60)
    assert cli.returncode == 130, err
    assert "interrupted" in err
    assert pod_run.fake.terminated_by[pod_id] == "client"
    assert pod_run.after_pod()["state"] == "deleted"
    assert not pod_run.fake.secrets


def test_a_kept_after_training_pod_is_no_orphan(pod_run, run_cli):
    from loguru import logger

    kept = run_cli("export", pod_run.run_id, "--quantize", "Q8_0", "--keep-pod")
    assert kept.exit_code == 0, kept.stderr
    lines: list[str] = []
    sink = logger.add(lines.append, level="WARNING")
    try:
        _executor(pod_run).warn_orphans()
        # Deleted behind the record's back: the same pod is an orphan now.
        path = pod_run.run_dir / "after-pod" / "pod.json"
        path.write_text(json.dumps({**pod_run.after_pod(), "state": "deleted"}))
        _executor(pod_run).warn_orphans()
    finally:
        logger.remove(sink)
    [warning] = lines
    assert f"overbrainer pod rm {pod_run.run_id}" in warning
    path.write_text(json.dumps({**pod_run.after_pod(), "state": "kept"}))
    removed = run_cli("pod", "rm", pod_run.run_id)
    assert removed.exit_code == 0, removed.stderr
    assert not pod_run.fake.alive()


def test_the_cost_cap_ends_a_pod_made_for_an_export(pod_run):
    # An hour lasts 30 s: $0.01 at $0.44/h is under a second; the client stops renewing the
    # lease 5 "minutes" (2.5 s) later, and the watchdog deletes the pod once it runs out
    # (10 s).
    config = pod_run.finished.dir / "overbrainer.toml"
    config.write_text(config.read_text() + "max_cost_usd = 0.01\n")
    cli = _slow_export(pod_run)
    pod_id = pod_run.fake.alive()[0].id
    _, err = cli.communicate(timeout=90)
    assert cli.returncode == 1, err
    assert "past max_hours or its cost cap: its lease is no longer renewed" in err
    # Who asked for which delete, and what the CLI said: the story of a failure under load.
    story = (pod_run.fake.terminates, err)
    assert pod_run.fake.terminated_by[pod_id] == "watchdog", story
    [deleted] = pod_run.fake.deleted.values()
    log = (deleted.dir / "root" / ".overbrainer-pod" / "watchdog.log").read_text()
    assert "past the cost cap (max_cost_usd)" in log
    pod = pod_run.after_pod()
    assert pod["state"] == "deleted" and pod["deleted_by"] == "watchdog"
    assert (
        f"export: pod {pod_id} of run {pod_run.run_id} was deleted by its watchdog while the "
        "command worked (past max_hours or its cost cap)"
    ) in err


def test_a_run_trained_on_a_pod_is_exported_on_a_new_pod(
    project_dir, tmp_path, fake_runpod, run_cli, monkeypatch
):
    """The whole way: `train` on its pod (deleted at its end), then `export` on another."""
    from tests.helpers.pod_trainer import PodTrainer
    from tests.helpers.run_dirs import write_examples
    from tests.helpers.stand_ins import FAKE_CONVERTER, FAKE_LLAMA_CPP, write_python

    from overbrainer.runs import follow
    from overbrainer.testing.fake_axolotl import make_fake_venv

    monkeypatch.setattr(follow, "POLL_S", 0.05)
    monkeypatch.setenv("RUNPOD_OVERBRAINER_TIMING", f"{TIMING},lease_minutes=20")
    venv = make_fake_venv(tmp_path / "fake-venv")
    # The image's runtime has what llama.cpp's converter imports (stand-ins here).
    stubs = tmp_path / "stubs"
    stand_ins = {"torch": FAKE_TORCH, "transformers": FAKE_TRANSFORMERS}  # the verification's
    for module in ("torch", "numpy", "transformers", "yaml"):
        (stubs / module).mkdir(parents=True)
        (stubs / module / "__init__.py").write_text(stand_ins.get(module, ""))
    [site] = venv.glob("lib/python*/site-packages")
    (site / "stubs.pth").write_text(f"{stubs}\n")
    toolchain = tmp_path / "llama-cpp"
    (toolchain / "llama.cpp" / "gguf-py" / "gguf").mkdir(parents=True)
    (toolchain / "llama.cpp" / "gguf-py" / "gguf" / "__init__.py").write_text("")
    (toolchain / "llama.cpp" / "convert_hf_to_gguf.py").write_text(FAKE_CONVERTER)
    (toolchain / "site" / "llama_cpp").mkdir(parents=True)
    (toolchain / "site" / "llama_cpp" / "__init__.py").write_text(FAKE_LLAMA_CPP)
    write_python(toolchain / "bin" / "python", toolchain / "site")
    monkeypatch.setenv("OVERBRAINER_LLAMA_CPP", str(toolchain))
    write_examples(project_dir / "data" / "train.jsonl", range(10))
    write_examples(project_dir / "data" / "eval.jsonl", range(10, 12))
    trainer = PodTrainer(project_dir, venv, fake=fake_runpod)
    trainer.configure(max_hours=4, boot_grace=30)
    config = project_dir / "overbrainer.toml"
    config.write_text(
        config.read_text().replace('adapter = "lora"\n', 'adapter = "lora"\nmerge = true\n')
    )
    try:
        trained = run_cli("train")
        assert trained.exit_code == 0, trained.stderr
        run_id = trainer.run()["id"]
        assert trainer.pod(run_id)["state"] == "deleted"
        result = run_cli("export", run_id, "--quantize", "Q8_0")
        assert result.exit_code == 0, result.stderr
    finally:
        trainer.stop_all(fake_runpod.root / "pods")
    gguf = project_dir / "runs" / run_id / "output" / "gguf" / f"{run_id}-Q8_0.gguf"
    assert gguf.read_bytes() == b"GGUF converted auto from ../../output/merged quantized 7"
    [record] = (project_dir / "runs" / run_id).glob("exports/*/export.json")
    assert json.loads(record.read_text())["sha256"] == _sha(gguf)
    after_pod = json.loads((project_dir / "runs" / run_id / "after-pod" / "pod.json").read_text())
    assert after_pod["state"] == "deleted" and after_pod["pod_name"] == f"overbrainer-{run_id}-a1"
    assert fake_runpod.calls.count("create") == 2
    assert not fake_runpod.alive()


def test_an_export_killed_during_the_create_leaves_a_pod_pod_rm_finds_by_name(pod_run, run_cli):
    pod_run.fake.create_delay = 1.0
    cli = pod_run.cli.spawn("export", pod_run.run_id)
    pod_run.fake.wait_until(
        lambda: any("podFindAndDeployOnDemand" in r for r in pod_run.fake.requests),
        timeout=60,
        what="the create",
    )
    os.kill(cli.pid, signal.SIGKILL)
    cli.wait()
    pod_run.fake.wait_until(pod_run.fake.alive, what="the pod")
    record = pod_run.after_pod()
    assert record["pod_id"] is None
    assert record["attempts"][0]["name"] == f"overbrainer-{pod_run.run_id}-a1"
    removed = run_cli("pod", "rm", pod_run.run_id)
    assert removed.exit_code == 0, removed.stderr
    assert "(after training) deleted" in removed.stdout
    assert not pod_run.fake.alive()
    assert pod_run.after_pod()["deleted_by"] == "pod rm"


def test_rejudge_refuses_keep_pod(run_cli):
    result = run_cli("compare", "--rejudge", "compare_20260101-000000", "--keep-pod")
    assert result.exit_code == 2
    assert "--rejudge makes no machine: --keep-machine does not apply" in result.stderr
