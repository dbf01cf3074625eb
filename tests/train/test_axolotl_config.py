"""axolotl.yaml generation, its YAML form, the resume check, the job's commands and environment."""

from __future__ import annotations

import ast
import math
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from overbrainer.config.load import ConfigError
from overbrainer.config.model import Training
from overbrainer.errors import UserError
from overbrainer.job.spec import JobStage, Launch
from overbrainer.train.axolotl import ALSO_IN_EXTRA, MANAGED_KEYS, TYPED_KEYS, axolotl_config
from overbrainer.train.axolotl_yaml import dump_yaml, resume_mismatch
from overbrainer.train.job_setup import job_env, job_stages, plugin_file

ROOT = "/work/runs/demo_20260101-000000"


def training(**changes: Any) -> Training:
    settings = {"target": "box", "base_model": "Qwen/Qwen3-0.6B", "adapter": "lora", **changes}
    return Training(**settings)


def dataset(path: str) -> dict[str, Any]:
    return {
        "path": path,
        "ds_type": "json",
        "type": "chat_template",
        "field_messages": "messages",
        "field_thinking": "reasoning_content",
        "roles_to_train": ["assistant"],
        "train_on_eos": "turn",
    }


def test_a_lora_run_with_eval_data_gets_every_key_of_the_spec_in_order():
    config = axolotl_config(training(), root=ROOT, has_eval=True)
    assert config == {
        "base_model": "Qwen/Qwen3-0.6B",
        "datasets": [dataset(f"{ROOT}/data/train.jsonl")],
        "val_set_size": 0,
        "sequence_len": 4096,
        "sample_packing": True,
        "eval_sample_packing": False,
        "num_epochs": 3,
        "micro_batch_size": 2,
        "gradient_accumulation_steps": 4,
        "learning_rate": 2e-4,
        "optimizer": "adamw_torch_fused",
        "lr_scheduler": "cosine",
        "warmup_ratio": 0.1,
        "gradient_checkpointing": True,
        "logging_steps": 1,
        "seed": 42,
        "output_dir": f"{ROOT}/output",
        "dataset_prepared_path": f"{ROOT}/prepared",
        "plugins": ["overbrainer_metrics.OverbrainerMetricsPlugin"],
        "adapter": "lora",
        "lora_r": 16,
        "lora_alpha": 32,
        "lora_dropout": 0.05,
        "lora_target_linear": True,
        "test_datasets": [{**dataset(f"{ROOT}/data/eval.jsonl"), "split": "train"}],
        "evals_per_epoch": 4,
        "saves_per_epoch": 1,
        "save_total_limit": 2,
    }
    assert list(config)[:3] == ["base_model", "datasets", "val_set_size"]


def test_paths_are_relative_to_the_job_directory_by_default():
    config = axolotl_config(
        training(), has_eval=True, resume_checkpoint="resume/checkpoint-4", cpu=True
    )
    assert config["datasets"][0]["path"] == "data/train.jsonl"
    assert config["test_datasets"][0]["path"] == "data/eval.jsonl"
    assert config["output_dir"] == "output"
    assert config["dataset_prepared_path"] == "prepared"
    assert config["resume_from_checkpoint"] == "resume/checkpoint-4"


def test_without_eval_data_there_is_no_test_dataset_and_no_eval_schedule():
    config = axolotl_config(training(), root=ROOT, has_eval=False)
    assert "test_datasets" not in config
    assert "evals_per_epoch" not in config


def test_the_datasets_of_train_and_eval_are_separate_objects():
    config = axolotl_config(training(), root=ROOT, has_eval=True)
    config["datasets"][0]["roles_to_train"].append("user")
    assert config["test_datasets"][0]["roles_to_train"] == ["assistant"]


def test_qlora_loads_the_base_model_in_4_bits():
    config = axolotl_config(training(adapter="qlora"), root=ROOT, has_eval=False)
    assert config["adapter"] == "qlora"
    assert config["load_in_4bit"] is True


def test_a_full_fine_tune_has_no_adapter_keys():
    config = axolotl_config(training(adapter="full"), root=ROOT, has_eval=False)
    for key in ("adapter", "load_in_4bit", "lora_r", "lora_alpha", "lora_dropout",
                "lora_target_linear"):
        assert key not in config


