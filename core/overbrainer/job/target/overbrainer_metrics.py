"""The Axolotl plugin overbrainer ships into each run: training metrics and snapshots.

Named in axolotl.yaml as ``plugins: [overbrainer_metrics.OverbrainerMetricsPlugin]`` with this
file's directory on ``PYTHONPATH``. Its trainer callback, on the main process only:

* appends JSON lines to ``$OVERBRAINER_METRICS`` (``time`` in Unix seconds): ``begin``
  (time, max_steps), ``log`` (time,
  step, epoch, max_steps and the loss, eval_loss, learning_rate, grad_norm the trainer logged,
  with Axolotl's KD trainer the two parts of its loss, ``kd_loss`` and ``ce_loss`` (and
  ``eval_kd_loss``, ``eval_ce_loss``: see :class:`KDLossParts`), non-finite numbers as
  null), ``eval`` (time, step, total: evaluation progress, the first
  batch at once, then at each tenth of the batches, at the last, and every 2 s between) and
  ``end`` (time, step); each line goes out in one write, so a reader never sees half of one;
* turns ``$OVERBRAINER_SNAPSHOT`` (a file holding a reason word) into "save a checkpoint at the
  end of this step, then stop", and once the checkpoint is saved writes ``snapshot.json``
  beside the request: ``{"checkpoint": "output/checkpoint-<step>", "step", "time",
  "reason"}``. A request at the last step changes nothing: the run ends as it would have;
* keeps SIGTERM blocked in a trainer the job's runner started shielded from it (TERM ignored
  and blocked: the runner turns a TERM into a snapshot request), on every process: what the
  trainer starts (torch's DataLoader workers) inherits the mask, so a TERM sent to every
  process of the job (a scheduler's stop) reaches none of them.

Its plugin also seeds Python, NumPy and torch with the configuration's ``seed`` before the
model loads, so that a LoRA adapter's initial weights follow the run's seed.

This file travels alone to the target, so it imports nothing of overbrainer, and it imports
neither Axolotl, transformers nor torch unless they are there: without them the plugin and its
callback are plain objects any trainer-like driver can call.
"""

from __future__ import annotations

import json
import math
import os
import signal
import sys
import time
from typing import Any

try:
    from axolotl.integrations.base import BasePlugin
except ImportError:  # driven by something other than Axolotl

    class BasePlugin:  # type: ignore[no-redef]
        """What Axolotl's plugin manager calls, doing nothing."""

        def register(self, cfg: Any) -> None:
            return None

        def pre_model_load(self, cfg: Any) -> None:
            return None

        def add_callbacks_pre_trainer(self, cfg: Any, model: Any) -> list[Any]:
            return []

        def add_callbacks_post_trainer(self, cfg: Any, trainer: Any) -> list[Any]:
            return []

        def post_trainer_create(self, cfg: Any, trainer: Any) -> None:
            return None


try:
    from transformers import TrainerCallback
