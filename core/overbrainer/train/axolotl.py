"""Axolotl as overbrainer drives it: the settings of axolotl.yaml (written as text by
:mod:`~overbrainer.train.axolotl_yaml`; the job's stages and environment are in
:mod:`~overbrainer.train.job_setup`).

Paths in axolotl.yaml are relative to the job directory (:mod:`overbrainer.job.layout`),
where the runner runs every stage, so a job runs wherever a target puts it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from overbrainer.config.load import ConfigError
from overbrainer.config.model import Training
from overbrainer.job.layout import (
    DEEPSPEED_DIR,
    EVAL_FILE,
    OUTPUT_DIR,
    PREPARED_DIR,
    TRAIN_FILE,
)
from overbrainer.job.spec import Launch

PLUGIN_MODULE = "overbrainer_metrics"
PLUGIN = f"{PLUGIN_MODULE}.OverbrainerMetricsPlugin"
KD_PLUGIN = "axolotl.integrations.kd.KDPlugin"
KD_DATASET = "axolotl.integrations.kd.chat_template"
"""Axolotl's KD plugin and its dataset type (0.19: each example's ``logprobs`` and
``target_token_ids``, one row a token, lined up with the end of its tokens)."""

TYPED_KEYS: Mapping[str, str] = {
    "base_model": "base_model",
    "adapter": "adapter",
    "num_epochs": "epochs",
    "learning_rate": "learning_rate",
    "lora_r": "lora_r",
    "lora_alpha": "lora_alpha",
    "lora_dropout": "lora_dropout",
    "sequence_len": "sequence_len",
    "micro_batch_size": "micro_batch_size",
    "gradient_accumulation_steps": "gradient_accumulation_steps",
    "optimizer": "optimizer",
    "lr_scheduler": "lr_scheduler",
    "sample_packing": "sample_packing",
    "evals_per_epoch": "evals_per_epoch",
    "saves_per_epoch": "saves_per_epoch",
    "chat_template": "chat_template",
    "chat_template_jinja": "chat_template_jinja",
    "hub_model_id": "hub_model_id",
    "seed": "seed",
}
"""axolotl.yaml keys that ``[training]`` sets, by the ``[training]`` key that sets them."""

MANAGED_KEYS = (
    "datasets",
    "test_datasets",
    "val_set_size",
    "output_dir",
    "dataset_prepared_path",
    "plugins",
    "resume_from_checkpoint",
    "kd_trainer",
    "kd_alpha",
    "kd_ce_alpha",
    "kd_temperature",
    "kd_beta",
    "kd_online_server_base_url",
    "kd_online_server",
    "kd_online_topk",
    "kd_online_timeout",
)
"""axolotl.yaml keys that overbrainer alone sets: the run directory's layout depends on them."""

RESUME_IGNORED = (
    "resume_from_checkpoint",
    # Where the online teacher listens (a new port each serve), the dialect it is asked in
    # and how long it may take: not what is trained (the parent's model counts, apart).
    "kd_online_server_base_url",
    "kd_online_server",
    "kd_online_timeout",
    "hub_model_id",
    "hub_strategy",
    "evals_per_epoch",
    "eval_steps",
    "eval_strategy",
    "saves_per_epoch",
    "save_steps",
    "save_strategy",
    "save_total_limit",
    "logging_steps",
    "use_tensorboard",
    "use_wandb",
    "use_mlflow",
    "use_comet",
    "wandb_*",
    "mlflow_*",
    "comet_*",
)
"""Top-level keys (``fnmatch`` patterns) a resumed run may change: they do not touch the model."""

CPU_KEYS: Mapping[str, bool] = {
    "bf16": False,
    "fp16": False,
    "tf32": False,
    "lora_mlp_kernel": False,
    "lora_qkv_kernel": False,
    "lora_o_kernel": False,
    "lora_embedding_kernel": False,
}
"""What Axolotl needs to train on a CPU: full precision, and none of the fused LoRA kernels it
turns on by itself for lora/qlora (they need CUDA). Written for every adapter, so a run's
axolotl.yaml tells alone whether it was made for a CPU."""


SHARDING_KEYS = ("deepspeed", "fsdp_version", "fsdp_config")
"""axolotl.yaml keys a target's ``deepspeed`` or ``fsdp`` preset sets."""

