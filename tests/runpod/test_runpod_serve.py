"""A served parent on the runpod target, through the CLI and the fake Runpod: a pod of its
own per serve (with the serve's GPU count), the stand-in vLLM started on it and reached
over the pod's SSH, the pod deleted when the command ends, when a killed command's serve
is found by the next, and by the pod's own watchdog once its engine ended."""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from tests.helpers.fake_runpod import GPU_TYPES, FakeRunpod
from tests.helpers.pipeline_data import lines, seed_questions
from tests.helpers.serving import (
    MODEL,
    engine_argv,
    engine_records,
    make_engine_venv,
    running,
    watchdog_pids,
    write_served_project,
)

from overbrainer.cli import cli

RUNPOD_TABLE = 'gpu_types = ["NVIDIA A40"]\nmax_hours = 1\n'
A40_PRICE = 0.44
"""What the fake Runpod bills an A40 pod an hour."""


def invoke(project: Path, *args: str):
    return CliRunner().invoke(cli, ["-C", str(project), *args], catch_exceptions=False)


@pytest.fixture
def pod_project(tmp_path: Path, fake_runpod: FakeRunpod) -> Iterator[Path]:
    """A project whose parent is the stand-in vLLM served on 2 GPUs of the target `gpu`
    (runpod); every watchdog the pods left is stopped, by its group, at the end."""
    venv = make_engine_venv(tmp_path / "engine-venv")
    project = write_served_project(
        tmp_path / "project", venv, target="gpu", kind="runpod", more=", gpus = 2"
    )
    config = project / "overbrainer.toml"
    text = config.read_text(encoding="utf-8")
    text = text.replace('pass_env = ["FAKE_ENGINE_DELAY"]\n', RUNPOD_TABLE)  # no pass_env there
    config.write_text(text, encoding="utf-8")
    yield project
    for pid in watchdog_pids(fake_runpod.root):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)


def serve_records(project: Path) -> list[str]:
    directory = project / ".overbrainer" / "serve"
    return sorted(p.name for p in directory.glob("*.json")) if directory.is_dir() else []


def history(project: Path) -> list[dict]:
    path = project / ".overbrainer" / "history.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_stage_serves_the_parent_on_a_pod_of_its_own_deleted_when_the_command_ends(
    pod_project: Path, fake_runpod: FakeRunpod
) -> None:
    seed_questions(pod_project, {("ownership", "borrowing"): ["What is a borrow?", "Why?"]})

    result = invoke(pod_project, "answers")

    assert result.exit_code == 0, result.output
    answers = lines(pod_project, "answers.jsonl")
    assert len(answers) == 2
    assert all("served answer to:" in a["messages"][-1]["content"] for a in answers)
    # One pod, named for the serve, with the GPU count the engine asked for, deleted by us.
    (pod,) = fake_runpod.deleted.values()
    assert pod.name.startswith("overbrainer-big-") and pod.name.endswith("-s1")
    assert pod.gpu_count == 2
    assert fake_runpod.terminated_by[pod.id] == "client"
    assert fake_runpod.alive() == []
    argv = engine_argv(fake_runpod.root)
    assert argv[:3] == ["vllm", "serve", MODEL]
    assert argv[argv.index("--host") + 1] == "127.0.0.1"
    assert argv[argv.index("--tensor-parallel-size") + 1] == "2"
    pids = watchdog_pids(fake_runpod.root)
    assert pids
    fake_runpod.wait_until(lambda: not any(map(running, pids)), what="the engine's end")
    assert serve_records(pod_project) == []
    assert not (pod_project / ".overbrainer" / "runpod-serve").exists() or not any(
        (pod_project / ".overbrainer" / "runpod-serve").iterdir()
    )
    # Its hours at the pod's price, in the history.
    (line,) = [entry for entry in history(pod_project) if entry["stage"] == "serve"]
    assert line["target"] == "gpu" and line["status"] == "ended"
    assert line["price_per_hour"] == A40_PRICE
    assert line["cost"] == pytest.approx(line["hours"] * A40_PRICE, abs=2e-6)


