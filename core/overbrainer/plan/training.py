"""Training's cost before a machine is made: tokens per epoch x epochs and, on a target with
a price (``estimate_price``), GPU hours and dollars from a throughput table.

The table (:data:`THROUGHPUT`) gives rough training tokens per second of one GPU for a LoRA
of a model of a size (its billions of parameters, read from ``base_model``'s name) with
bf16 and sample packing; ``[plan] throughput`` replaces it for a GPU type. Tokens are the
characters of the conversations / 4: an estimate, said to be one.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from overbrainer import files
from overbrainer.config.model import Settings
from overbrainer.duration import duration
from overbrainer.errors import UserError
from overbrainer.hookcalls import Hooks
from overbrainer.job.spec import TargetPrice
from overbrainer.lines import read_lines
from overbrainer.model_size import model_billions
from overbrainer.pipeline.projection import (
    CHARS_PER_TOKEN,
    QUESTION_CHARS,
    StageWork,
    measured,
    prior,
)
from overbrainer.pipeline.records import ANSWERS, TRAIN, DataFiles
from overbrainer.plan.throughput import last_span
from overbrainer.project import Project

SIZES = (1, 3, 8, 14, 34, 72)
"""The model sizes of the table's columns, in billions of parameters (at most)."""

THROUGHPUT: dict[str, tuple[float, ...]] = {
    "RTX A5000": (8000, 3500, 1400, 750, 300, 140),
    "RTX 4090": (11000, 5000, 2000, 1100, 450, 200),
    "A40": (10000, 4500, 1800, 1000, 420, 190),
    "L40S": (15000, 7000, 2800, 1500, 650, 290),
    "A100": (20000, 9000, 3600, 2000, 850, 380),
    "H100": (32000, 15000, 6000, 3300, 1400, 620),
    "H200": (36000, 17000, 6800, 3700, 1600, 700),
}
"""Training tokens per second of one GPU, by GPU class and model size (``SIZES``)."""

CLASSES = (
    ("H200", "H200"), ("H100", "H100"), ("A100", "A100"), ("L40S", "L40S"), ("L40", "L40S"),
    ("A6000", "A40"), ("A40", "A40"), ("4090", "RTX 4090"), ("A5000", "RTX A5000"),
    ("3090", "RTX A5000"),
)  # fmt: skip
"""A GPU type's class: the first key in its name (``NVIDIA H100 80GB HBM3``)."""
DEFAULT_CLASS = "A40"
"""The class of a GPU type the table does not know."""
DEFAULT_SIZE = 8.0
"""The size assumed of a model whose name does not say it."""
ADAPTER_SPEED = {"lora": 1.0, "qlora": 0.7, "full": 0.4}
"""Throughput relative to a LoRA's."""

def gpu_class(gpu_type: str) -> str | None:
    """The table's class of ``gpu_type``: a key not followed by a digit (an A4000 is no A40)."""
    name = gpu_type.upper()
    return next((cls for key, cls in CLASSES if re.search(rf"{key}(?!\d)", name)), None)


def tokens_per_second(settings: Settings, price: TargetPrice) -> tuple[float, str]:
    """The throughput of the machine ``price`` describes, and where it comes from."""
    training = settings.training
    assert training is not None
    override = settings.plan.throughput.get(price.gpu_type)
    if override is not None:
        return override * price.gpu_count, "[plan] throughput"
    size = model_billions(training.base_model)
    cls = gpu_class(price.gpu_type)
    column = next(
        (i for i, most in enumerate(SIZES) if (size or DEFAULT_SIZE) <= most), len(SIZES) - 1
    )
    speed = THROUGHPUT[cls or DEFAULT_CLASS][column] * ADAPTER_SPEED[training.adapter]
    notes = ["the throughput table"]
    if size is None:
        notes.append(f"{DEFAULT_SIZE:g}B assumed")
    if cls is None:
        notes.append(f"{price.gpu_type} read as {DEFAULT_CLASS}")
    return speed * price.gpu_count, ", ".join(notes)