def test_the_typed_settings_reach_their_axolotl_keys():
    config = axolotl_config(
        training(
            base_model="/models/tiny", epochs=1, learning_rate=1e-3, lora_r=8, lora_alpha=16,
            lora_dropout=0.0, sequence_len=256, micro_batch_size=1, gradient_accumulation_steps=2,
            optimizer="adamw_torch", lr_scheduler="linear", sample_packing=False,
            evals_per_epoch=2, saves_per_epoch=3,
        ),
        root=ROOT, has_eval=True,
    )
    expected = {
        "base_model": "/models/tiny", "num_epochs": 1, "learning_rate": 1e-3, "lora_r": 8,
        "lora_alpha": 16, "lora_dropout": 0.0, "sequence_len": 256, "micro_batch_size": 1,
        "gradient_accumulation_steps": 2, "optimizer": "adamw_torch", "lr_scheduler": "linear",
        "sample_packing": False, "evals_per_epoch": 2, "saves_per_epoch": 3,
    }
    assert {key: config[key] for key in expected} == expected


def test_template_and_hub_settings_appear_only_when_set():
    plain = axolotl_config(training(), root=ROOT, has_eval=False)
    for key in ("chat_template", "chat_template_jinja", "hub_model_id"):
        assert key not in plain
    config = axolotl_config(
        training(chat_template="qwen3", chat_template_jinja="{{ x }}", hub_model_id="me/child"),
        root=ROOT, has_eval=False,
    )
    assert config["chat_template"] == "qwen3"
    assert config["chat_template_jinja"] == "{{ x }}"
    assert config["hub_model_id"] == "me/child"


def test_a_resumed_run_points_at_its_checkpoint_under_the_root():
    config = axolotl_config(
        training(), root=ROOT, has_eval=False, resume_checkpoint="resume/checkpoint-12"
    )
    assert config["resume_from_checkpoint"] == f"{ROOT}/resume/checkpoint-12"
    assert "resume_from_checkpoint" not in axolotl_config(training(), root=ROOT, has_eval=False)


@pytest.mark.parametrize("adapter", ["lora", "qlora", "full"])
def test_a_cpu_run_trains_in_full_precision_without_fused_kernels(adapter):
    config = axolotl_config(training(adapter=adapter), root=ROOT, has_eval=False, cpu=True)
    for key in ("bf16", "fp16", "tf32", "lora_mlp_kernel", "lora_qkv_kernel", "lora_o_kernel",
                "lora_embedding_kernel"):
        assert config[key] is False, key
    gpu = axolotl_config(training(adapter=adapter), root=ROOT, has_eval=False)
    assert "bf16" not in gpu
    assert "lora_mlp_kernel" not in gpu


def test_axolotl_extra_merges_last_tables_key_by_key():
    extra = {
        "special_tokens": {"pad_token": "<pad>"},
        "lora_target_modules": ["q_proj"],
        "bf16": True,
        "warmup_ratio": 0.0,
        "save_only_model": False,
    }
    config = axolotl_config(training(axolotl_extra=extra), root=ROOT, has_eval=False, cpu=True)
    assert config["bf16"] is True
    assert config["warmup_ratio"] == 0.0
    assert config["lora_target_modules"] == ["q_proj"]
    assert config["save_only_model"] is False
    assert list(config)[-1] == "save_only_model"


def test_nested_tables_of_axolotl_extra_merge_into_nested_tables():
    from overbrainer.train.axolotl import _merged

    base = {"a": {"x": 1, "y": {"p": 1, "q": 2}}, "b": [1]}
    merged = _merged(base, {"a": {"y": {"q": 3}, "z": 4}, "b": [2]})
    assert merged == {"a": {"x": 1, "y": {"p": 1, "q": 3}, "z": 4}, "b": [2]}
    assert base == {"a": {"x": 1, "y": {"p": 1, "q": 2}}, "b": [1]}


def test_axolotl_extra_refuses_every_problem_at_once():
    extra = {
        "num_epochs": 1,
        "learning_rate": 1e-3,
        "output_dir": "/elsewhere",
        "plugins": [],
        "save_only_model": True,
        "seed": 7,
        "dataloader_num_workers": 2,
    }
    with pytest.raises(UserError) as caught:
        axolotl_config(training(axolotl_extra=extra), root=ROOT, has_eval=False)
    assert isinstance(caught.value, ConfigError)
    assert caught.value.problems == [
        "training.axolotl_extra.num_epochs: set training.epochs instead",
        "training.axolotl_extra.learning_rate: set training.learning_rate instead",
        "training.axolotl_extra.output_dir: overbrainer sets it for each run; remove it",
        "training.axolotl_extra.plugins: overbrainer sets it for each run; remove it",
        "training.axolotl_extra.save_only_model: true would save checkpoints without the "
        "optimizer state, so a snapshot could not be resumed; remove it",
        "training.axolotl_extra.seed: set training.seed instead",
    ]


