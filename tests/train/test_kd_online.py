"""``[training.kd] mode = "online"``: the trainer asks the parent, served on the training
target, during the run (Axolotl's online teacher). The stand-in vLLM answers the online
teacher's requests in vLLM's format and the fake ``axolotl`` sends them at every step, so a
step that finds the serve gone fails the run."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from collections.abc import Iterator

import pytest
import yaml
from tests.helpers.serving import FAKE_ENGINE, engine_argv, engine_records, running, watchdog_pids

from overbrainer.config.model import Training
from overbrainer.testing.fake_axolotl import TEACHER_BATCH, TEACHER_FILE
from overbrainer.train.axolotl import OnlineTeacher, axolotl_config
from overbrainer.train.axolotl_yaml import dump_yaml, resume_mismatch
from overbrainer.train.inputs import differences, inputs_of, model_config

MODEL = "Qwen/Qwen3-0.6B"
SERVED = """
[providers.big]
protocol = "openai"
serve = {{ target = "{target}", engine = "{engine}", model = "{model}" }}
"""
KD = """
[training.kd]
mode = "online"
top_k = 3
"""


def online_project(trainer, *, engine: str = "vllm", target: str = "local", more: str = "") -> None:
    """The trainer's project distilling logits online from ``providers.big``, served by the
    stand-in engine on ``target``."""
    vllm = trainer.venv / "bin" / "vllm"
    vllm.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE_ENGINE} vllm "$@"\n')
    vllm.chmod(0o755)
    config = trainer.dir / "overbrainer.toml"
    text = config.read_text()
    text = text.replace(
        '[roles.parent]\nprovider = "main"\nmodel = "parent-model"',
        f'[roles.parent]\nprovider = "big"\nmodel = "{MODEL}"',
    )
    text = text.replace('adapter = "lora"', 'adapter = "lora"\ndistill = "logits"' + more)
    served = SERVED.format(target=target, engine=engine, model=MODEL)
    config.write_text(text + served + KD)


@pytest.fixture
def online(trainer) -> Iterator:
    yield trainer
    for pid in watchdog_pids(trainer.dir):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)


def detached(online, env: dict[str, str]) -> tuple[dict, int]:
    """A run started by ``train`` and detached from (Ctrl-C): the run, and the pid of its
    teacher's watchdog."""
    process = online.spawn("train", env=env)
    run = online.wait_running()
    process.send_signal(signal.SIGINT)
    process.communicate(timeout=30)
    (pid,) = watchdog_pids(online.dir)
    return run, pid


def test_train_asks_the_served_parent_during_the_run_and_ends_it_after(online, run_cli):
    online_project(online)

    result = run_cli("train")

    assert result.exit_code == 0, result.stderr
    run = online.run()
    run_dir = online.dir / "runs" / run["id"]
    config = yaml.safe_load((run_dir / "axolotl.yaml").read_text())
    argv = engine_argv(online.dir)
    port = int(argv[argv.index("--port") + 1])
    # Axolotl's online KD settings, pointing at the engine's port on the target's loopback
    assert {key: config[key] for key in config if key.startswith("kd_")} == {
        "kd_trainer": True, "kd_alpha": 1.0, "kd_ce_alpha": 0.1, "kd_temperature": 1.0,
        "kd_beta": 0.0, "kd_online_server_base_url": f"http://127.0.0.1:{port}",
        "kd_online_server": "vllm", "kd_online_topk": 3, "kd_online_timeout": 120,
    }  # fmt: skip
    assert config["sample_packing"] is True and config["eval_sample_packing"] is True
    for dataset in [*config["datasets"], *config["test_datasets"]]:
        assert dataset["type"] == "chat_template"  # the teacher's rows come with each batch
    job = json.loads((run_dir / "job.json").read_text())
    assert [stage["name"] for stage in job["stages"]] == ["train"]  # no kd-align: no rows kept
    # The serve answered every step of the job, with top_k candidates a token ...
    asked = [json.loads(line) for line in (run_dir / TEACHER_FILE).read_text().splitlines()]
    assert [a["step"] for a in asked] == list(range(1, 7))
    assert all(a["fewest"] >= 3 for a in asked)
    (scored,) = engine_records(online.dir, "scored.jsonl")
    lengths = [json.loads(line)["lengths"] for line in scored.read_text().splitlines()]
    assert lengths == [[len(ids) for ids in TEACHER_BATCH]] * 6
    # ... was started before the job, and is gone once the command ended
    assert "train: the trainer asks providers.big (vllm Qwen/Qwen3-0.6B) at 127.0.0.1:" in (
        result.stderr
    )
    pids = watchdog_pids(online.dir)
    assert pids and not any(running(pid) for pid in pids)
    assert not list((online.dir / ".overbrainer" / "serve").glob("*.json"))
    history = (online.dir / ".overbrainer" / "history.jsonl").read_text().splitlines()
    assert [json.loads(line)["stage"] for line in history].count("serve") == 1
    assert not (online.dir / "data" / "logprobs.bin").exists()