except ImportError:  # driven by something other than the transformers Trainer

    class TrainerCallback:  # type: ignore[no-redef]
        """The events the transformers Trainer sends a callback, each doing nothing."""

        def _ignore(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            return None

        on_init_end = on_train_begin = on_train_end = _ignore
        on_epoch_begin = on_epoch_end = on_step_begin = on_substep_end = on_step_end = _ignore
        on_pre_optimizer_step = on_optimizer_step = on_evaluate = on_predict = _ignore
        on_save = on_log = on_prediction_step = on_push_begin = _ignore


METRICS_ENV = "OVERBRAINER_METRICS"
SNAPSHOT_ENV = "OVERBRAINER_SNAPSHOT"
SNAPSHOT_FILE = "snapshot.json"
REASONS = ("requested", "deadline", "cost", "disk")
LOGGED = (
    "loss", "eval_loss", "learning_rate", "grad_norm",
    "kd_loss", "ce_loss", "eval_kd_loss", "eval_ce_loss",
)
TERM_ROWS = 256
"""Token rows per chunk when the KD loss's terms are computed again (see kd_terms)."""
EVAL_INTERVAL = 2.0
"""Seconds between two ``eval`` progress lines."""


def unix_time() -> float:
    """The time of a metrics line: Unix seconds, as the reference tool writes it, so either
    tool reads the other's ``metrics.jsonl``."""
    return round(time.time(), 3)


def now() -> str:
    """The current UTC time as run records write it: ``2026-09-22T14:30:05Z``."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def number(value: Any) -> float | int | None:
    """``value`` as a JSON number; NaN, infinities and non-numbers become None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def read_reason(request: str) -> str:
    """The reason word of the snapshot request file ``request``; empty or unknown: requested."""
    try:
        with open(request, encoding="utf-8", errors="replace") as file:
            word = file.read(256).strip()
    except OSError:
        return "requested"
    return word if word in REASONS else "requested"


def write_atomically(path: str, text: str) -> None:
    """Write ``text`` to ``path`` through a synced temporary file, so a reader sees all or none."""
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as file:
        file.write(text)
        file.flush()
        os.fsync(file.fileno())
    os.replace(tmp, path)
    try:
        directory = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(directory)
    except OSError:
        pass
    finally:
        os.close(directory)


def _distributed() -> Any:
    """``torch.distributed`` when the trainer initialised it; never imports torch itself."""
    torch = sys.modules.get("torch")
    dist = getattr(torch, "distributed", None)
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    return dist


class OverbrainerMetricsCallback(TrainerCallback):
    """Writes ``metrics.jsonl`` lines and stops the run with a snapshot when asked."""

    def __init__(self, metrics: str | None, snapshot_request: str | None) -> None:
        self.metrics = metrics
        self.snapshot_request = snapshot_request
        self.snapshot_pending = False
        self.snapshot_step: int | None = None
        self._eval_batches = 0
        self._eval_written_at: float | None = None
        self._eval_written = 0
        self._warned = False

    @classmethod
    def from_env(cls) -> OverbrainerMetricsCallback:
        return cls(os.environ.get(METRICS_ENV) or None, os.environ.get(SNAPSHOT_ENV) or None)

    # metrics

    def emit(self, event: str, **fields: Any) -> None:
        """Append one ``event`` line; a failure is reported once and never stops training."""
        if self.metrics is None:
            return
        record = {"event": event, "time": unix_time(), **fields}
        line = json.dumps(record, allow_nan=False) + "\n"
        data = line.encode("utf-8")
        try:
            fd = os.open(self.metrics, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                written = os.write(fd, data)
                while written < len(data):  # a regular file takes it all at once in practice
                    written += os.write(fd, data[written:])
            finally:
                os.close(fd)
        except OSError as error:
            if not self._warned:
                self._warned = True
                print(f"overbrainer_metrics: cannot write {self.metrics}: {error}", file=sys.stderr)

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        hold_term()
        if _main(state):
            self.emit("begin", max_steps=state.max_steps)

    def on_epoch_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        hold_term()  # before the epoch's DataLoader starts its workers

    def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
        if not _main(state):
            return
        logs = logs or {}
        fields = {key: number(logs[key]) for key in LOGGED if key in logs}
        self.emit(
            "log", step=state.global_step, epoch=number(state.epoch), max_steps=state.max_steps,
            **fields,
        )

    def on_prediction_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if not _main(state):
            return
        self._eval_batches += 1
        batches, clock = self._eval_batches, time.monotonic()
        loader = kwargs.get("eval_dataloader")
        try:
            total = len(loader) if loader is not None else None
        except TypeError:
            total = None
        # A short evaluation ends within EVAL_INTERVAL: its tenths and its end still show.
        share = total is not None and total > 0 and (
            batches >= total or batches * 10 // total > self._eval_written * 10 // total
        )
        due = self._eval_written_at is None or clock - self._eval_written_at >= EVAL_INTERVAL
        if due or share:
            self._eval_written_at, self._eval_written = clock, batches
            self.emit("eval", step=batches, total=total)

    def on_evaluate(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._eval_batches = self._eval_written = 0
        self._eval_written_at = None

    on_predict = on_evaluate

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if _main(state):
            self.emit("end", step=state.global_step)

    # snapshots

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        hold_term()  # before an evaluation starts its DataLoader's workers
        if self.snapshot_request is None or self.snapshot_pending:
            return None
        requested = _main(state) and os.path.exists(self.snapshot_request)
        dist = _distributed()
        if dist is not None:
            # Every rank takes part in a save, so every rank must learn of the request.
            box = [requested]
            dist.broadcast_object_list(box, src=0)
            requested = bool(box[0])
        if not requested or state.global_step >= state.max_steps or control.should_training_stop:
            return None
        self.snapshot_pending = True
        control.should_save = True
        control.should_training_stop = True
        return control

    def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        # The loop ends the epoch early after a snapshot, and an epoch save strategy would
        # save the same step a second time.
        if self.snapshot_step is not None and self.snapshot_step == state.global_step:
            control.should_save = False
            return control
        return None

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if not self.snapshot_pending:
            return
        self.snapshot_pending = False
        self.snapshot_step = state.global_step
        if not _main(state) or self.snapshot_request is None:
            return
        snapshot = {
            "checkpoint": f"output/checkpoint-{state.global_step}",
            "step": state.global_step,
            "time": now(),
            "reason": read_reason(self.snapshot_request),
        }
        path = os.path.join(os.path.dirname(self.snapshot_request), SNAPSHOT_FILE)
        write_atomically(path, json.dumps(snapshot) + "\n")


def _started_shielded() -> bool:
    """Whether this process started with SIGTERM ignored or blocked, as the runner starts a
    stage (Axolotl imports this module before it prepares the data)."""
    if not hasattr(signal, "pthread_sigmask"):
        return False
    blocked = signal.SIGTERM in signal.pthread_sigmask(signal.SIG_BLOCK, ())
    return blocked or signal.getsignal(signal.SIGTERM) == signal.SIG_IGN


SHIELDED = _started_shielded()


def hold_term() -> None:
    """Block SIGTERM again in this thread, when the process started shielded from it.

    Python's resource tracker unblocks TERM in the thread that starts one (the datasets
    library's worker pools do, while the data is prepared), and a DataLoader worker forked
    after that installs a TERM handler of its own: a scheduler's TERM to every process of
    the job would kill it and fail the trainer.
    """
    if SHIELDED:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})


def seeded(seed: int) -> None:
    """Seed Python's, NumPy's and torch's generators, as the transformers Trainer does."""
    try:
        from transformers import set_seed
    except ImportError:
        return
    set_seed(seed)


class KDLossParts:
    """Logs the two terms of Axolotl 0.19's KD loss beside the ``loss`` they make up.

    Its fused loss (``axolotl/integrations/kd/kernels/liger.py``) sums the KL to the parent's
    top-k and the cross-entropy on the parent's tokens inside the kernel and returns only
    ``kd_alpha × T² × KL + kd_ce_alpha × CE``. Installed on the KD trainer, this calls that loss
    unchanged (what is optimised is untouched), and on the micro-batches of a step that will be
    logged, and on every evaluation batch, computes both terms again without gradients from
    the same hidden states with Axolotl's own per-chunk function: the LM head once more over
    those tokens, no forward pass. Each is divided as the trainer divides its loss, and logged
    as ``kd_loss`` (T² × KL) and ``ce_loss`` (``eval_kd_loss``, ``eval_ce_loss``), so the step
    logged has ``loss = kd_alpha × kd_loss + kd_ce_alpha × ce_loss`` (with ``logging_steps``
    1: above it, ``loss`` is the mean since the last log and the terms the logged step's;
    with several processes, the terms are of the main process's batches).
    """

    def __init__(self, trainer: Any) -> None:
        self.trainer = trainer
        self.loss_fn = trainer._kd_loss_fn
        self.compute_loss = trainer.compute_loss
        self.log = trainer.log
        self.collecting: str | None = None
        """``train`` or ``eval`` while a batch whose terms are wanted is computed."""
        self.divisor = 1.0
        self.weight = 1.0
        self.train_step: int | None = None
        self.failed = False
        """Set once the terms could not be computed (an Axolotl this was not written for)."""
        self.sums: dict[str, list[float]] = {"train": [0.0, 0.0, 0.0], "eval": [0.0, 0.0, 0.0]}
        """KD term, cross-entropy and weight (batches or examples) summed since the last log."""

    def install(self) -> None:
        self.trainer._kd_loss_fn = self.kd_loss
        self.trainer.compute_loss = self.wrapped_compute_loss
        self.trainer.log = self.wrapped_log

    def wrapped_compute_loss(
        self, model: Any, inputs: Any, return_outputs: bool = False, num_items_in_batch: Any = None
    ) -> Any:
        labels = inputs.get("labels")
        if model.training:
            step = self.trainer.state.global_step + 1
            if step != self.train_step:
                self.train_step, self.sums["train"] = step, [0.0, 0.0, 0.0]
            self.collecting = "train" if self.logged(step) else None
            self.weight = 1.0
        else:
            self.collecting = "eval"  # eval_loss is the mean over examples of each batch's loss
            self.weight = float(labels.shape[0]) if labels is not None else 1.0
        # The KD trainer's own divisor: the labels of the whole accumulated batch, or these.
        items = num_items_in_batch
        if items is None and labels is not None:
            items = (labels != -100).sum().item()
        self.divisor = float(items) if items is not None and items > 0 else 1.0
        try:
            return self.compute_loss(
                model, inputs, return_outputs=return_outputs, num_items_in_batch=num_items_in_batch
            )
        finally:
            self.collecting = None

    def logged(self, step: int) -> bool:
        """Whether the trainer logs at the end of ``step`` (DefaultFlowCallback's rule)."""
        args, state = self.trainer.args, self.trainer.state
        strategy = getattr(args.logging_strategy, "value", args.logging_strategy)
        if strategy == "no":
            return False
        if strategy != "steps":  # "epoch": the step's terms are kept until the step after
            return True
        every = int(state.logging_steps or 0)
        return (every > 0 and step % every == 0) or (step == 1 and bool(args.logging_first_step))

    def kd_loss(self, *tensors: Any, true_labels: Any, student_bias: Any = None) -> Any:
        """The trainer's loss, as Axolotl calls it: (LM head weight, hidden states, top-k ids,
        logprobs, mask), the labels and a bias."""
        loss = self.loss_fn(*tensors, true_labels=true_labels, student_bias=student_bias)
        if self.collecting is not None and not self.failed:
            try:
                kd, ce = kd_terms(self.loss_fn, tensors, true_labels, student_bias)
            except Exception as error:  # noqa: BLE001 - seeing the terms must never end a run
                self.failed = True
                print(
                    f"overbrainer: the KD loss's two terms cannot be logged ({error!r}); "
                    "training goes on, with the loss alone",
                    file=sys.stderr,
                )
                return loss
            sums = self.sums[self.collecting]
            sums[0] += kd / self.divisor * self.weight
            sums[1] += ce / self.divisor * self.weight
            sums[2] += self.weight
        return loss

    def wrapped_log(self, logs: dict[str, Any], start_time: Any = None) -> Any:
        train, evaluation = self.sums["train"], self.sums["eval"]
        if "loss" in logs and train[2] and self.train_step == self.trainer.state.global_step:
            logs["kd_loss"], logs["ce_loss"] = train[0], train[1]
            self.sums["train"] = [0.0, 0.0, 0.0]
        if "eval_loss" in logs and evaluation[2]:
            logs["eval_kd_loss"] = evaluation[0] / evaluation[2]
            logs["eval_ce_loss"] = evaluation[1] / evaluation[2]
            self.sums["eval"] = [0.0, 0.0, 0.0]
        return self.log(logs, start_time)


def kd_terms(
    loss_fn: Any, tensors: tuple[Any, ...], true_labels: Any, student_bias: Any
) -> tuple[float, float]:
    """The KD term (T² × the summed divergence) and the summed cross-entropy of one batch, as
    ``loss_fn`` (Axolotl's ``LigerFusedLinearKLTopKLogprobLoss``) computes them, chunk by chunk
    with the same label shift, but without gradients and whatever their weights."""
    import torch
    from axolotl.integrations.kd.kernels.liger import (  # noqa: PLC0415 - as torch: only here
        LigerFusedLinearKLTopKLogprobFunction as Kernel,
    )

    lm_head_weight, hidden_states, target_token_ids, target_logprobs, target_mask = tensors
    with torch.no_grad():
        labels = torch.nn.functional.pad(true_labels, (0, 1), value=loss_fn.ignore_index)
        flat = [
            hidden_states.reshape(-1, hidden_states.shape[-1]),
            target_token_ids.reshape(-1, target_token_ids.shape[-1]),
            target_logprobs.reshape(-1, target_logprobs.shape[-1]),
            target_mask.reshape(-1, target_mask.shape[-1]),
            labels[:, 1:].contiguous().view(-1),
        ]
        # Smaller chunks than the kernel's: eager, uncompiled, its logits would peak higher
        # (a 152k vocabulary is 1.2 GB a copy at 2,048 rows); float64 sums, the same result.
        chunks = max(1, -(-flat[0].shape[0] // TERM_ROWS))
        kd = ce = torch.zeros((), dtype=torch.float64, device=hidden_states.device)
        for rows, ids, logprobs, mask, target in zip(
            *(torch.chunk(tensor, chunks, dim=0) for tensor in flat), strict=True
        ):
            soft, hard = Kernel._compute_loss_kl_topk(
                student_input_chunk=rows, student_weight=lm_head_weight,
                target_token_ids_chunk=ids, target_logprobs_chunk=logprobs,
                target_mask_chunk=mask, target_chunk=target, student_bias=student_bias,
                distillation_loss_fn=Kernel.distillation_loss_fn,
                ignore_index=loss_fn.ignore_index, weight_hard_loss=1.0, weight_soft_loss=1.0,
                compute_ce_loss=True, temperature=loss_fn.temperature, beta=loss_fn.beta,
                normalize_topk=loss_fn.normalize_topk,
            )
            kd = kd + soft.double()
            ce = ce + hard.double()
    return kd.item() * loss_fn.temperature**2, ce.item()


def _main(state: Any) -> bool:
    return bool(getattr(state, "is_world_process_zero", True))


class OverbrainerMetricsPlugin(BasePlugin):
    """The Axolotl plugin: seeds the model's initialisation and adds
    :class:`OverbrainerMetricsCallback` to the trainer."""

    def pre_model_load(self, cfg: Any) -> None:
        # The trainer seeds itself once it exists, after the model and its adapter are made:
        # without this, a LoRA adapter's initial weights would not follow the run's seed.
        hold_term()
        seed = cfg.get("seed") if hasattr(cfg, "get") else None
        if isinstance(seed, int) and not isinstance(seed, bool):
            seeded(seed)

    def add_callbacks_post_trainer(self, cfg: Any, trainer: Any) -> list[Any]:
        # Added after the trainer's own callbacks, so the snapshot decision at a step's end
        # comes after DefaultFlowCallback's and is not overwritten.
        return [OverbrainerMetricsCallback.from_env()]

    def post_trainer_create(self, cfg: Any, trainer: Any) -> None:
        # Axolotl's KD trainer logs its weighted sum alone: log its two terms beside it.
        if getattr(trainer, "_kd_loss_fn", None) is not None:
            KDLossParts(trainer).install()