@pytest.mark.parametrize("key", sorted(set(TYPED_KEYS) - ALSO_IN_EXTRA))
def test_every_typed_key_is_refused_in_axolotl_extra(key):
    with pytest.raises(ConfigError) as caught:
        axolotl_config(training(axolotl_extra={key: 1}), root=ROOT, has_eval=False)
    assert caught.value.problems == [
        f"training.axolotl_extra.{key}: set training.{TYPED_KEYS[key]} instead"
    ]
    assert TYPED_KEYS[key] in Training.model_fields


@pytest.mark.parametrize("key", sorted(ALSO_IN_EXTRA))
def test_a_chat_template_may_come_from_axolotl_extra_as_the_reference_tool_allows(key):
    config = axolotl_config(training(axolotl_extra={key: "chatml"}), has_eval=False)
    assert config[key] == "chatml"
    with pytest.raises(ConfigError) as caught:
        axolotl_config(training(axolotl_extra={key: "chatml"}, **{key: "qwen3"}), has_eval=False)
    assert caught.value.problems == [
        f"training.axolotl_extra.{key}: training.{key} is set too; keep one of them"
    ]


@pytest.mark.parametrize("key", MANAGED_KEYS)
def test_every_managed_key_is_refused_in_axolotl_extra(key):
    with pytest.raises(ConfigError):
        axolotl_config(training(axolotl_extra={key: "x"}), root=ROOT, has_eval=False)


def test_the_typed_keys_are_exactly_the_ones_a_training_setting_writes():
    every = training(
        chat_template="qwen3", chat_template_jinja="{{ reasoning_content }}",
        hub_model_id="me/child",
    )
    config = axolotl_config(every, root=ROOT, has_eval=True)
    written = {"adapter"}  # lora -> qlora also adds load_in_4bit, which is not a setting
    for name in Training.model_fields.keys() - {"target", "adapter", "merge", "axolotl_extra"}:
        changed = axolotl_config(
            every.model_copy(update={name: _other(getattr(every, name))}), root=ROOT,
            has_eval=True,
        )
        written |= {key for key in config if changed[key] != config[key]}
    assert written == set(TYPED_KEYS)


def _other(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value / 2
    return f"{value}-other"


# The YAML form.


def test_the_yaml_is_block_style_with_double_quoted_strings():
    text = dump_yaml(axolotl_config(training(), root=ROOT, has_eval=True, cpu=True))
    lines = text.splitlines()
    assert 'base_model: "Qwen/Qwen3-0.6B"' in lines
    assert "datasets:" in lines
    assert '- path: "/work/runs/demo_20260101-000000/data/train.jsonl"' in lines
    assert "  roles_to_train:" in lines
    assert '  - "assistant"' in lines
    assert "sample_packing: true" in lines
    assert "bf16: false" in lines
    assert "num_epochs: 3" in lines
    assert "learning_rate: 0.0002" in lines
    assert "{" not in text


@pytest.mark.parametrize(
    ("key", "written"),
    [
        ("on", '"on"'), ("yes", '"yes"'), ("y", '"y"'), ("N", '"N"'), ("off", '"off"'),
        ("null", '"null"'), ("True", '"True"'), ("1e3", '"1e3"'), ("12", '"12"'),
        ("a b", '"a b"'), ("key:x", '"key:x"'), ("on_start", "on_start"),
        ("wandb-project", "wandb-project"), ("y1", "y1"),
    ],
)
def test_keys_yaml_1_1_would_read_otherwise_are_quoted(key, written):
    text = dump_yaml({key: 1})
    assert text == f"{written}: 1\n"
    assert yaml.safe_load(text) == {key: 1}


ODD_STRINGS = [
    "", " ", "yes", "no", "on", "off", "y", "n", "~", "null", "true", "1", "1.0", "0x1f", "1e3",
    ".inf", "-.nan", "2026-01-01", "12:30:45", "- item", "? key", ": value", "#comment",
    "a # b", "a: b", "[1, 2]", "{a: 1}", "*alias", "&anchor", "!tag", "%directive", "@", "`",
    "'single'", '"double"', "back\\slash", "tab\there", "line\nbreak", "crlf\r\n", "\x00nul",
    "\x85next line", "\u2028 line sep", "\ufeffbom", "émoji 🎉", "trailing ", " leading",
    "{{ messages[0]['content'] }}{% if x %}\n{% endif %}", "x" * 500, "---", "...",
]


@pytest.mark.parametrize("text", ODD_STRINGS)
def test_odd_strings_survive_as_keys_and_values(text):
    config = {"value": text, text: [text, {"nested": text}]}
    assert yaml.safe_load(dump_yaml(config)) == config


_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(st.characters(exclude_categories=("Cs",)))
    | st.sampled_from(ODD_STRINGS)
)
_keys = st.text(st.characters(exclude_categories=("Cs",))) | st.sampled_from(ODD_STRINGS)
_values = st.recursive(
    _scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_keys, children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(_keys, _values, max_size=8))