@pytest.mark.parametrize(
    ("engine", "target", "more", "expected"),
    [
        ("llama.cpp", "local", "", (
            'training.kd.mode = "online": providers.big.serve.engine = \'llama.cpp\' cannot '
            "score the trainer's tokens (llama-cpp-python's server takes text prompts only and "
            "returns no prompt logprobs by token id). Serve the parent with 'vllm' or 'sglang', "
            'or set mode = "offline"'
        )),
        ("vllm", "gpu", "", (
            'training.kd.mode = "online": the parent is served on target `gpu` '
            "(providers.big.serve.target) and the run trains on `local`: the trainer reaches "
            "the parent on its own machine's loopback. Serve it on `local`, or set "
            'mode = "offline"'
        )),
        ("vllm", "local", "\nsample_packing = false", (
            'training.kd.mode = "online" needs training.sample_packing = true: Axolotl\'s '
            "online teacher (0.19) asks the parent for packed batches only"
        )),
    ],
)  # fmt: skip
def test_a_parent_that_cannot_teach_online_is_refused_before_anything_starts(
    online, run_cli, engine, target, more, expected
):
    online_project(online, engine=engine, target=target, more=more)
    if target != "local":
        config = online.dir / "overbrainer.toml"
        config.write_text(config.read_text() + f'\n[targets.{target}]\nkind = "local"\n')

    result = run_cli("train")

    assert result.exit_code == 1
    assert result.stderr == f"error: {expected}\n"
    assert online.runs() == []
    assert watchdog_pids(online.dir) == []


def test_a_parent_not_served_is_refused(online, run_cli):
    config = online.dir / "overbrainer.toml"
    config.write_text(
        config.read_text().replace('adapter = "lora"', 'adapter = "lora"\ndistill = "logits"')
        + KD
    )

    result = run_cli("train")

    assert result.exit_code == 1
    assert result.stderr == (
        'error: training.kd.mode = "online" asks the parent during the run, so it must be '
        "served on the training target: roles.parent is on providers.main, which is not "
        'served. Give it serve = { target = "local", engine = "vllm", model = ... } '
        '(docs/serving.md), or set mode = "offline"\n'
    )
    assert online.runs() == []


def test_sglang_s_teacher_settings_and_the_address_left_out_of_the_inputs():
    training = Training.model_validate({
        "target": "gpu", "base_model": MODEL, "adapter": "lora", "distill": "logits",
        "kd": {"mode": "online", "top_k": 8},
    })  # fmt: skip
    teacher = OnlineTeacher("http://127.0.0.1:30000", "sglang")
    config = axolotl_config(training, has_eval=False, teacher=teacher)
    assert config["kd_online_server"] == "sglang"
    assert config["kd_online_server_base_url"] == "http://127.0.0.1:30000"
    assert config["kd_online_topk"] == 8
    elsewhere = OnlineTeacher("http://127.0.0.1:1", "sglang")
    other = axolotl_config(training, has_eval=False, teacher=elsewhere)
    # A new port each serve: the same model is trained (no retraining by `run`, resumable)
    assert model_config(config) == model_config(other)
    assert resume_mismatch(dump_yaml(config), axolotl_config(training, has_eval=False)) == []


def test_detached_the_serve_stays_up_for_the_run_and_attach_ends_it(online, run_cli):
    online_project(online)
    process = online.spawn("train", env={"FAKE_AXOLOTL_STEPS": "60"})
    run = online.wait_running()
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert f"interrupted: run {run['id']} keeps running on target `local`" in out
    assert (
        f"train: providers.big stays up while run {run['id']} asks it: `overbrainer train "
        f"attach {run['id']}` ends it when the run ends, else its watchdog 30 min after the "
        "run's last request"
    ) in err
    (pid,) = watchdog_pids(online.dir)
    assert running(pid)  # the run's teacher outlives the command that started it
    (record,) = (online.dir / ".overbrainer" / "serve").glob("*.json")
    assert json.loads(record.read_text())["kept"] is True
    status = run_cli("serve", "status")
    assert f", for run {run['id']} (its online teacher): up at " in status.stdout

    result = run_cli("train", "attach", run["id"])

    assert result.exit_code == 0, result.stderr
    assert online.run()["state"] == "succeeded"  # every step found its teacher up
    run_dir = online.dir / "runs" / run["id"]
    assert len((run_dir / TEACHER_FILE).read_text().splitlines()) == 60
    assert f"train: run {run['id']} ended: ending providers.big, its teacher" in result.stderr
    assert not running(pid)
    assert not list((online.dir / ".overbrainer" / "serve").glob("*.json"))
    assert not (run_dir / "teacher.json").exists()


