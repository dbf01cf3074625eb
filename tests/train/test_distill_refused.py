"""``distill = "logits"``: training on the logits is not built yet, and says so before a run."""

from __future__ import annotations


def test_train_refuses_logits_before_any_run(trainer, run_cli):
    config = trainer.dir / "overbrainer.toml"
    config.write_text(config.read_text().replace(
        'adapter = "lora"', 'adapter = "lora"\ndistill = "logits"'
    ))
    result = run_cli("train")
    assert result.exit_code == 1
    assert result.stderr == (
        'error: training.distill = "logits": training on the parent\'s logits (Axolotl\'s KD '
        "plugin) is not built yet; `answers` keeps them in data/logprobs.bin for when it is. "
        'Set training.distill = "text" to train on the parent\'s answers now\n'
    )
    assert trainer.runs() == []
