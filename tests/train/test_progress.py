"""Progress while a run trains: the stderr lines, their pace, and the terminal bar."""

from __future__ import annotations

from overbrainer.logs import configure_logging
from overbrainer.train.progress import Summary, TrainingProgress


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_step_lines_at_each_tenth_with_pace_and_every_phase(capsys):
    configure_logging()
    clock = Clock()
    progress = TrainingProgress(clock=clock, bar=False)
    progress.status("running")
    progress.event({"event": "begin", "max_steps": 40})
    for step in range(1, 13):
        clock.now = step * 2.0
        progress.event(
            {
                "event": "log",
                "step": step,
                "max_steps": 40,
                "epoch": step / 13.3,
                "loss": 1.2345,
                "learning_rate": 2e-4,
                "grad_norm": 0.8124,
            }
        )
    for batch, seconds in ((1, 30.0), (20, 32.0), (60, 41.0), (90, 44.0)):
        clock.now = seconds
        progress.event({"event": "eval", "step": batch, "total": 120})
    progress.event({"event": "end", "step": 40})
    progress.event({"event": "stage", "name": "merge"})
    progress.phase("retrieving")
    progress.close()
    assert capsys.readouterr().err.splitlines() == [
        "train: job running",
        "train: step 1/40 (2%), epoch 0.08, loss 1.2345, lr 2.00e-04, grad_norm 0.812",
        "train: step 4/40 (10%), epoch 0.30, loss 1.2345, lr 2.00e-04, grad_norm 0.812, "
        "2.0 s/step, about 72 s left",
        "train: step 8/40 (20%), epoch 0.60, loss 1.2345, lr 2.00e-04, grad_norm 0.812, "
        "2.0 s/step, about 64 s left",
        "train: step 12/40 (30%), epoch 0.90, loss 1.2345, lr 2.00e-04, grad_norm 0.812, "
        "2.0 s/step, about 56 s left",
        "train: evaluating 1/120",
        "train: evaluating 20/120",
        "train: evaluating 60/120",
        "train: evaluating 90/120",
        "train: finalizing (saving model)",
        "train: merging adapter",
        "train: retrieving results",
    ]


def test_an_evaluation_is_said_at_each_tenth_and_at_its_end_however_fast(capsys):
    """Issue 43: an evaluation of 4 batches within a second said `evaluating 1/4` only."""
    configure_logging()
    progress = TrainingProgress(clock=Clock(), bar=False)
    progress.event({"event": "log", "step": 1, "max_steps": 2, "loss": 2.0})
    for _ in range(2):
        for batch in range(1, 5):
            progress.event({"event": "eval", "step": batch, "total": 4})
        progress.event({"event": "eval", "step": 4, "total": 4})  # said once
    progress.event({"event": "eval", "step": 9, "total": None})  # no total: by time only
    lines = capsys.readouterr().err.splitlines()
    assert lines[1:] == [f"train: evaluating {batch}/4" for batch in (1, 2, 3, 4)] * 2


def test_a_long_run_has_a_step_line_at_least_every_thirty_seconds(capsys):
    configure_logging()
    clock = Clock()
    progress = TrainingProgress(clock=clock, bar=False)
    for step in range(1, 40):  # 10,000 steps: a tenth is far off; one step each 4 s
        clock.now = step * 4.0
        progress.event({"event": "log", "step": step, "max_steps": 10_000, "loss": 2.0})
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(",")[0] for line in lines] == [
        "train: step 1/10000 (0%)", "train: step 9/10000 (0%)", "train: step 17/10000 (0%)",
        "train: step 25/10000 (0%)", "train: step 33/10000 (0%)",
    ]
    assert lines[1].endswith("loss 2.0000, 4.0 s/step, about 11.1 h left")


def test_the_summary_says_what_is_known():
    summary = Summary()
    assert summary.describe() == "no training step logged"
    summary.update(
        {"step": 12, "max_steps": 40, "epoch": 0.9, "loss": float("nan"), "eval_loss": 1.5}
    )
    assert summary.describe() == "step 12/40, epoch 0.90, eval_loss 1.5000"


def test_on_a_terminal_a_bar_shows_and_phases_still_print(capsys):
    configure_logging()
    progress = TrainingProgress(bar=True)
    progress.event({"event": "begin", "max_steps": 4})
    progress.event({"event": "log", "step": 1, "max_steps": 4, "loss": 2.0})
    progress.event({"event": "end", "step": 4})
    progress.close()
    err = capsys.readouterr().err
    assert "train: finalizing (saving model)" in err
    assert "train: step 1/4" not in err  # the bar replaces the periodic step lines


def test_a_followed_run_says_each_batch_of_a_short_evaluation(trainer, run_cli, monkeypatch):
    """Through the fake Axolotl and the metrics plugin: `evaluating 1/3` used to be all."""
    from overbrainer.testing.fake_axolotl import EVAL_BATCHES

    monkeypatch.setenv("FAKE_AXOLOTL_STEPS", "2")
    monkeypatch.setenv("FAKE_AXOLOTL_STEP_SECONDS", "0.05")
    result = run_cli("train")
    assert result.exit_code == 0, result.stderr
    said = [line for line in result.stderr.splitlines() if line.startswith("train: evaluating")]
    each = [f"train: evaluating {batch}/{EVAL_BATCHES}" for batch in range(1, EVAL_BATCHES + 1)]
    assert said and said == each * (len(said) // EVAL_BATCHES)