@dataclass(frozen=True)
class TrainingPlan:
    """Training's projection; ``usd`` None when the target's price could not be learnt."""

    target: str
    tokens_per_epoch: int
    epochs: int
    tokens_from: str
    price: TargetPrice | None
    gpu_hours: float | None
    usd: float | None
    basis: str
    """``assumed`` (the throughput's source follows), ``no price`` or why it is unknown."""
    hours: float | None = None
    """How long training takes on the target, priced or not (None: unknown)."""
    hours_basis: str = ""
    """Where ``hours`` comes from: a run of this project measured, or a guess."""

    @property
    def tokens(self) -> int:
        return self.tokens_per_epoch * self.epochs

    def as_json(self) -> dict[str, Any]:
        price = self.price
        return {
            "target": self.target,
            "tokens_per_epoch": self.tokens_per_epoch,
            "epochs": self.epochs,
            "tokens": self.tokens,
            "tokens_basis": "assumed",
            "tokens_from": self.tokens_from,
            "gpu_type": price.gpu_type if price else None,
            "gpu_count": price.gpu_count if price else None,
            "usd_per_hour": price.usd_per_hour if price else None,
            "gpu_hours": None if self.gpu_hours is None else round(self.gpu_hours, 4),
            "usd": None if self.usd is None else round(self.usd, 4),
            "basis": self.basis,
            "hours": None if self.hours is None else round(self.hours, 6),
            "hours_basis": self.hours_basis,
        }

    def time_text(self) -> str | None:
        """``about 1h02m of training (…)``, why it is not known, or None."""
        if self.hours is None:
            return self.hours_basis or None
        seconds = self.hours * 3600
        about = "under 1s" if seconds < 1 else f"about {duration(seconds)}"
        return f"{about} of training ({self.hours_basis})"


def estimate_training(
    project: Project, hook: Hooks, answers_left: int, target: str | None = None
) -> TrainingPlan | None:
    """Training on ``target`` (default ``training.target``), or None without ``[training]``.

    ``answers_left``: answers still to come; with some (or no ``train.jsonl`` yet) the
    tokens are projected from the answers, as ``split`` will make the train set.
    """
    settings = project.settings
    training = settings.training
    if training is None:
        return None
    name = target or training.target
    tokens, source = _tokens_per_epoch(project.dir, settings, answers_left)
    model = settings.targets.get(name)
    if model is None:
        raise UserError(f"unknown target `{name}`")
    try:
        price = hook.estimate_price(name=name, target=model, project=project)
    except UserError as error:
        return TrainingPlan(name, tokens, training.epochs, source, None, None, None,
                            f"unknown: {error.message}")  # fmt: skip
    if price is None:
        hours, how = unpriced_hours(project.dir, settings, name, tokens * training.epochs)
        return TrainingPlan(name, tokens, training.epochs, source, None, None, 0.0, "no price",
                            hours, how)  # fmt: skip
    speed, basis = tokens_per_second(settings, price)
    hours = tokens * training.epochs / speed / 3600
    return TrainingPlan(name, tokens, training.epochs, source, price, hours,
                        hours * price.usd_per_hour, f"assumed ({basis})", hours,
                        f"assumed: {basis}")  # fmt: skip


GUESS = (
    "a guess: the throughput table's {cls} figure for a {adapter} of a {size}; a first run "
    "on `{target}` measures it"
)