_FSDP_COMMON: Mapping[str, Any] = {
    "auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
    # Checkpoints (snapshots) are saved shard by shard, quickly; the final model whole, so
    # that export and merge-lora read it as any other.
    "state_dict_type": "SHARDED_STATE_DICT",
    "final_state_dict_type": "FULL_STATE_DICT",
}
FSDP_CONFIGS: Mapping[str, Mapping[str, Any]] = {
    "full_shard": {**_FSDP_COMMON, "reshard_after_forward": True, "offload_params": False},
    "shard_grad_op": {**_FSDP_COMMON, "reshard_after_forward": False, "offload_params": False},
    "full_shard_offload": {**_FSDP_COMMON, "reshard_after_forward": True, "offload_params": True},
}
"""Axolotl's ``fsdp_config`` (FSDP2) for each ``fsdp`` preset of a target."""


def deepspeed_file(preset: str) -> str:
    """The job-relative path of the DeepSpeed preset ``preset``'s JSON."""
    return f"{DEEPSPEED_DIR}/{preset}.json"


def sharding_config(launch: Launch | None, root: str = "") -> dict[str, Any]:
    """axolotl.yaml's keys for a target's ``deepspeed`` or ``fsdp`` preset (none without)."""
    if launch is None:
        return {}
    if launch.deepspeed is not None:
        path = deepspeed_file(launch.deepspeed)
        return {"deepspeed": f"{root}/{path}" if root else path}
    if launch.fsdp is not None:
        return {"fsdp_version": 2, "fsdp_config": dict(FSDP_CONFIGS[launch.fsdp])}
    return {}


def axolotl_config(
    training: Training,
    *,
    has_eval: bool,
    resume_checkpoint: str | None = None,
    cpu: bool = False,
    root: str = "",
    launch: Launch | None = None,
    teacher: OnlineTeacher | None = None,
) -> dict[str, Any]:
    """The content of axolotl.yaml for ``training``.

    ``has_eval``: the run has ``data/eval.jsonl``; ``resume_checkpoint``: the job-relative
    checkpoint to resume from (``resume/checkpoint-N``); ``cpu``: the job trains on a CPU;
    ``launch``: over several GPUs, with the target's DeepSpeed or FSDP preset.
    ``teacher``: the served parent the job asks with ``mode = "online"`` (None: its keys
    left out, to compare settings only).
    ``training.axolotl_extra`` merges last, tables key by key. Paths are relative to the
    job directory; ``root`` makes them absolute under it, as older runs had them (to
    compare a stopped run's settings with today's).

    Raises:
        ConfigError: ``axolotl_extra`` sets a key it must not (every problem listed).
    """
    problems = extra_problems(training)
    if problems:
        raise ConfigError(problems)

    def at(path: str) -> str:
        return f"{root}/{path}" if root else path

    logits = training.kd_offline
    config: dict[str, Any] = {
        "base_model": training.base_model,
        "datasets": [_dataset(at(TRAIN_FILE), logits=logits)],
        "val_set_size": 0,
        "sequence_len": training.sequence_len,
        "sample_packing": training.sample_packing,
        # Axolotl's online teacher collator reads packed batches only, in eval as in train.
        "eval_sample_packing": training.kd_online,
        "num_epochs": training.epochs,
        "micro_batch_size": training.micro_batch_size,
        "gradient_accumulation_steps": training.gradient_accumulation_steps,
        "learning_rate": training.learning_rate,
        "optimizer": training.optimizer,
        "lr_scheduler": training.lr_scheduler,
        "warmup_ratio": 0.1,
        "gradient_checkpointing": True,
        "logging_steps": 1,
        # Axolotl's own default leaves the datasets' shuffles unseeded: every run would
        # see the examples in another order.
        "seed": training.effective_seed,
        "output_dir": at(OUTPUT_DIR),
        "dataset_prepared_path": at(PREPARED_DIR),
        "plugins": [PLUGIN],
    }
    if training.distill == "logits":
        config |= kd_keys(training, teacher)
    if training.adapter in ("lora", "qlora"):
        config["adapter"] = training.adapter
        if training.adapter == "qlora":
            config["load_in_4bit"] = True
        config |= {
            "lora_r": training.lora_r,
            "lora_alpha": training.lora_alpha,
            "lora_dropout": training.lora_dropout,
            "lora_target_linear": True,
        }
    if has_eval:
        config["test_datasets"] = [{**_dataset(at(EVAL_FILE), logits=logits), "split": "train"}]
        config["evals_per_epoch"] = training.evals_per_epoch
    config["saves_per_epoch"] = training.saves_per_epoch
    config["save_total_limit"] = 2
    for key in ("chat_template", "chat_template_jinja", "hub_model_id"):
        value = getattr(training, key)
        if value is not None:
            config[key] = value
    if resume_checkpoint is not None:
        config["resume_from_checkpoint"] = at(resume_checkpoint)
    if cpu:
        config |= CPU_KEYS
    config |= sharding_config(launch, root)
    return _merged(config, training.axolotl_extra)


