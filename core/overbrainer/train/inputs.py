"""What a training run was made from, so that ``run`` can tell a model still up to date.

A run records its inputs in ``runs/<id>/inputs.json``: the digests of its train and eval
files, the part of its ``axolotl.yaml`` that changes the model (logging, evaluation and
save schedules, the hub repository do not), the base model's identity, the device class
and whether it merged. Two runs with the same fingerprint train the same model.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from overbrainer import files
from overbrainer.errors import UserError
from overbrainer.job.layout import EVAL_FILE, INPUTS_FILE, TRAIN_FILE
from overbrainer.train.axolotl import (
    FSDP_CONFIGS,
    RESUME_IGNORED,
    SHARDING_KEYS,
    TYPED_KEYS,
    is_local_path,
)

FORMAT = 1
WHOLE_FILE_LIMIT = 256 << 20
"""Files of a local base model up to this size are hashed whole; larger ones (weight
shards) by name, size and modification time, so that a big model costs no minutes."""
NOT_THE_MODEL = ("base_model", "resume_from_checkpoint")
"""axolotl.yaml keys recorded elsewhere (the model's identity) or not at all (a resumed run
trains the same model as one that was never stopped)."""


@dataclass(frozen=True)
class Inputs:
    """The inputs of a training run. ``parts``: digests and values by name; ``config``: the
    axolotl.yaml keys that change the model."""

    parts: Mapping[str, str]
    config: Mapping[str, Any]

    @property
    def fingerprint(self) -> str:
        canonical = json.dumps(
            {"parts": dict(self.parts), "config": dict(self.config)},
            sort_keys=True,
            separators=(",", ":"),
            default=str,
        )
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    def to_json(self) -> str:
        data = {
            "format": FORMAT,
            "fingerprint": self.fingerprint,
            "parts": dict(self.parts),
            "config": dict(self.config),
        }
        return json.dumps(data, indent=2, sort_keys=True, default=str) + "\n"

    @classmethod
    def read(cls, path: Path) -> Inputs | None:
        """The inputs recorded at ``path``; None when there are none or they are unreadable."""
        try:
            data = json.loads(files.read_text(path, path.name, files.RECORD_LIMIT) or "")
        except (UserError, ValueError):
            return None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            return None
        parts, config = data.get("parts"), data.get("config")
        if not isinstance(parts, dict) or not isinstance(config, dict):
            return None
        return cls({str(k): str(v) for k, v in parts.items()}, config)


def model_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The keys of an axolotl configuration that change the model trained."""
    return {
        key: value
        for key, value in config.items()
        if key not in NOT_THE_MODEL
        and not any(fnmatch.fnmatchcase(key, pattern) for pattern in RESUME_IGNORED)
    }


def inputs_of(
    config: Mapping[str, Any],
    data_dir: Path,
    base_model: str,
    *,
    device: str,
    merge: bool,
    processes: int | None = None,
    logits: Path | None = None,
    teacher: str | None = None,
) -> Inputs:
    """The inputs of a run training ``config`` on the data of ``data_dir``; ``processes``:
    the GPUs it trains on together (the batch is that many times larger), None: Axolotl's
    own launch (left out, so that a run made before ``gpus`` existed keeps its fingerprint);
    ``logits``: the logprobs.bin its examples take their rows from (``distill = "logits"``):
    the rows of those examples count, not the rest of the file; ``teacher``: the parent an
    online run asks (its engine and model), which teaches as the rows would."""
    parts = {
        TRAIN_FILE: _file_digest(data_dir / Path(TRAIN_FILE).name),
        EVAL_FILE: _file_digest(data_dir / Path(EVAL_FILE).name),
        "base_model": model_identity(base_model),
        "device": device,
        "merge": "yes" if merge else "no",
    }
    if processes is not None:
        parts["processes"] = str(processes)
    if logits is not None:
        from overbrainer.train.kd_data import rows_digest  # noqa: PLC0415 - numpy

        parts["logprobs"] = rows_digest(data_dir, logits)
    if teacher is not None:
        parts["teacher"] = teacher
    return Inputs(parts, model_config(config))


def model_identity(base_model: str) -> str:
    """A hub id as it is; a directory by its content (see ``WHOLE_FILE_LIMIT``)."""
    if not is_local_path(base_model):
        return f"hub:{base_model}"
    root = Path(base_model).expanduser()
    if not root.is_dir():
        return f"path:{base_model}"  # not on this machine: only its name is known
    digest = hashlib.sha256()
    for directory, dirs, names in os.walk(root):
        dirs.sort()
        for name in sorted(names):
            path = Path(directory) / name
            stat = path.stat()
            digest.update(f"{path.relative_to(root)}\0{stat.st_size}\0".encode())
            if stat.st_size <= WHOLE_FILE_LIMIT:
                digest.update(_file_digest(path).encode())
            else:
                digest.update(str(stat.st_mtime_ns).encode())
    return f"dir:{digest.hexdigest()}"


