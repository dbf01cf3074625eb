"""`runs diff` names a setting as overbrainer.toml does (issue 43)."""

from __future__ import annotations

from overbrainer.train.axolotl import TYPED_KEYS
from overbrainer.train.inputs import Inputs, differences, inputs_of


def test_a_training_setting_is_named_as_the_config_names_it():
    before = Inputs({}, {"num_epochs": 1, "learning_rate": 0.0002, "warmup_steps": 10})
    after = Inputs({}, {"num_epochs": 3, "learning_rate": 0.0002, "warmup_steps": 20})
    assert TYPED_KEYS["num_epochs"] == "epochs"
    assert differences(before, after) == [
        "epochs: 1 -> 3",
        "warmup_steps: 10 -> 20",  # set through axolotl_extra: Axolotl's own name
    ]


def test_a_setting_only_one_run_has_is_unset_in_the_other():
    before = Inputs({}, {"sequence_len": 512})
    after = Inputs({}, {})
    assert differences(before, after) == ["sequence_len: 512 -> (unset)"]


def test_the_gpus_a_run_trained_on_are_an_input_named_as_the_target_names_them(tmp_path):
    def inputs(processes: int | None) -> Inputs:
        return inputs_of({}, tmp_path, "Qwen/Qwen3-0.6B", device="gpu", merge=False,
                         processes=processes)  # fmt: skip

    assert "processes" not in inputs(None).parts  # a run made before `gpus` keeps its fingerprint
    assert inputs(2).fingerprint != inputs(4).fingerprint != inputs(None).fingerprint
    assert differences(inputs(2), inputs(4)) == ["gpus: 2 -> 4"]
    assert differences(inputs(None), inputs(2)) == ["gpus: (unset) -> 2"]
