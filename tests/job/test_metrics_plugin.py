"""The Axolotl plugin shipped with each run, driven by the fake trainer in this process."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from tests.helpers.run_dirs import prepare_run_dir

from overbrainer.config.model import Training
from overbrainer.testing.fake_axolotl import FakeTrainer
from overbrainer.train.job_setup import plugin_file

TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


def training(**changes: Any) -> Training:
    return Training(target="box", base_model="/models/tiny", adapter="lora", **changes)


@pytest.fixture
def plugin(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> ModuleType:
    """The plugin module imported from a run's ``plugin/`` directory, as Axolotl does."""
    directory = tmp_path / "plugin-import"
    directory.mkdir()
    (directory / plugin_file().name).write_bytes(plugin_file().read_bytes())
    monkeypatch.syspath_prepend(str(directory))
    monkeypatch.delitem(sys.modules, "overbrainer_metrics", raising=False)
    import overbrainer_metrics

    return overbrainer_metrics


@pytest.fixture
def run(plugin: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A run directory with the job's environment set, steps taking no time."""
    root = tmp_path / "run"
    prepare_run_dir(root, training())
    monkeypatch.setenv("OVERBRAINER_METRICS", str(root / "metrics.jsonl"))
    monkeypatch.setenv("OVERBRAINER_SNAPSHOT", str(root / "snapshot.request"))
    monkeypatch.setenv("FAKE_AXOLOTL_STEP_SECONDS", "0")
    for knob in [name for name in os.environ if name.startswith("FAKE_AXOLOTL_") and
                 name != "FAKE_AXOLOTL_STEP_SECONDS"]:
        monkeypatch.delenv(knob)
    monkeypatch.chdir(root)
    return root


def trainer(root: Path, *, at_step: dict[int, Callable[[], None]] | None = None,
            after_step: dict[int, Callable[[], None]] | None = None, **config: Any) -> FakeTrainer:
    """The fake trainer of ``root``; ``at_step`` actions run at those steps' ends before the
    plugin looks for a snapshot request, ``after_step`` ones after it did."""
    import yaml

    loaded = yaml.safe_load((root / "axolotl.yaml").read_text(encoding="utf-8"))
    fake = FakeTrainer({**loaded, **config})
    fake.callbacks.insert(0, StepActions(at_step or {}))
    fake.callbacks.append(StepActions(after_step or {}))
    return fake


class StepActions:
    def __init__(self, actions: dict[int, Callable[[], None]]) -> None:
        self.actions = actions

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        action = self.actions.get(state.global_step)
        if action:
            action()

    def __getattr__(self, name: str) -> Callable[..., None]:
        return lambda *args, **kwargs: None


def events(root: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (root / "metrics.jsonl").read_text().splitlines()]


def train_steps(root: Path) -> list[int]:
    return [e["step"] for e in events(root) if e["event"] == "log" and "loss" in e]


def request(root: Path, reason: str = "requested") -> Callable[[], None]:
    return lambda: (root / "snapshot.request").write_text(reason, encoding="utf-8")


def test_a_run_writes_begin_a_log_a_step_evaluation_progress_and_end(run):
    trainer(run).train()
    lines = events(run)
    assert lines[0] == {"event": "begin", "time": lines[0]["time"], "max_steps": 6}
    assert lines[-1] == {"event": "end", "time": lines[-1]["time"], "step": 6}
    # Unix seconds, as the reference tool writes them.
    assert all(isinstance(line["time"], float) and abs(line["time"] - time.time()) < 600
               for line in lines)
    assert train_steps(run) == [1, 2, 3, 4, 5, 6]
    log = next(e for e in lines if e["event"] == "log" and e.get("step") == 2)
    assert set(log) == {"event", "time", "step", "epoch", "max_steps", "loss", "learning_rate",
                        "grad_norm"}
    assert log["max_steps"] == 6
    assert log["epoch"] == pytest.approx(3 * 2 / 6)
    evals = [e for e in lines if e["event"] == "eval"]
    assert evals and all(e["total"] == 3 for e in evals)
    # Each evaluation of 3 batches shows each: the follower sees it end (issue 43).
    assert [e["step"] for e in evals] == [1, 2, 3] * (len(evals) // 3)
    eval_losses = [e for e in lines if e["event"] == "log" and "eval_loss" in e]
    assert eval_losses[0]["step"] == 0
    assert not (run / "snapshot.json").exists()
    assert (run / "output" / "adapter_model.safetensors").is_file()


def test_a_snapshot_request_stops_the_run_with_a_checkpoint_at_the_end_of_that_step(run):
    trainer(run, at_step={3: request(run, "deadline")}).train()
    snapshot = json.loads((run / "snapshot.json").read_text())
    assert snapshot == {
        "checkpoint": "output/checkpoint-3", "step": 3, "time": snapshot["time"],
        "reason": "deadline",
    }
    assert TIME.match(snapshot["time"])
    assert (run / "output" / "checkpoint-3" / "trainer_state.json").is_file()
    assert train_steps(run) == [1, 2, 3]
    assert events(run)[-1]["event"] == "end"
    assert events(run)[-1]["step"] == 3
    assert (run / "output" / "adapter_model.safetensors").is_file()
    assert sorted(p.name for p in run.iterdir() if "tmp" in p.name) == []


@pytest.mark.parametrize(
    ("written", "reason"),
    [("", "requested"), ("cost\n", "cost"), ("  disk ", "disk"), ("requested", "requested"),
     ("bogus", "requested"), ("DEADLINE", "requested")],
)
def test_the_reason_is_read_from_the_request_and_defaults_to_requested(run, written, reason):
    trainer(run, at_step={2: request(run, written)}).train()
    assert json.loads((run / "snapshot.json").read_text())["reason"] == reason


def test_a_request_written_again_before_the_save_changes_only_the_reason(run):
    first, again = request(run, "deadline"), request(run, "cost")
    trainer(run, at_step={2: first}, after_step={2: again}).train()
    snapshot = json.loads((run / "snapshot.json").read_text())
    assert (snapshot["step"], snapshot["reason"]) == (2, "cost")


def test_a_request_there_before_training_stops_at_the_first_step(run):
    request(run, "disk")()
    trainer(run).train()
    assert json.loads((run / "snapshot.json").read_text())["step"] == 1
    assert train_steps(run) == [1]


def test_a_request_at_the_last_step_changes_nothing(run):
    trainer(run, at_step={6: request(run)}).train()
    assert not (run / "snapshot.json").exists()
    assert train_steps(run) == [1, 2, 3, 4, 5, 6]
    assert (run / "output" / "checkpoint-6").is_dir()


def test_without_the_snapshot_variable_a_request_is_ignored(run, monkeypatch):
    monkeypatch.delenv("OVERBRAINER_SNAPSHOT")
    trainer(run, at_step={2: request(run)}).train()
    assert not (run / "snapshot.json").exists()
    assert train_steps(run) == [1, 2, 3, 4, 5, 6]


def test_a_resumed_run_continues_after_the_checkpoint(run, tmp_path, monkeypatch):
    trainer(run, at_step={2: request(run)}).train()
    again = tmp_path / "again"
    prepare_run_dir(again, training(), resume_from=run / "output" / "checkpoint-2")
    monkeypatch.setenv("OVERBRAINER_METRICS", str(again / "metrics.jsonl"))
    monkeypatch.setenv("OVERBRAINER_SNAPSHOT", str(again / "snapshot.request"))
    trainer(again).train()
    assert train_steps(again) == [3, 4, 5, 6]
    assert not (again / "snapshot.json").exists()
    assert (again / "output" / "adapter_model.safetensors").is_file()


def test_a_full_fine_tune_saves_a_model_not_an_adapter(run):
    trainer(run, adapter=None).train()
    assert (run / "output" / "model.safetensors").is_file()
    assert not (run / "output" / "adapter_model.safetensors").exists()


# The callback on its own.


def state(**changes: Any) -> SimpleNamespace:
    values = {"global_step": 4, "max_steps": 10, "epoch": 0.4, "is_world_process_zero": True}
    return SimpleNamespace(**{**values, **changes})


def control() -> SimpleNamespace:
    return SimpleNamespace(should_save=False, should_training_stop=False)


def test_non_finite_numbers_are_written_as_null_and_other_keys_left_out(plugin, tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    callback = plugin.OverbrainerMetricsCallback(str(metrics), None)
    logs = {"loss": math.nan, "grad_norm": math.inf, "learning_rate": -math.inf,
            "eval_loss": 1.5, "ppl": 3.0, "train_runtime": "x"}
    callback.on_log(None, state(epoch=math.nan), control(), logs=logs)
    callback.on_log(None, state(epoch=None), control(), logs={"loss": "not a number"})
    first, second = (json.loads(line) for line in metrics.read_text().splitlines())
    assert {k: v for k, v in first.items() if k != "time"} == {
        "event": "log", "step": 4, "epoch": None, "max_steps": 10, "loss": None,
        "eval_loss": 1.5, "learning_rate": None, "grad_norm": None,
    }
    assert second["loss"] is None
    assert second["epoch"] is None
    assert "NaN" not in metrics.read_text()


def test_the_two_terms_of_a_kd_loss_reach_the_metrics_beside_it(plugin, tmp_path):
    # What the plugin's KDLossParts adds to the KD trainer's logs (the real tier proves the
    # numbers: tests/train/test_real_kd.py); the callback carries them to metrics.jsonl.
    metrics = tmp_path / "metrics.jsonl"
    callback = plugin.OverbrainerMetricsCallback(str(metrics), None)
    train = {"loss": 0.9 * 1.5 + 0.1 * 4.0, "kd_loss": 1.5, "ce_loss": 4.0}
    evaluation = {"eval_loss": 0.9 * 1.25 + 0.1 * 3.5, "eval_kd_loss": 1.25,
                  "eval_ce_loss": 3.5, "eval_ppl": 2.0}
    callback.on_log(None, state(), control(), logs=train)
    callback.on_log(None, state(), control(), logs=evaluation)
    first, second = (json.loads(line) for line in metrics.read_text().splitlines())
    assert {k: first[k] for k in train} == train
    assert {k: second.get(k) for k in evaluation} == {**evaluation, "eval_ppl": None}


def test_only_the_main_process_writes_or_looks_for_a_request(plugin, tmp_path):
    metrics, request_file = tmp_path / "metrics.jsonl", tmp_path / "snapshot.request"
    request_file.write_text("requested")
    callback = plugin.OverbrainerMetricsCallback(str(metrics), str(request_file))
    other = state(is_world_process_zero=False)
    flags = control()
    callback.on_train_begin(None, other, flags)
    callback.on_log(None, other, flags, logs={"loss": 1.0})
    callback.on_prediction_step(None, other, flags, eval_dataloader=[1, 2])
    callback.on_step_end(None, other, flags)
    callback.on_save(None, other, flags)
    callback.on_train_end(None, other, flags)
    assert not metrics.exists()
    assert flags.should_save is False
    assert not (tmp_path / "snapshot.json").exists()


class FakeDistributed:
    """``torch.distributed`` as the callback sees it, rank 0's answer given."""

    def __init__(self, rank0_says: bool) -> None:
        self.rank0_says = rank0_says
        self.broadcasts: list[list[Any]] = []

    def is_available(self) -> bool:
        return True

    def is_initialized(self) -> bool:
        return True

    def broadcast_object_list(self, box: list[Any], src: int) -> None:
        assert src == 0
        self.broadcasts.append(list(box))
        box[0] = self.rank0_says


@pytest.fixture
def distributed(monkeypatch: pytest.MonkeyPatch) -> Callable[[bool], FakeDistributed]:
    def install(rank0_says: bool) -> FakeDistributed:
        dist = FakeDistributed(rank0_says)
        monkeypatch.setitem(sys.modules, "torch", SimpleNamespace(distributed=dist))
        return dist

    return install


def test_every_rank_learns_of_the_request_from_rank_0(plugin, tmp_path, distributed):
    dist = distributed(True)
    callback = plugin.OverbrainerMetricsCallback(None, str(tmp_path / "snapshot.request"))
    flags = control()
    callback.on_step_end(None, state(is_world_process_zero=False), flags)
    assert dist.broadcasts == [[False]]
    assert flags.should_save is True
    assert flags.should_training_stop is True
    callback.on_save(None, state(is_world_process_zero=False), flags)
    assert not (tmp_path / "snapshot.json").exists()


def test_rank_0_broadcasts_what_it_found(plugin, tmp_path, distributed):
    dist = distributed(True)
    (tmp_path / "snapshot.request").write_text("cost")
    callback = plugin.OverbrainerMetricsCallback(None, str(tmp_path / "snapshot.request"))
    flags = control()
    callback.on_step_end(None, state(), flags)
    assert dist.broadcasts == [[True]]
    callback.on_save(None, state(), flags)
    assert json.loads((tmp_path / "snapshot.json").read_text())["reason"] == "cost"


def test_no_broadcast_once_the_snapshot_is_decided(plugin, tmp_path, distributed):
    dist = distributed(False)
    callback = plugin.OverbrainerMetricsCallback(None, str(tmp_path / "snapshot.request"))
    callback.on_step_end(None, state(), control())
    assert dist.broadcasts == [[False]]
    callback.snapshot_pending = True
    callback.on_step_end(None, state(), control())
    assert len(dist.broadcasts) == 1


def test_the_epoch_end_after_a_snapshot_does_not_save_the_same_step_again(plugin, tmp_path):
    (tmp_path / "snapshot.request").write_text("")
    callback = plugin.OverbrainerMetricsCallback(None, str(tmp_path / "snapshot.request"))
    flags = control()
    callback.on_step_end(None, state(), flags)
    callback.on_save(None, state(), flags)
    flags.should_save = True  # an epoch save strategy asks for a save at the epoch's end
    callback.on_epoch_end(None, state(), flags)
    assert flags.should_save is False
    later = control()
    later.should_save = True
    callback.on_epoch_end(None, state(global_step=5), later)
    assert later.should_save is True


def test_evaluation_progress_is_written_at_once_then_at_most_every_2_seconds(
    plugin, tmp_path, monkeypatch
):
    clock = iter([100.0, 100.5, 101.9, 102.0, 102.1, 200.0, 200.1])
    monkeypatch.setattr(plugin.time, "monotonic", lambda: next(clock))
    metrics = tmp_path / "metrics.jsonl"
    callback = plugin.OverbrainerMetricsCallback(str(metrics), None)
    loader = list(range(40))
    for _ in range(5):
        callback.on_prediction_step(None, state(), control(), eval_dataloader=loader)
    callback.on_evaluate(None, state(), control(), metrics={})
    callback.on_prediction_step(None, state(), control(), eval_dataloader=iter(loader))
    callback.on_prediction_step(None, state(), control())
    written = [(e["step"], e["total"]) for e in map(json.loads, metrics.read_text().splitlines())]
    assert written == [(1, 40), (4, 40), (1, None)]


def test_a_short_evaluation_is_written_at_each_tenth_and_at_its_last_batch(
    plugin, tmp_path, monkeypatch
):
    """Within 2 s, an evaluation of 4 batches used to write 1/4 only: the follower said
    `evaluating 1/4` and never more."""
    monkeypatch.setattr(plugin.time, "monotonic", lambda: 100.0)
    metrics = tmp_path / "metrics.jsonl"
    callback = plugin.OverbrainerMetricsCallback(str(metrics), None)
    for loader in (list(range(4)), list(range(25))):
        for _ in loader:
            callback.on_prediction_step(None, state(), control(), eval_dataloader=loader)
        callback.on_evaluate(None, state(), control(), metrics={})
    written = [(e["step"], e["total"]) for e in map(json.loads, metrics.read_text().splitlines())]
    assert written[:4] == [(1, 4), (2, 4), (3, 4), (4, 4)]
    assert written[4:] == [(1, 25), (3, 25), (5, 25), (8, 25), (10, 25), (13, 25), (15, 25),
                           (18, 25), (20, 25), (23, 25), (25, 25)]


def test_each_line_goes_out_in_one_write(plugin, tmp_path, monkeypatch):
    writes: list[bytes] = []
    real_write = os.write

    def spy(fd: int, data: bytes) -> int:
        writes.append(bytes(data))
        return real_write(fd, data)

    monkeypatch.setattr(plugin.os, "write", spy)
    metrics = tmp_path / "metrics.jsonl"
    callback = plugin.OverbrainerMetricsCallback(str(metrics), None)
    callback.on_train_begin(None, state(), control())
    callback.on_log(None, state(), control(), logs={"loss": 1.0, "learning_rate": 1e-4})
    callback.on_train_end(None, state(), control())
    assert len(writes) == 3
    assert all(data.endswith(b"\n") and data.count(b"\n") == 1 for data in writes)
    assert b"".join(writes) == metrics.read_bytes()


def test_a_metrics_file_that_cannot_be_written_is_reported_once_and_training_goes_on(
    plugin, tmp_path, capsys
):
    callback = plugin.OverbrainerMetricsCallback(str(tmp_path / "missing" / "m.jsonl"), None)
    for _ in range(3):
        callback.on_log(None, state(), control(), logs={"loss": 1.0})
    assert capsys.readouterr().err.count("overbrainer_metrics: cannot write") == 1


def test_without_the_metrics_variable_nothing_is_written(plugin, tmp_path, monkeypatch):
    monkeypatch.delenv("OVERBRAINER_METRICS", raising=False)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    callback = plugin.OverbrainerMetricsPlugin().add_callbacks_post_trainer({}, None)[0]
    callback.on_train_begin(None, state(), control())
    callback.on_log(None, state(), control(), logs={"loss": 1.0})
    assert list(cwd.iterdir()) == []


def test_the_plugin_needs_nothing_but_the_standard_library(tmp_path):
    """``python -S``: no site-packages, so no Axolotl, transformers, torch or overbrainer."""
    (tmp_path / plugin_file().name).write_bytes(plugin_file().read_bytes())
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]); import overbrainer_metrics as m\n"
        "plugin = m.OverbrainerMetricsPlugin(); plugin.register({})\n"
        "(callback,) = plugin.add_callbacks_post_trainer({}, None)\n"
        "for event in ('on_init_end', 'on_epoch_begin', 'on_step_begin', 'on_substep_end',\n"
        "              'on_pre_optimizer_step', 'on_optimizer_step', 'on_push_begin'):\n"
        "    getattr(callback, event)(None, None, None)\n"
        "loaded = {'axolotl', 'transformers', 'torch', 'overbrainer'} & set(sys.modules)\n"
        "print(sorted(loaded))\n"
    )
    result = subprocess.run(
        [sys.executable, "-S", "-c", script, str(tmp_path)], capture_output=True, text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "[]\n"


# Run in a child: a signal mask is the thread's, and pytest's must stay as it is.
HOLD = """\
import signal, sys
if sys.argv[2] == "shielded":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
sys.path.insert(0, sys.argv[1])
import overbrainer_metrics as m
from types import SimpleNamespace
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})  # as Python's resource tracker
(callback,) = m.OverbrainerMetricsPlugin().add_callbacks_post_trainer({}, None)
state = SimpleNamespace(max_steps=9, global_step=1, is_world_process_zero=True)
control = SimpleNamespace(should_training_stop=False, should_save=False)
for event in sys.argv[3:]:
    getattr(callback, event)(None, state, control)
print(signal.SIGTERM in signal.pthread_sigmask(signal.SIG_BLOCK, ()))
"""


@pytest.mark.parametrize("event", ["on_train_begin", "on_epoch_begin", "on_step_end"])
def test_a_trainer_started_shielded_from_term_blocks_it_again(tmp_path, event):
    (tmp_path / plugin_file().name).write_bytes(plugin_file().read_bytes())
    for started, blocked in (("shielded", "True"), ("plain", "False")):
        result = subprocess.run(
            [sys.executable, "-S", "-c", HOLD, str(tmp_path), started, event],
            capture_output=True, text=True, check=False,
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout == f"{blocked}\n", (started, event)


def test_the_plugin_seeds_the_generators_before_the_model_loads(tmp_path):
    # A stand-in for transformers: what set_seed is given is what matters here.
    (tmp_path / plugin_file().name).write_bytes(plugin_file().read_bytes())
    (tmp_path / "transformers.py").write_text(
        "class TrainerCallback:\n    pass\n"
        "def set_seed(seed):\n    print('seeded', seed)\n"
    )
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]); import overbrainer_metrics as m\n"
        "plugin = m.OverbrainerMetricsPlugin()\n"
        "plugin.pre_model_load({'seed': 7})\n"
        "plugin.pre_model_load({})\n"
        "plugin.pre_model_load({'seed': True})\n"
    )
    result = subprocess.run(
        [sys.executable, "-S", "-c", script, str(tmp_path)], capture_output=True, text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "seeded 7\n"


def test_a_kd_loss_whose_terms_cannot_be_computed_still_trains(plugin, capsys):
    # An Axolotl other than 0.19 (here: none at all) must not end the run over a display.
    calls = []

    def loss_fn(*tensors, true_labels, student_bias=None):
        calls.append(tensors)
        return 2.5

    trainer = SimpleNamespace(_kd_loss_fn=loss_fn, compute_loss=None, log=None)
    parts = plugin.KDLossParts(trainer)
    parts.install()
    parts.collecting = "train"
    assert trainer._kd_loss_fn(1, 2, 3, 4, 5, true_labels=None) == 2.5
    assert trainer._kd_loss_fn(1, 2, 3, 4, 5, true_labels=None) == 2.5
    assert len(calls) == 2 and parts.failed
    err = capsys.readouterr().err
    assert err.count("the KD loss's two terms cannot be logged") == 1
    assert "training goes on, with the loss alone" in err
