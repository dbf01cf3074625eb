"""``[training] distill`` and ``[training.kd]``: defaults, bounds, and an online parent
that is not served refused."""

from __future__ import annotations

from tests.helpers.kd_data import write_tokenizer
from tests.helpers.project import LOCAL_PROVIDER

TRAINING = """
[training]
target = "gpu"
base_model = "{base}"
adapter = "lora"
{extra}

[targets.gpu]
kind = "runpod"
gpu_types = ["NVIDIA A40"]
max_hours = 1
"""


def _check(run_cli, write_config, extra: str, base: str = "Qwen/Qwen3-0.6B"):
    write_config(TRAINING.format(extra=extra, base=base))
    return run_cli("config", "check", env=LOCAL_PROVIDER)


def test_logits_with_default_kd_settings_is_valid(run_cli, write_config, tmp_path):
    child = write_tokenizer(tmp_path / "child")
    result = _check(run_cli, write_config, 'distill = "logits"', base=str(child))
    assert result.exit_code == 0, result.stderr


def test_an_unknown_distill_is_named(run_cli, write_config):
    result = _check(run_cli, write_config, 'distill = "hidden"')
    assert result.exit_code == 1
    assert "training.distill" in result.stderr
    assert "'text' or 'logits'" in result.stderr


def test_online_mode_without_a_served_parent_is_refused_by_config_check(
    run_cli, write_config, tmp_path
):
    child = write_tokenizer(tmp_path / "child")
    extra = 'distill = "logits"\n[training.kd]\nmode = "online"'
    result = _check(run_cli, write_config, extra, base=str(child))
    assert result.exit_code == 1
    assert (
        'training.kd.mode = "online" asks the parent during the run, so it must be served on '
        "the training target: roles.parent is on providers."
    ) in result.stderr
    assert 'serve = { target = "gpu", engine = "vllm", model = ... }' in result.stderr
    assert "Traceback" not in result.stderr


def test_kd_bounds_and_unknown_keys_are_named(run_cli, write_config):
    result = _check(run_cli, write_config, "[training.kd]\ntop_k = 0\nbeta = 2\nalfa = 1")
    assert result.exit_code == 1
    assert "training.kd.top_k: must be at least 1" in result.stderr
    assert "training.kd.beta: must be at most 1" in result.stderr
    assert "training.kd.alfa" in result.stderr


def test_no_loss_at_all_is_refused(run_cli, write_config):
    result = _check(run_cli, write_config, "[training.kd]\nalpha = 0\nce_alpha = 0")
    assert result.exit_code == 1
    assert "alpha and ce_alpha are both 0" in result.stderr
