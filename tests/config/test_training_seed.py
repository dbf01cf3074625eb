"""``[training] seed``: set, or taken from ``[pipeline] seed``, and shown by ``config check``."""

from __future__ import annotations

import pytest
from tests.helpers.project import LOCAL_PROVIDER

TRAINING = """
[training]
target = "gpu"
base_model = "Qwen/Qwen3-0.6B"
adapter = "lora"
{seed}

[targets.gpu]
kind = "runpod"
gpu_types = ["NVIDIA A40"]
max_hours = 1
"""


def _checked(run_cli, write_config, pipeline: str = "", training: str = "") -> list[str]:
    table = f"\n[pipeline]\n{pipeline}\n" if pipeline else ""
    write_config(table + TRAINING.format(seed=training))
    result = run_cli("config", "check", env=LOCAL_PROVIDER)
    assert result.exit_code == 0, result.stderr
    return result.stdout.splitlines()


@pytest.mark.parametrize(
    ("pipeline", "training", "shown"),
    [
        ("", "", 42),
        ("seed = 7", "", 7),
        ("seed = 7", "seed = 9", 9),
        ("seed = 4294967298", "", 2),  # modulo 2**32: NumPy takes no larger seed
    ],
)
def test_the_training_seed_is_its_own_or_the_pipelines(run_cli, write_config, pipeline,
                                                      training, shown):
    lines = _checked(run_cli, write_config, pipeline, training)
    assert f"training.seed = {shown}" in lines


@pytest.mark.parametrize("value", ["-1", "4294967296"])
def test_a_training_seed_out_of_range_is_named(run_cli, write_config, value):
    write_config(TRAINING.format(seed=f"seed = {value}"))
    result = run_cli("config", "check", env=LOCAL_PROVIDER)
    assert result.exit_code == 1
    bound = "at least 0" if value == "-1" else "at most 4294967295"
    assert f"  training.seed: must be {bound}" in result.stderr.splitlines()


def test_an_invalid_pipeline_seed_is_reported_once(run_cli, write_config):
    write_config("\n[pipeline]\nseed = -1\n" + TRAINING.format(seed=""))
    result = run_cli("config", "check", env=LOCAL_PROVIDER)
    assert result.exit_code == 1
    assert "pipeline.seed: must be at least 0" in result.stderr
    assert "training.seed" not in result.stderr
