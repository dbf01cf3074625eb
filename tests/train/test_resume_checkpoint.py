"""A cancelled or failed run resumes from the last checkpoint in its output, with the checks
a stopped run's snapshot gets; through the real CLI, on the local target, with the fake
trainer."""

from __future__ import annotations

import yaml


def _save_often(trainer, saves: int) -> None:
    """Checkpoints ``saves`` times an epoch: the fake trainer saves every steps/saves steps."""
    toml = trainer.dir / "overbrainer.toml"
    text = toml.read_text().replace(
        'adapter = "lora"', f'adapter = "lora"\nsaves_per_epoch = {saves}'
    )
    toml.write_text(text)


def _checkpoints(trainer, run_id: str) -> list[int]:
    output = trainer.dir / "runs" / run_id / "output"
    return sorted(int(p.name.split("-")[1]) for p in output.glob("checkpoint-*"))


def _resumes_from_the_last_checkpoint(trainer, run_cli, monkeypatch, old: str) -> None:
    steps = [s for s in _checkpoints(trainer, old) if s != 999]
    assert len(steps) >= 2, steps
    last = steps[-1]
    monkeypatch.setenv("FAKE_AXOLOTL_STEPS", str(last + 3))
    monkeypatch.delenv("FAKE_AXOLOTL_EXIT", raising=False)
    resumed = run_cli("train", "--resume-from", old)
    assert resumed.exit_code == 0, resumed.stderr
    new = trainer.run()
    assert new["resumed_from"] == old and new["state"] == "succeeded"
    assert (
        f"train: run {new['id']} resumes from the last checkpoint of run {old} "
        f"(output/checkpoint-{last}, step {last})"
    ) in resumed.stderr
    new_dir = trainer.dir / "runs" / new["id"]
    assert (new_dir / "resume" / f"checkpoint-{last}").is_dir()
    config = yaml.safe_load((new_dir / "axolotl.yaml").read_text())
    assert str(config["resume_from_checkpoint"]).endswith(f"resume/checkpoint-{last}")
    trained = [
        e["step"] for e in trainer.metrics(new["id"]) if e["event"] == "log" and e.get("loss")
    ]
    assert trained[0] == last + 1


def test_a_cancelled_run_resumes_from_its_last_checkpoint(trainer, run_cli, monkeypatch):
    _save_often(trainer, 100)
    process = trainer.spawn(
        "train", env={"FAKE_AXOLOTL_STEPS": "100000", "FAKE_AXOLOTL_STEP_SECONDS": "0.02"}
    )
    run = trainer.wait_running()
    trainer.wait_for(lambda: len(_checkpoints(trainer, run["id"])) >= 2, what="two checkpoints")
    process.kill()
    process.wait()
    assert run_cli("train", "cancel", run["id"]).exit_code == 0
    assert trainer.run()["state"] == "cancelled"
    _resumes_from_the_last_checkpoint(trainer, run_cli, monkeypatch, run["id"])


def test_a_failed_run_resumes_from_its_last_checkpoint(trainer, run_cli, monkeypatch):
    _save_often(trainer, 3)
    monkeypatch.setenv("FAKE_AXOLOTL_EXIT", "3")
    failed = run_cli("train")
    assert failed.exit_code == 1
    old = trainer.run()
    assert old["state"] == "failed"
    # A checkpoint cut off while being saved (no trainer_state.json) is passed over.
    (trainer.dir / "runs" / old["id"] / "output" / "checkpoint-999").mkdir()
    _resumes_from_the_last_checkpoint(trainer, run_cli, monkeypatch, old["id"])


def test_a_cancelled_run_without_a_checkpoint_says_so(trainer, run_cli):
    process = trainer.spawn("train", env={"FAKE_AXOLOTL_HANG": "1"})
    run = trainer.wait_running()
    process.kill()
    process.wait()
    assert run_cli("train", "cancel", run["id"]).exit_code == 0
    assert trainer.run()["state"] == "cancelled"
    assert _checkpoints(trainer, run["id"]) == []
    result = run_cli("train", "--resume-from", run["id"])
    assert result.exit_code == 1
    assert result.stderr == (
        f"error: cannot resume from run {run['id']}: it is cancelled and has no checkpoint to "
        f"resume from (none in runs/{run['id']}/output)\n"
    )
    assert len(trainer.runs()) == 1  # a refusal creates no run


def _checkpoint(output, step: int, state: bytes | None) -> None:
    directory = output / f"checkpoint-{step}"
    directory.mkdir(parents=True)
    if state is not None:
        (directory / "trainer_state.json").write_bytes(state)


def test_the_last_checkpoint_is_read_within_bounds(tmp_path):
    import json
    import os
    import threading

    from overbrainer.train.new_run import last_checkpoint

    output = tmp_path / "run" / "output"
    history = [{"loss": 1.0, "step": n} for n in range(300_000)]  # about 9 MB of log
    big = json.dumps({"global_step": 7, "log_history": history}, indent=2, sort_keys=True)
    _checkpoint(output, 7, big.encode())
    _checkpoint(output, 8, b'{"global_step": 9}')  # another step: cut off, passed over
    _checkpoint(output, 9, None)
    os.mkfifo(output / "checkpoint-9" / "trainer_state.json")  # never a file to read
    _checkpoint(output, 10, b'{"log_history": [], "global_step": 10}')  # a hand-written order
    # A link out of the run (to a file the run does not own) is never followed.
    (tmp_path / "elsewhere.json").write_bytes(b'{"global_step": 11}')
    _checkpoint(output, 11, None)
    (output / "checkpoint-11" / "trainer_state.json").symlink_to(tmp_path / "elsewhere.json")
    found: list[str | None] = []
    reader = threading.Thread(target=lambda: found.append(last_checkpoint(output.parent)))
    reader.start()
    reader.join(timeout=30)
    if reader.is_alive():  # release the read blocked on the FIFO, then fail
        with open(output / "checkpoint-9" / "trainer_state.json", "wb"):
            pass
        reader.join()
    assert found == ["output/checkpoint-10"]