def test_pyyaml_reads_the_yaml_back_unchanged(config):
    assert yaml.safe_load(dump_yaml(config)) == config


def test_non_finite_floats_survive():
    loaded = yaml.safe_load(dump_yaml({"a": math.inf, "b": -math.inf, "c": math.nan}))
    assert loaded["a"] == math.inf
    assert loaded["b"] == -math.inf
    assert math.isnan(loaded["c"])


def test_a_value_used_twice_is_written_twice_not_aliased():
    shared = ["assistant"]
    text = dump_yaml({"a": shared, "b": shared})
    assert "&" not in text
    assert "*" not in text


# The resume check.


def test_the_same_settings_do_not_differ():
    config = axolotl_config(training(), root=ROOT, has_eval=True)
    assert resume_mismatch(dump_yaml(config), config) == []


def test_the_settings_that_changed_are_named_in_the_config_order():
    old = axolotl_config(training(), root=ROOT, has_eval=True)
    new = axolotl_config(training(learning_rate=1e-3, lora_r=8), root=ROOT, has_eval=True)
    assert resume_mismatch(dump_yaml(old), new) == ["learning_rate", "lora_r"]


def test_keys_present_on_one_side_only_differ():
    old = axolotl_config(training(), root=ROOT, has_eval=True)
    new = axolotl_config(training(axolotl_extra={"use_rslora": True}), root=ROOT, has_eval=True)
    del old["warmup_ratio"]
    assert resume_mismatch(dump_yaml(old), new) == ["warmup_ratio", "use_rslora"]
    assert resume_mismatch(dump_yaml(new), old) == ["warmup_ratio", "use_rslora"]


def test_a_changed_seed_differs_and_a_run_made_before_seeds_resumes_with_any():
    old = axolotl_config(training(), root=ROOT, has_eval=True)
    new = axolotl_config(training(seed=7), root=ROOT, has_eval=True)
    assert new["seed"] == 7
    assert resume_mismatch(dump_yaml(old), new) == ["seed"]
    del old["seed"]  # Axolotl shuffled such a run at random: nothing to keep to
    assert resume_mismatch(dump_yaml(old), new) == []


def test_settings_that_do_not_change_the_model_may_differ():
    old = axolotl_config(training(), root=ROOT, has_eval=True)
    new = axolotl_config(
        training(
            evals_per_epoch=9, saves_per_epoch=5, hub_model_id="me/child",
            axolotl_extra={
                "hub_strategy": "end", "eval_steps": 3, "eval_strategy": "steps",
                "save_steps": 4, "save_strategy": "steps", "use_tensorboard": True,
                "use_wandb": True, "wandb_project": "p", "mlflow_tracking_uri": "u",
                "use_mlflow": True, "use_comet": True, "comet_workspace": "w",
            },
        ),
        root=ROOT, has_eval=True, resume_checkpoint="resume/checkpoint-3",
    )
    new["save_total_limit"] = 5
    new["logging_steps"] = 10
    assert resume_mismatch(dump_yaml(old), new) == []