def test_a_run_s_teacher_taken_over_by_serve_up_outlives_the_run(online, run_cli):
    """`serve up` of the serve a detached run was handed makes it the user's: the run's end
    leaves it up, and `serve down` ends it."""
    online_project(online)
    run, pid = detached(online, {"FAKE_AXOLOTL_STEPS": "40"})

    up = run_cli("serve", "up", "big")

    assert up.exit_code == 0, up.stderr
    assert "kept (serve up): up at " in run_cli("serve", "status").stdout
    result = run_cli("train", "attach", run["id"])
    assert result.exit_code == 0, result.stderr
    assert online.run()["state"] == "succeeded"
    assert (
        f"train: run {run['id']} ended: providers.big, its teacher, stays up (kept by "
        "`serve up`)"
    ) in result.stderr
    assert running(pid)
    down = run_cli("serve", "down", "big")
    assert down.exit_code == 0, down.stderr
    assert not running(pid)


def test_a_teacher_handed_before_runs_were_named_in_its_record_is_still_ended_with_the_run(
    online, run_cli
):
    """A serve record an older overbrainer wrote has no ``for_run``: the run it was handed to
    (``teacher.json``) still ends it when it ends, rather than leaving it up to its idle limit."""
    online_project(online)
    run, pid = detached(online, {"FAKE_AXOLOTL_STEPS": "40"})
    (record,) = (online.dir / ".overbrainer" / "serve").glob("*.json")
    data = json.loads(record.read_text())
    del data["for_run"]
    record.write_text(json.dumps(data))

    result = run_cli("train", "attach", run["id"])

    assert result.exit_code == 0, result.stderr
    assert f"train: run {run['id']} ended: ending providers.big, its teacher" in result.stderr
    assert not running(pid)


def test_kill_9_of_the_command_leaves_the_teacher_up_while_its_run_asks_it(online, run_cli):
    """The job outlives its command's ``kill -9``: the next command does not end the serve as a
    killed command's orphan while the run may still ask it; the run's end does."""
    online_project(online)
    process = online.spawn("train", env={"FAKE_AXOLOTL_STEPS": "60"})
    run = online.wait_running()
    process.kill()
    process.communicate(timeout=30)
    (pid,) = watchdog_pids(online.dir)

    status = run_cli("serve", "status")

    assert status.exit_code == 0, status.stderr
    assert "a killed command left" not in status.stderr
    assert f"for run {run['id']} (its online teacher): up at " in status.stdout
    assert running(pid)
    result = run_cli("train", "attach", run["id"])
    assert result.exit_code == 0, result.stderr
    assert online.run()["state"] == "succeeded"  # every step found its teacher up
    assert f"train: run {run['id']} ended: ending providers.big, its teacher" in result.stderr
    assert not running(pid)


def test_a_teacher_two_runs_ask_is_ended_by_the_last_one_s_end_only(online, run_cli):
    """Run B reuses the teacher handed to detached run A: A's end leaves it up while B asks
    it (B would fail), and B's end ends it."""
    online_project(online)
    a, pid = detached(online, {"FAKE_AXOLOTL_HANG": "1"})
    second = online.spawn("train", env={"FAKE_AXOLOTL_HANG": "1"})
    online.wait_for(lambda: len(online.runs()) == 2, what="run B")
    b = online.wait_running()
    assert b["id"] != a["id"]
    second.send_signal(signal.SIGINT)
    _, err = second.communicate(timeout=30)
    assert "reusing the vllm serve" in err
    assert f"train: providers.big stays up while run {b['id']} asks it" in err

    cancel_a = run_cli("train", "cancel", a["id"])

    assert cancel_a.exit_code == 0, cancel_a.stderr
    assert (
        f"train: run {a['id']} ended: providers.big, its teacher, stays up while run "
        f"{b['id']} asks it"
    ) in cancel_a.stderr
    assert running(pid)
    assert f"for run {b['id']} (its online teacher)" in run_cli("serve", "status").stdout
    cancel_b = run_cli("train", "cancel", b["id"])
    assert cancel_b.exit_code == 0, cancel_b.stderr
    assert f"train: run {b['id']} ended: ending providers.big, its teacher" in cancel_b.stderr
    assert not running(pid)


