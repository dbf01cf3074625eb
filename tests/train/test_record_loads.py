"""Each training command reads its run's record once and passes it on: counted here, in
the real CLI, by wrapping ``RunStore.load`` (the one way a record is read)."""

from __future__ import annotations

from collections import Counter


def test_train_reads_no_record_of_its_new_run(trainer, run_cli, loads):
    result = run_cli("train", env={"FAKE_AXOLOTL_STEPS": "3"})
    assert result.exit_code == 0, result.stderr
    run = trainer.run()
    assert run["state"] == "succeeded"
    assert loads[run["id"]] == 0  # created here, and passed on


def test_attach_reads_the_record_once(trainer, run_cli, loads):
    process = trainer.spawn("train", env={"FAKE_AXOLOTL_STEPS": "40"})
    run = trainer.wait_running()
    process.kill()  # the job keeps running, its run to be followed again
    process.wait()
    result = run_cli("train", "attach", run["id"])
    assert result.exit_code == 0, result.stderr
    assert trainer.run()["state"] == "succeeded"
    assert loads == Counter({run["id"]: 1})


def test_stop_reads_the_record_once(trainer, run_cli, loads):
    process = trainer.spawn("train", env={"FAKE_AXOLOTL_HANG": "1"})
    run = trainer.wait_running()
    process.kill()
    process.wait()
    result = run_cli("train", "stop", run["id"])
    assert result.exit_code == 0, result.stderr
    assert trainer.run()["state"] == "stopped"
    assert loads == Counter({run["id"]: 1})


def test_cancel_reads_the_record_once(trainer, run_cli, loads):
    process = trainer.spawn("train", env={"FAKE_AXOLOTL_HANG": "1"})
    run = trainer.wait_running()
    process.kill()
    process.wait()
    result = run_cli("train", "cancel", run["id"])
    assert result.exit_code == 0, result.stderr
    assert trainer.run()["state"] == "cancelled"
    assert loads == Counter({run["id"]: 1})


def test_stop_beside_a_follower_reads_the_record_once(trainer, run_cli, loads):
    process = trainer.spawn("train", env={"FAKE_AXOLOTL_HANG": "1"})
    run = trainer.wait_running()
    result = run_cli("train", "stop", run["id"])
    assert result.exit_code == 0, result.stderr
    assert loads == Counter({run["id"]: 1})
    process.communicate(timeout=60)
    assert trainer.run()["state"] == "stopped"


def test_cancel_beside_a_follower_reads_the_record_once(trainer, run_cli, loads):
    process = trainer.spawn("train", env={"FAKE_AXOLOTL_HANG": "1"})
    run = trainer.wait_running()
    result = run_cli("train", "cancel", run["id"])
    assert result.exit_code == 0, result.stderr
    assert loads == Counter({run["id"]: 1})
    process.communicate(timeout=60)
    assert trainer.run()["state"] == "cancelled"