ALSO_IN_EXTRA = frozenset({"chat_template", "chat_template_jinja"})
"""Typed keys ``axolotl_extra`` may set too, as the reference tool's docs and projects do;
not both ways at once."""


def extra_problems(training: Training) -> list[str]:
    """Why ``training.axolotl_extra`` cannot be used, one line a key (empty when it can)."""
    problems = []
    for key, value in training.axolotl_extra.items():
        where = f"training.axolotl_extra.{key}"
        if key in ALSO_IN_EXTRA:
            if getattr(training, key) is not None:
                problems.append(f"{where}: training.{key} is set too; keep one of them")
        elif key in TYPED_KEYS:
            problems.append(f"{where}: set training.{TYPED_KEYS[key]} instead")
        elif key in MANAGED_KEYS:
            problems.append(f"{where}: overbrainer sets it for each run; remove it")
        elif key == "save_only_model" and value is True:
            problems.append(
                f"{where}: true would save checkpoints without the optimizer state, "
                "so a snapshot could not be resumed; remove it"
            )
    return problems


@dataclass(frozen=True)
class OnlineTeacher:
    """The served parent a job asks during training (``mode = "online"``)."""

    url: str
    """Its root as the job reaches it: ``http://127.0.0.1:PORT`` on the target."""
    server: str
    """Axolotl's ``kd_online_server``: ``vllm`` or ``sglang``, the requests it speaks."""


ONLINE_TIMEOUT_S = 120
"""Axolotl's default seconds a teacher's reply may take (it retries 10 times, 5 s apart)."""


def kd_keys(training: Training, teacher: OnlineTeacher | None = None) -> dict[str, Any]:
    """axolotl.yaml's keys for ``[training.kd]``: Axolotl's KD plugin after ours (its
    trainer computes the loss from the rows the dataset carries, or, online, that its
    collator asks ``teacher`` for)."""
    kd = training.kd
    online: dict[str, Any] = {}
    if training.kd_online:
        online = {"kd_online_topk": kd.top_k, "kd_online_timeout": ONLINE_TIMEOUT_S}
        if teacher is not None:
            online |= {"kd_online_server_base_url": teacher.url, "kd_online_server": teacher.server}
    return online | {
        "plugins": [PLUGIN, KD_PLUGIN],
        "kd_trainer": True,
        "kd_alpha": kd.alpha,
        "kd_ce_alpha": kd.ce_alpha,
        "kd_temperature": kd.temperature,
        "kd_beta": kd.beta,
    }


def _dataset(path: str, *, logits: bool = False) -> dict[str, Any]:
    return {
        "path": path,
        "ds_type": "json",
        "type": KD_DATASET if logits else "chat_template",
        "field_messages": "messages",
        "field_thinking": "reasoning_content",
        "roles_to_train": ["assistant"],
        "train_on_eos": "turn",
    }


def _merged(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``extra`` over it: tables merged key by key, anything else replaced."""
    merged = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merged(merged[key], value)
        else:
            merged[key] = value
    return merged


def is_local_path(model: str) -> bool:
    """True when ``model`` names a directory rather than a hub id.

    Only path syntax tells, since the directory is on the target: absolute, or starting with
    ``.`` or ``~``. A bare ``name`` or ``org/name`` is a hub id.
    """
    return model.startswith(("/", ".", "~"))