def test_a_teacher_left_by_a_killed_command_is_no_orphan_while_a_later_run_asks_it(
    online, run_cli
):
    """The command following A is killed, then the one following B, which reused A's
    teacher: once A ends, B still asks it, so no command ends it as a killed command's
    orphan; B's end does."""
    online_project(online)
    first = online.spawn("train", env={"FAKE_AXOLOTL_HANG": "1"})
    a = online.wait_running()
    first.kill()
    first.communicate(timeout=30)
    (pid,) = watchdog_pids(online.dir)
    second = online.spawn("train", env={"FAKE_AXOLOTL_HANG": "1"})
    online.wait_for(lambda: len(online.runs()) == 2, what="run B")
    b = online.wait_running()
    second.kill()
    second.communicate(timeout=30)

    cancel_a = run_cli("train", "cancel", a["id"])
    status = run_cli("serve", "status")

    assert cancel_a.exit_code == 0, cancel_a.stderr
    assert "a killed command left" not in cancel_a.stderr + status.stderr
    assert running(pid), "a command ended the teacher run B asks"
    cancel_b = run_cli("train", "cancel", b["id"])
    assert f"train: run {b['id']} ended: ending providers.big, its teacher" in cancel_b.stderr
    assert not running(pid)


def test_cancelling_a_detached_run_ends_its_teacher(online, run_cli):
    online_project(online)
    run, pid = detached(online, {"FAKE_AXOLOTL_HANG": "1"})
    assert running(pid)

    result = run_cli("train", "cancel", run["id"])

    assert result.exit_code == 0, result.stderr
    assert f"train: run {run['id']} cancelled" in result.stdout
    assert f"train: run {run['id']} ended: ending providers.big, its teacher" in result.stderr
    assert not running(pid)


def test_a_serve_kept_by_the_user_is_reused_and_left_up(online, run_cli):
    online_project(online)
    up = run_cli("serve", "up", "big")
    assert up.exit_code == 0, up.stderr

    result = run_cli("train")

    assert result.exit_code == 0, result.stderr
    assert "reusing the vllm serve" in result.stderr
    (pid,) = watchdog_pids(online.dir)
    assert running(pid)
    down = run_cli("serve", "down", "big")
    assert down.exit_code == 0, down.stderr
    assert not running(pid)


def test_runs_diff_says_the_mode_the_online_top_k_and_the_parent_asked(tmp_path):
    def inputs(teacher: str | None = None, **kd: object):
        training = Training.model_validate(
            {"target": "gpu", "base_model": MODEL, "adapter": "lora", "distill": "logits", "kd": kd}
        )
        config = axolotl_config(training, has_eval=True)
        return inputs_of(config, tmp_path, MODEL, device="gpu", merge=False, teacher=teacher)

    offline, online = inputs(), inputs("vllm Qwen/Qwen3-32B", mode="online")
    assert differences(offline, online) == ["distill: logits -> logits (online)"]
    assert differences(online, inputs("vllm Qwen/Qwen3-32B", mode="online", top_k=8)) == [
        "kd.top_k: 20 -> 8"]
    assert differences(online, inputs("sglang Qwen/Qwen3-14B", mode="online")) == [
        "teacher: vllm Qwen/Qwen3-32B -> sglang Qwen/Qwen3-14B"]


def test_a_target_serving_on_a_machine_of_its_own_is_refused_before_a_machine_is_made(
    online, run_cli
):
    # A runpod serve is a pod of its own, not the training pod: the trainer would not find
    # the parent on its loopback.
    online_project(online, target="gpu")
    config = online.dir / "overbrainer.toml"
    config.write_text(
        config.read_text().replace('target = "local"\nbase_model', 'target = "gpu"\nbase_model')
        + '\n[targets.gpu]\nkind = "runpod"\ngpu_types = ["NVIDIA A40"]\nmax_hours = 1\n'
    )

    # Nothing answers at the Runpod address: a pod asked for would fail otherwise.
    nowhere = {"OVERBRAINER_RUNPOD__API_KEY": "rk-test",
               "OVERBRAINER_RUNPOD__BASE_URL": "http://127.0.0.1:9",
               "OVERBRAINER_RUNPOD__REST_URL": "http://127.0.0.1:9/v1"}  # fmt: skip
    result = run_cli("train", env=nowhere)

    assert result.exit_code == 1
    assert result.stderr == (
        'error: training.kd.mode = "online": target `gpu` makes a machine of its own for '
        "each run and for each serve, so the trainer cannot reach the parent on its machine's "
        "loopback. Train on a target that serves beside its jobs (local, ssh), or set mode = "
        '"offline"\n'
    )
    assert online.runs() == []