def test_a_killed_command_s_pod_is_deleted_by_the_next_command(
    pod_project: Path, fake_runpod: FakeRunpod
) -> None:
    seed_questions(pod_project, {("ownership", "borrowing"): ["What is a borrow?"]})
    fake_runpod.pod_env["FAKE_ENGINE_DELAY"] = "60"  # the pod's: its answer never comes
    command = subprocess.Popen(
        [str(Path(sys.executable).parent / "overbrainer"), "-C", str(pod_project), "answers"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 90
        while not (serve_records(pod_project) and engine_records(fake_runpod.root, "argv.json")):
            assert command.poll() is None, "the command ended before it was killed"
            assert time.monotonic() < deadline, "the engine was never started"
            time.sleep(0.1)
    finally:
        os.killpg(command.pid, signal.SIGKILL)
        command.wait()
    (pod,) = fake_runpod.alive()
    (pid,) = watchdog_pids(fake_runpod.root)
    assert running(pid), "kill -9 of the command leaves its engine and pod up"

    result = invoke(pod_project, "serve", "status")

    assert "ending the vllm serve a killed command left on `gpu`" in result.stderr
    assert result.stdout == "nothing is served\n"
    assert fake_runpod.alive() == []
    assert fake_runpod.terminated_by[pod.id] == "client"
    fake_runpod.wait_until(lambda: not running(pid), what="the engine's end")
    assert serve_records(pod_project) == []


def test_the_pod_s_watchdog_deletes_the_pod_once_its_engine_ended(
    pod_project: Path, fake_runpod: FakeRunpod
) -> None:
    up = invoke(pod_project, "serve", "up")
    assert up.exit_code == 0, up.output
    (pod,) = fake_runpod.alive()
    assert "orphan" not in up.stderr and "no run of this project follows" not in up.stderr
    (pid,) = watchdog_pids(fake_runpod.root)

    os.killpg(pid, signal.SIGTERM)  # as its idle limit ends it, on the pod

    fake_runpod.wait_until(lambda: pod.id in fake_runpod.deleted, what="the pod's deletion")
    assert fake_runpod.terminated_by[pod.id] == "watchdog"
    status = invoke(pod_project, "serve", "status")
    assert "gone (ended on its target)" in status.stdout
    down = invoke(pod_project, "serve", "down", "big")
    assert down.exit_code == 0, down.output
    assert serve_records(pod_project) == []


def test_a_serve_pod_no_record_knows_is_warned_about_and_pod_rm_deletes_it(
    pod_project: Path, fake_runpod: FakeRunpod
) -> None:
    up = invoke(pod_project, "serve", "up")
    assert up.exit_code == 0, up.output
    (pod,) = fake_runpod.alive()
    serve_id = pod.name.removeprefix("overbrainer-").rpartition("-")[0]
    listed = invoke(pod_project, "pod", "ls")
    assert f"{pod.id}  RUNNING    $0.44/h  serve {serve_id}\n" in listed.stdout
    for record in (pod_project / ".overbrainer").rglob("*.json"):
        record.unlink()  # the project's files lost: the pod is nobody's now

    again = invoke(pod_project, "serve", "up")

    assert (
        f"runpod: pod {pod.id} ({pod.name}, $0.44/h) is an overbrainer pod no serve of this "
        f"project follows: delete it with `overbrainer pod rm {serve_id}`"
    ) in again.stderr
    removed = invoke(pod_project, "pod", "rm", serve_id)
    assert removed.exit_code == 0, removed.output
    assert f"pod: pod {pod.id} of serve {serve_id} deleted" in removed.stdout
    assert pod.id in fake_runpod.deleted
    assert invoke(pod_project, "serve", "down").exit_code == 0
    assert fake_runpod.alive() == []


def test_the_cost_cap_deletes_a_serve_s_pod(pod_project: Path, fake_runpod: FakeRunpod) -> None:
    config = pod_project / "overbrainer.toml"
    # 60 x 0.1 / 0.44 = 13.6 minutes of the pod's rate: about 7 s at the tests' minute.
    config.write_text(
        config.read_text().replace(RUNPOD_TABLE, RUNPOD_TABLE + "max_cost_usd = 0.1\n")
    )
    up = invoke(pod_project, "serve", "up")
    assert up.exit_code == 0, up.output
    (pod,) = fake_runpod.alive()

    fake_runpod.wait_until(lambda: pod.id in fake_runpod.deleted, 60, "the pod's deletion")

    assert fake_runpod.terminated_by[pod.id] == "watchdog"
    assert (
        "past the cost cap (max_cost_usd)"
        in (pod.dir / "root" / ".overbrainer-pod" / "watchdog.log").read_text()
    )
    assert invoke(pod_project, "serve", "down").exit_code == 0


def test_an_engine_that_ends_before_it_answers_has_its_log_home_and_its_pod_deleted(
    pod_project: Path, fake_runpod: FakeRunpod
) -> None:
    fake_runpod.pod_env["FAKE_ENGINE_CRASH"] = "1"

    up = invoke(pod_project, "serve", "up")

    assert up.exit_code == 1
    assert "providers.big: vllm ended before it answered: see " in up.stderr
    (pod,) = fake_runpod.deleted.values()
    assert fake_runpod.terminated_by[pod.id] == "client"
    (log,) = (pod_project / ".overbrainer" / "runpod-serve").glob("*/serve.log")
    assert "CUDA out of memory while loading the model" in log.read_text()
    assert f".overbrainer/runpod-serve/{log.parent.name}/serve.log" in up.stderr
    assert fake_runpod.alive() == []


def test_an_engine_not_installed_on_the_pod_is_said_before_it_starts_and_the_pod_deleted(
    pod_project: Path, fake_runpod: FakeRunpod
) -> None:
    config = pod_project / "overbrainer.toml"
    venv = str(pod_project.parent / "engine-venv")
    config.write_text(config.read_text().replace(venv, venv + "-missing"))

    up = invoke(pod_project, "serve", "up")

    assert up.exit_code == 1
    assert (
        f"target `gpu`: the engine is not installed in targets.gpu.venv ({venv}-missing) (this "
        "was checked: "
        f"command -v {venv}-missing/bin/vllm >/dev/null 2>&1): install vllm there"
    ) in up.stderr
    assert "ended before it answered" not in up.stderr
    assert engine_records(fake_runpod.root, "argv.json") == [], "the engine never started"
    (pod,) = fake_runpod.deleted.values()
    assert fake_runpod.terminated_by[pod.id] == "client"
    assert fake_runpod.alive() == []
    assert serve_records(pod_project) == []


def test_a_pod_a_killed_command_was_making_for_a_serve_is_deleted_by_the_next_serve(
    pod_project: Path, fake_runpod: FakeRunpod
) -> None:
    fake_runpod.create_delay = 2.0
    command = subprocess.Popen(
        [str(Path(sys.executable).parent / "overbrainer"), "-C", str(pod_project), "serve", "up"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not any("podFindAndDeployOnDemand" in asked for asked in fake_runpod.requests):
            assert command.poll() is None, "the command ended before it was killed"
            assert time.monotonic() < deadline, "no pod was asked for"
            time.sleep(0.05)
    finally:
        os.killpg(command.pid, signal.SIGKILL)  # its create unanswered: no pod id recorded
        command.wait()
    fake_runpod.create_delay = 0.0
    fake_runpod.wait_until(fake_runpod.alive, what="the pod's create")
    (orphan,) = fake_runpod.alive()
    assert serve_records(pod_project) == [], "the core never recorded it"

    up = invoke(pod_project, "serve", "up")

    assert up.exit_code == 0, up.output
    serve_id = orphan.name.removeprefix("overbrainer-").rpartition("-")[0]
    assert (
        f"runpod: deleting the pod of the serve {serve_id}, which a killed command was making"
    ) in up.stderr
    assert fake_runpod.terminated_by[orphan.id] == "client"
    assert invoke(pod_project, "serve", "down").exit_code == 0
    assert fake_runpod.alive() == []


def test_a_serve_whose_pod_would_pass_the_budget_is_not_started(
    pod_project: Path, fake_runpod: FakeRunpod
) -> None:
    config = pod_project / "overbrainer.toml"
    config.write_text(config.read_text() + "\n[budget]\nmax_usd = 0.000001\n")
    seed_questions(pod_project, {("ownership", "borrowing"): ["What is a borrow?", "Why?"]})

    result = invoke(pod_project, "answers")

    assert result.exit_code == 1
    assert "budget: providers.big is not served: its projected " in result.stderr
    # The A40's price a GPU, times the serve's 2 GPUs.
    assert f"at ${2 * A40_PRICE:.2f}/h (the target's estimate)" in result.stderr
    assert "would pass max_usd $0.0000" in result.stderr
    assert fake_runpod.pods == {} and fake_runpod.deleted == {}, "a pod was made"
    assert serve_records(pod_project) == []


def test_plan_prices_a_runpod_serve_at_the_target_s_estimate(
    pod_project: Path, fake_runpod: FakeRunpod
) -> None:
    # A pod made for the serve has no price setting: plan asks the plugin, as the budget
    # does before a start, for the serve's 2 GPUs.
    seed_questions(pod_project, {("ownership", "borrowing"): ["What is a borrow?", "Why?"]})

    result = invoke(pod_project, "plan")

    assert result.exit_code == 0, result.stderr
    assert f"${2 * A40_PRICE:.2f}/h (target `gpu`'s estimate for 2 x NVIDIA A40)" in result.stdout
    assert "no price per hour" not in result.stdout
    assert fake_runpod.pods == {}, "plan made a pod"


def test_ctrl_c_while_a_serve_s_pod_is_made_is_heard_at_once_then_the_pod_is_deleted(
    pod_project: Path, fake_runpod: FakeRunpod, tmp_path: Path
) -> None:
    """The pod's create and boot take minutes: a Ctrl-C then waits for the serve's record,
    but says so at once; the serve is then ended and its pod deleted."""
    fake_runpod.create_delay = 15.0
    log = tmp_path / "stderr.log"
    with log.open("wb") as stderr:
        command = subprocess.Popen(
            [str(Path(sys.executable).parent / "overbrainer"), "-C", str(pod_project),
             "serve", "up"],
            stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not any("podFindAndDeployOnDemand" in r for r in fake_runpod.requests):
            assert command.poll() is None, "the command ended before Ctrl-C"
            assert time.monotonic() < deadline, "no pod was ever asked for"
            time.sleep(0.1)
        os.killpg(command.pid, signal.SIGINT)
        notice = (
            "warning: providers.big: stopping once the serve on `gpu` has started (minutes "
            "where a machine is made for it); it is then ended"
        )
        fake_runpod.wait_until(lambda: notice in log.read_text(), 10, "the notice")
        assert fake_runpod.pods == {}, "the notice came only once the pod was made"
        command.wait(timeout=90)
    finally:
        if command.poll() is None:
            os.killpg(command.pid, signal.SIGKILL)
            command.wait()
    text = log.read_text()
    assert command.returncode == 130, text
    assert text.count(notice) == 1
    assert "providers.big: vllm ended on `gpu`" in text
    (pod,) = fake_runpod.deleted.values()
    assert fake_runpod.terminated_by[pod.id] == "client"
    assert fake_runpod.alive() == []
    assert serve_records(pod_project) == []


# gpu_types = "auto": a serve's pod sized by the model it serves, not the training model.

BIG = "Qwen/Qwen2.5-32B-Instruct"
SMALL = "Qwen/Qwen2.5-0.5B-Instruct"


def served_on_auto(project: Path, model: str, child: str) -> None:
    """The parent is ``model`` (served on 2 GPUs and asked for) on ``gpu_types = "auto"``;
    the child trained on the target is ``child``."""
    config = project / "overbrainer.toml"
    text = config.read_text(encoding="utf-8").replace(MODEL, model)
    text = text.replace(RUNPOD_TABLE, 'gpu_types = "auto"\nmax_hours = 1\n')
    training = f'\n[training]\ntarget = "gpu"\nbase_model = "{child}"\nadapter = "lora"\n'
    config.write_text(text + training, encoding="utf-8")


def served_gb(billions: float, gpus: int) -> int:
    """docs/runpod.md's sizing of a 16-bit model: 2 GB a billion, 20% more, 2 GB a GPU."""
    return math.ceil(billions * 2 * 1.2 + 2 * gpus)


def cheapest_with(gb: float) -> dict:
    """The fake Runpod's cheapest GPU type with ``gb`` GB."""
    return min((g for g in GPU_TYPES if g["memoryInGb"] >= gb), key=lambda g: g["securePrice"])


def serve_up_and_down(project: Path, fake_runpod: FakeRunpod) -> tuple[str, object]:
    """``serve up`` then ``serve down``: the log of the up and the pod it made."""
    up = invoke(project, "serve", "up")
    assert up.exit_code == 0, up.output
    (pod,) = fake_runpod.alive()
    assert invoke(project, "serve", "down").exit_code == 0
    assert fake_runpod.alive() == []
    return up.stderr, pod


def test_auto_sizes_a_serve_s_pod_by_the_big_model_it_serves_not_the_child(
    pod_project: Path, fake_runpod: FakeRunpod
) -> None:
    served_on_auto(pod_project, BIG, child="Qwen/Qwen2.5-1.5B-Instruct")
    total = served_gb(32, 2)
    fits = cheapest_with(total / 2)
    assert fits != cheapest_with(16), "the test needs the child's type to differ"

    log, pod = serve_up_and_down(pod_project, fake_runpod)

    assert (pod.gpu_type, pod.gpu_count) == (fits["id"], 2)
    (line,) = [x for x in log.splitlines() if "runpod: creating a pod (" in x]
    listed = line.split("runpod: creating a pod (")[1].split(" x2) for the serve big-")[0]
    assert listed.split(", ")[0] == fits["id"] and cheapest_with(16)["id"] not in listed
    assert line.endswith(f", sized for {BIG}: {total} GB over 2 GPUs: deleted when the serve ends")


def test_auto_sizes_a_serve_of_a_small_model_below_the_child_s(
    pod_project: Path, fake_runpod: FakeRunpod
) -> None:
    served_on_auto(pod_project, SMALL, child="Qwen/Qwen3-8B")
    cheap = cheapest_with(16)

    log, pod = serve_up_and_down(pod_project, fake_runpod)

    assert pod.gpu_type == cheap["id"]
    assert f"sized for {SMALL}: {served_gb(0.5, 2)} GB over 2 GPUs" in log


def test_plan_and_the_budget_price_a_serve_on_auto_by_the_model_it_serves(
    pod_project: Path, fake_runpod: FakeRunpod
) -> None:
    served_on_auto(pod_project, BIG, child="Qwen/Qwen2.5-1.5B-Instruct")
    fits = cheapest_with(served_gb(32, 2) / 2)
    seed_questions(pod_project, {("ownership", "borrowing"): ["What is a borrow?", "Why?"]})

    planned = invoke(pod_project, "plan")

    assert planned.exit_code == 0, planned.stderr
    hourly = 2 * fits["securePrice"]
    assert f"${hourly:.2f}/h (target `gpu`'s estimate for 2 x {fits['id']})" in planned.stdout
    config = pod_project / "overbrainer.toml"
    config.write_text(config.read_text() + "\n[budget]\nmax_usd = 0.000001\n")

    refused = invoke(pod_project, "answers")

    assert refused.exit_code == 1
    assert f"at ${hourly:.2f}/h (the target's estimate)" in refused.stderr
    assert fake_runpod.pods == {} and fake_runpod.deleted == {}, "a pod was made"


def test_a_served_model_no_type_fits_is_refused_naming_its_size_and_min_vram_gb_wins(
    pod_project: Path, fake_runpod: FakeRunpod
) -> None:
    huge = "Qwen/Qwen2.5-72B-Instruct"
    served_on_auto(pod_project, huge, child="Qwen/Qwen2.5-1.5B-Instruct")
    total = served_gb(72, 2)
    assert max(g["memoryInGb"] for g in GPU_TYPES) < total / 2

    up = invoke(pod_project, "serve", "up")

    assert up.exit_code == 1
    assert (
        f'error: gpu_types = "auto": no Secure Cloud GPU type in stock with '
        f"{math.ceil(total / 2)} GB (sized for {huge}: {total} GB over 2 GPUs; set "
        "min_vram_gb to choose)"
    ) in up.stderr
    assert fake_runpod.pods == {} and "create" not in fake_runpod.calls
    # The user's own figure replaces the estimate, for the pod and its price.
    config = pod_project / "overbrainer.toml"
    auto = 'gpu_types = "auto"\n'
    config.write_text(config.read_text().replace(auto, auto + "min_vram_gb = 60\n"))
    wanted = cheapest_with(60)
    seed_questions(pod_project, {("ownership", "borrowing"): ["What is a borrow?"]})

    planned = invoke(pod_project, "plan")
    log, pod = serve_up_and_down(pod_project, fake_runpod)

    assert f"(target `gpu`'s estimate for 2 x {wanted['id']})" in planned.stdout
    assert pod.gpu_type == wanted["id"]
    assert "sized for" not in log