def _file_digest(path: Path) -> str:
    file = files.open_read(path, str(path))  # a FIFO among the inputs is refused, not waited on
    if file is None:
        return "none"
    with file:
        return hashlib.file_digest(file, "sha256").hexdigest()


def differences(before: Inputs, after: Inputs) -> list[str]:
    """What changed from ``before`` to ``after``, a line each; an axolotl.yaml key that
    ``[training]`` sets is named as the config names it (``epochs``, not ``num_epochs``),
    one set through ``axolotl_extra`` as Axolotl does."""
    lines = []
    for name in sorted({*before.parts, *after.parts}):
        line = _part_line(name, before.parts.get(name), after.parts.get(name))
        if line is not None:
            lines.append(line)
    sharding = _sharding(before.config), _sharding(after.config)
    if sharding[0] != sharding[1]:  # said as the target sets it, not as axolotl.yaml does
        lines.append(f"sharding: {sharding[0]} -> {sharding[1]}")
    distill = _distill(before.config), _distill(after.config)
    if distill[0] != distill[1]:  # its plugin, dataset type and kd_* keys come with it
        lines.append(f"distill: {distill[0]} -> {distill[1]}")
    changed = []
    for key in {*before.config, *after.config}:
        old, new = before.config.get(key), after.config.get(key)
        if old == new or (key in SHARDING_KEYS and sharding[0] != sharding[1]):
            continue
        if distill[0] != distill[1] and (key in DISTILL_KEYS or key.startswith("kd_")):
            continue
        name = TYPED_KEYS.get(key, KD_NAMES.get(key, key))
        changed.append(f"{name}: {_shown(old)} -> {_shown(new)}")
    return lines + sorted(changed)


def _part_line(name: str, old: str | None, new: str | None) -> str | None:
    """The line of a changed input that is not an axolotl.yaml key (None: unchanged, or
    said by the distill line)."""
    if old == new:
        return None
    if name == "processes":  # the GPUs trained on together; unset: Axolotl's own launch
        return f"gpus: {old or '(unset)'} -> {new or '(unset)'}"
    if name == "logprobs":  # with distill = "logits" alone, as the distill line says
        return "logprobs: the parent's logprobs of the examples changed" if old and new else None
    if name == "teacher":  # online alone, as the distill line says
        return f"teacher: {old} -> {new}" if old and new else None
    if name in ("device", "merge"):
        return f"{name}: {old} -> {new}"
    return f"{name}: changed"


KD_NAMES = {
    "kd_alpha": "kd.alpha",
    "kd_ce_alpha": "kd.ce_alpha",
    "kd_temperature": "kd.temperature",
    "kd_beta": "kd.beta",
    "kd_online_topk": "kd.top_k",
}
"""axolotl.yaml's KD keys, named as ``[training.kd]`` sets them."""
DISTILL_KEYS = ("plugins", "datasets", "test_datasets", "eval_sample_packing")
"""Keys ``distill`` (and its mode) changes with it (the KD plugin, the KD dataset type, the
packed evaluation of the online teacher)."""


def _distill(config: Mapping[str, Any]) -> str:
    if not config.get("kd_trainer"):
        return "text"
    return "logits (online)" if config.get("kd_online_topk") else "logits"


def _sharding(config: Mapping[str, Any]) -> str:
    """A run's sharding as its target's setting reads (``fsdp = "full_shard"``)."""
    deepspeed = config.get("deepspeed")
    if deepspeed:
        return f'deepspeed = "{PurePosixPath(str(deepspeed)).stem}"'
    fsdp = config.get("fsdp_config")
    if fsdp:
        for name, preset in FSDP_CONFIGS.items():
            if fsdp == dict(preset):
                return f'fsdp = "{name}"'
        return "fsdp (its own fsdp_config)"
    return "(none)"


def _shown(value: Any) -> str:
    if value is None:
        return "(unset)"
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def recorded(run_dir: Path, run_id: str) -> Inputs:
    """The inputs run ``run_id`` recorded, or a ``UserError`` saying it has none."""
    inputs = Inputs.read(run_dir / INPUTS_FILE)
    if inputs is None:
        raise UserError(f"run {run_id} has no record of its inputs ({INPUTS_FILE})")
    return inputs