def unpriced_hours(
    project_dir: Path, settings: Settings, target: str, tokens: int
) -> tuple[float | None, str]:
    """Training's hours on a target with no price (this machine, an ssh host): at the
    throughput a run of this project measured on it, else at the table's figure for the
    model on a mid-range GPU (over the target's ``gpus``, scaling taken as linear),
    labelled as the guess it is; none for a target that trains on a CPU (the table is a
    GPU's: its figure would be hundreds of times too short)."""
    span = last_span(project_dir, target)
    if span is not None:
        run_tokens = _chars(span.train_file) // CHARS_PER_TOKEN
        if run_tokens > 0:
            speed = run_tokens * span.epochs / span.seconds
            return tokens / speed / 3600, (
                f"measured on run {span.run_id}: {speed:,.0f} tokens/s"
            )
    training = settings.training
    assert training is not None
    settings_of = settings.targets.get(target)
    if _trains_on_cpu(settings_of):
        return None, f"training time not guessed on a CPU; a first run on `{target}` measures it"
    speed, _ = tokens_per_second(settings, TargetPrice(0.0, DEFAULT_CLASS))
    gpus = getattr(settings_of, "gpus", None)
    if isinstance(gpus, int) and gpus > 1:
        speed *= gpus
    size = model_billions(training.base_model)
    shown = f"{size:g}B model" if size is not None else f"model ({DEFAULT_SIZE:g}B assumed)"
    cls = f"{gpus} x {DEFAULT_CLASS}" if isinstance(gpus, int) and gpus > 1 else DEFAULT_CLASS
    guess = GUESS.format(cls=cls, size=shown, adapter=training.adapter, target=target)
    return tokens / speed / 3600, guess


def _trains_on_cpu(target: object) -> bool:
    """Whether a target trains on a CPU as its settings say (``device = "cpu"``), or, for
    one on this machine left at ``auto``, for want of ``nvidia-smi``; not asked of a
    remote host (``plan`` reaches no machine)."""
    device = getattr(target, "device", None)
    if device == "cpu":
        return True
    return device == "auto" and getattr(target, "kind", None) == "local" and (
        shutil.which("nvidia-smi") is None
    )


def _tokens_per_epoch(project_dir: Path, settings: Settings, answers_left: int) -> tuple[int, str]:
    data = DataFiles(project_dir)
    train = data.path(TRAIN)
    if not answers_left and train.is_file():
        return _chars(train) // CHARS_PER_TOKEN, "data/train.jsonl"
    usable, chars = 0, 0
    answers = data.path(ANSWERS)
    if answers.is_file():
        for record in data.read(ANSWERS):
            if record["meta"].get("excluded") is None:
                usable += 1
                chars += _conversation_chars(record)
    examples = (usable + answers_left) * (1 - settings.pipeline.eval_ratio)
    samples = settings.roles.parent.samples
    kept = ""
    if samples > 1 and settings.pipeline.select == "judge":  # one answer a question trains
        examples /= samples
        kept = f", one in {samples} kept (select = judge)"
    if usable:
        more = f", {answers_left} more at their average" if answers_left else ""
        return int(examples * chars / usable) // CHARS_PER_TOKEN, (
            f"the lengths of {usable} answers{more}{kept}"
        )
    # No answer yet: an answer as long as the answers stage projects one, never max_tokens
    # (an upper bound: 50 times the usual answer where it is 32k).
    parent = settings.roles.parent
    each = measured(project_dir, "answers", parent.model) or prior(
        "answers", StageWork(1, QUESTION_CHARS, 2), parent
    )
    chars_each = QUESTION_CHARS + each.tokens_out * CHARS_PER_TOKEN
    return int(examples * chars_each) // CHARS_PER_TOKEN, (
        f"no answers yet: {each.tokens_out:.0f} tokens an answer, the answers stage's "
        f"{each.basis}, not max_tokens{kept}"
    )


def _chars(path: Path) -> int:
    shown = f"data/{path.name}"
    file = files.open_read(path, shown)  # a FIFO is refused, never waited on
    if file is None:
        return 0
    total = 0
    with file:
        for line in read_lines(file, shown):
            try:
                record = json.loads(line)
            except ValueError:
                continue
            total += _conversation_chars(record) if isinstance(record, dict) else 0
    return total


def _conversation_chars(record: dict[str, Any]) -> int:
    messages = record.get("messages")
    total = 0
    for message in messages if isinstance(messages, list) else []:
        if isinstance(message, dict):
            total += sum(
                len(message[key]) for key in ("content", "reasoning_content")
                if isinstance(message.get(key), str)
            )  # fmt: skip
    return total