def test_an_ignored_name_only_covers_its_own_keys():
    old = axolotl_config(training(), root=ROOT, has_eval=True)
    new = {**old, "wandbx": 1, "save_only_model": False}
    assert resume_mismatch(dump_yaml(old), new) == ["wandbx", "save_only_model"]


@pytest.mark.parametrize("text", ["- a list", "just text", "", "a: [unclosed"])
def test_an_old_yaml_that_is_no_mapping_is_refused(text):
    with pytest.raises(ValueError, match="YAML"):
        resume_mismatch(text, {})


# The job.


def test_a_gpu_job_trains_with_axolotls_default_launcher():
    assert job_stages(training(), cpu=False) == (
        JobStage("train", ("axolotl", "train", "axolotl.yaml")),
    )


def test_a_cpu_job_trains_with_the_python_launcher_and_merges_without_one():
    assert job_stages(training(merge=True), cpu=True) == (
        JobStage("train", ("axolotl", "train", "axolotl.yaml", "--launcher", "python")),
        JobStage("merge", ("axolotl", "merge-lora", "axolotl.yaml")),
    )


@pytest.mark.parametrize(
    ("base_model", "offline"),
    [
        ("/models/tiny", True), ("./models/tiny", True), ("../tiny", True), ("~/tiny", True),
        ("Qwen/Qwen3-0.6B", False), ("gpt2", False),
    ],
)
def test_the_job_environment_turns_telemetry_off_and_the_hub_off_for_a_local_model(
    base_model, offline
):
    env, paths, pythonpath = job_env(base_model)
    expected = {"AXOLOTL_DO_NOT_TRACK": "1", "DO_NOT_TRACK": "1"}
    if offline:
        expected["HF_HUB_OFFLINE"] = "1"
    assert env == expected
    assert paths == {"OVERBRAINER_METRICS": "metrics.jsonl",
                     "OVERBRAINER_SNAPSHOT": "snapshot.request"}
    assert pythonpath == ("plugin",)


def test_the_shipped_plugin_imports_nothing_but_the_standard_library_unguarded():
    tree = ast.parse(plugin_file().read_text(encoding="utf-8"))
    guarded = {
        node.module for statement in tree.body if isinstance(statement, ast.Try)
        for node in ast.walk(statement) if isinstance(node, ast.ImportFrom)
    }
    assert guarded == {"axolotl.integrations.base", "transformers"}
    top = {
        alias.name.split(".")[0] for statement in tree.body
        if isinstance(statement, ast.Import) for alias in statement.names
    } | {
        statement.module.split(".")[0] for statement in tree.body
        if isinstance(statement, ast.ImportFrom) and statement.module
    }
    assert top <= {"__future__", "json", "math", "os", "signal", "sys", "time", "typing"}


# runs diff: sharding said as the target sets it.


@pytest.mark.parametrize(
    ("before", "after", "line"),
    [
        (None, Launch(2, fsdp="full_shard"), 'sharding: (none) -> fsdp = "full_shard"'),
        (Launch(2, fsdp="full_shard"), Launch(2, fsdp="shard_grad_op"),
         'sharding: fsdp = "full_shard" -> fsdp = "shard_grad_op"'),
        (Launch(2, deepspeed="zero2"), Launch(2, fsdp="full_shard_offload"),
         'sharding: deepspeed = "zero2" -> fsdp = "full_shard_offload"'),
        (Launch(2, deepspeed="zero3"), None, 'sharding: deepspeed = "zero3" -> (none)'),
    ],
)  # fmt: skip
def test_runs_diff_names_the_sharding_preset_not_axolotl_s_keys(before, after, line):
    from overbrainer.train.inputs import Inputs, differences

    def inputs(launch: Launch | None) -> Inputs:
        config = axolotl_config(training(), has_eval=True, launch=launch)
        return Inputs({}, {k: v for k, v in config.items() if k != "base_model"})

    found = differences(inputs(before), inputs(after))
    assert found == [line]


def test_an_fsdp_config_of_its_own_still_shows_its_keys():
    from overbrainer.train.inputs import Inputs, differences

    own = {"fsdp_version": 2, "fsdp_config": {"reshard_after_forward": True}}
    other = {"fsdp_version": 2, "fsdp_config": {"reshard_after_forward": False}}
    found = differences(Inputs({}, own), Inputs({}, other))
    assert found == [
        'fsdp_config: {"reshard_after_forward": true} -> {"reshard_after_forward": false}'
    ]
