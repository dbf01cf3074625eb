"""``runs show``: a run's record, the settings that shape the model, its outcome, snapshot,
timings and curves, read from its directory alone."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from loguru import logger

from overbrainer import files
from overbrainer.charts.png import write_png
from overbrainer.charts.series import Curves, metrics_path, read_curves
from overbrainer.charts.terminal import braille_chart, sparkline
from overbrainer.errors import UserError
from overbrainer.job.layout import CONFIG_FILE, METRICS_FILE
from overbrainer.job.metrics import read_events
from overbrainer.job.record import RunRecord
from overbrainer.project import RUNS_DIR
from overbrainer.redact import escape_controls, redact
from overbrainer.runs.figures import figures_of, made_of, trained_on_logits
from overbrainer.runs.listing import run_line
from overbrainer.runs.machine import machine_lines, read_machine
from overbrainer.runs.store import RunStore

SETTINGS = (
    ("base_model", "base_model"),
    ("adapter", "adapter"),
    ("lora_r", "lora_r"),
    ("num_epochs", "epochs"),
    ("learning_rate", "learning_rate"),
    ("lr_scheduler", "lr_scheduler"),
    ("micro_batch_size", "micro_batch_size"),
    ("gradient_accumulation_steps", "gradient_accumulation_steps"),
    ("sequence_len", "sequence_len"),
    ("sample_packing", "sample_packing"),
    ("kd_alpha", "kd.alpha"),
    ("kd_ce_alpha", "kd.ce_alpha"),
    ("kd_temperature", "kd.temperature"),
    ("kd_beta", "kd.beta"),
)
"""axolotl.yaml keys shown, and the name ``[training]`` gives each."""


def curves_of(store: RunStore, record: RunRecord) -> Curves | None:
    """The curves of ``record`` with its snapshot and resume point filled in."""
    curves = read_curves(store.run_dir(record.id), record.id)
    if curves is None:
        return None
    if record.snapshot is not None:
        curves.snapshot_step = record.snapshot.step
    if record.resumed_from:
        curves.resumed_from = record.resumed_from
        curves.resume_step = _parent_step(store, record.resumed_from)
        if curves.resume_step is None and curves.loss:
            curves.resume_step = curves.loss[0][0]
    return curves


def show_lines(store: RunStore, record: RunRecord, width: int = 60) -> Iterator[str]:
    """The text of ``runs show`` for one run."""
    run_dir = store.run_dir(record.id)
    yield run_line(record, len(record.id))
    config = _config(run_dir)
    settings = _settings(config)
    if settings:
        yield "  settings: " + ", ".join(f"{name} {value}" for name, value in settings)
    curves = curves_of(store, record)
    logged = curves is not None and curves.has_loss
    meaning = loss_meaning(config, terms=curves.has_kd_terms if logged and curves else None)
    if meaning:
        yield f"  loss: {meaning}"
    if record.resumed_from:
        yield f"  resumed from: {escape_controls(record.resumed_from)}"
    yield "  outcome: " + _outcome(record, curves)
    if record.snapshot is not None:
        yield (
            f"  snapshot: step {record.snapshot.step} ({record.snapshot.reason}) in "
            f"{escape_controls(record.snapshot.checkpoint)}"
        )
    timings = _timings(run_dir)
    if timings:
        yield "  timings: " + ", ".join(timings)
    for kind, ids in made_of(str(run_dir)).items():
        if ids:
            where = [f"{RUNS_DIR}/{record.id}" + ("" if i == "." else f"/{kind}/{i}") for i in ids]
            yield escape_controls(f"  {kind}: {', '.join(where)}")
    machine = read_machine(run_dir)
    if machine is not None:
        yield from machine_lines(machine)
    if curves is None:
        yield f"runs: no {METRICS_FILE} for run {record.id} yet"
        return
    # A KD run's two terms are charted under its loss: taller, so that the loss keeps its rows.
    height = 16 if curves.has_kd_terms else 10
    yield from curve_lines(curves, width, height, kd=bool(config.get("kd_trainer")))


def show_json(store: RunStore, record: RunRecord) -> dict[str, Any]:
    """``runs show --json`` of one run (keys in ``cli.runs.show``'s help)."""
    run_dir = str(store.run_dir(record.id))
    curves = curves_of(store, record) or Curves(record.id)
    data = record.to_json()
    if data.get("message"):  # an error may quote what a server said
        data["message"] = redact(data["message"])
    return {
        "record": data,
        "duration_s": figures_of(run_dir, record.created).to_json()["duration_s"],
        "step": curves.step,
        "max_steps": curves.max_steps,
        "epoch": curves.epoch,
        "loss": curves.last("loss"),
        "eval_loss": curves.last("eval_loss"),
        "loss_kind": "kd" if trained_on_logits(store.run_dir(record.id)) else "ce",
        **{name: curves.last(name) for name in KD_TERMS},
        **made_of(run_dir),
        "machine": _machine_json(store.run_dir(record.id)),
    }


def _machine_json(run_dir: Path) -> dict[str, Any] | None:
    """The run's latest machine sample as ``machine.json``'s fields, None without one."""
    sample = read_machine(run_dir)
    return None if sample is None else asdict(sample)


def curve_lines(
    curves: Curves, width: int = 60, height: int = 10, *, kd: bool = False
) -> Iterator[str]:
    """The last figures, a Braille chart of the losses (``height`` rows and 2 of axis), and
    sparklines of lr and grad_norm; ``kd``: the losses are the KD trainer's, and say so. A KD
    run that logged its two terms gets their charts side by side under the loss's, within
    the same ``height``."""
    last = []
    if curves.step is not None:
        last.append(
            f"step {curves.step}/{curves.max_steps}" if curves.max_steps else f"step {curves.step}"
        )
    if curves.epoch is not None:
        last.append(f"epoch {curves.epoch:.2f}")
    terms = curves.has_kd_terms
    for name in ("loss", "eval_loss"):
        value = curves.last(name)
        if value is not None:
            last.append(f"{name} {value:.4f}")
    if last:
        yield "  last: " + ", ".join(last)
    if terms:
        yield "  " + kd_terms_line(curves)
    if not curves.has_loss:
        yield f"runs: run {curves.run_id} has no loss to plot"
        return
    # The terms' line and charts take their rows from the loss chart's; too few: the line only.
    terms_height = max(height // 3, 2) if terms else 0
    if height - terms_height - 4 < 3:
        terms_height = 0
    loss_height = height - terms_height - 4 if terms_height else max(height - terms, 2)
    heading = "loss (KD)" if kd else "loss"  # the sum; "KD loss" is its KL term
    yield f"  {heading} (line: train, {'•'}: eval) against step"
    # A resumed run's steps start where its parent stopped: its axis starts there too.
    first = min(step for step, _ in [*curves.loss, *curves.eval_loss])
    x_min = min(curves.resume_step or first, first) if curves.resumed_from else 0
    for row in braille_chart(
        [curves.loss],
        curves.eval_loss,
        width=width,
        height=loss_height,
        x_max=curves.max_steps,
        x_min=x_min,
    ):
        yield "  " + row
    if terms_height:
        yield from kd_terms_charts(curves, width, terms_height, x_min)
    for name, label in (("learning_rate", "lr"), ("grad_norm", "grad_norm")):
        points: list[tuple[int, float]] = getattr(curves, name)
        if points:
            values = [value for _, value in points]
            yield (f"  {label:<9} {sparkline(values, width)}  {min(values):.3g}..{max(values):.3g}")


KD_TERMS = ("kd_loss", "ce_loss", "eval_kd_loss", "eval_ce_loss")
"""The two terms of a KD run's loss and of its eval loss, as its metrics name them."""


def kd_terms_line(curves: Curves) -> str:
    """The last KD loss and cross-entropy, train and eval, of a KD run that logged them."""
    parts = []
    for prefix, kd_name, ce_name in (("", "kd_loss", "ce_loss"),
                                     ("eval ", "eval_kd_loss", "eval_ce_loss")):
        kd, ce = curves.last(kd_name), curves.last(ce_name)
        if kd is not None and ce is not None:
            parts.append(f"{prefix}KD loss {kd:.4f}, {prefix}cross-entropy {ce:.4f}")
    return "terms: " + "; ".join(parts)


def kd_terms_charts(curves: Curves, width: int, height: int, x_min: int) -> Iterator[str]:
    """The KD loss and the cross-entropy of a KD run, each a Braille chart (line: train,
    ``•``: eval) ``height`` rows high, side by side in ``width`` columns."""
    half = max((width - 12) // 2, 8)
    charts = [
        braille_chart([line], points, width=half, height=height, x_max=curves.max_steps,
                      x_min=x_min)
        for line, points in ((curves.kd_loss, curves.eval_kd_loss),
                             (curves.ce_loss, curves.eval_ce_loss))
    ]
    left_width = max((len(row) for row in charts[0]), default=0)
    yield f"  {'KD loss':<{left_width}}   cross-entropy"
    for index in range(max(len(chart) for chart in charts)):
        left, right = (chart[index] if index < len(chart) else "" for chart in charts)
        yield f"  {left:<{left_width}}   {right}".rstrip()


def _outcome(record: RunRecord, curves: Curves | None) -> str:
    text = record.state.value
    if record.message:
        text += f": {escape_controls(record.message)}"
    if curves is not None and len(curves.eval_loss) > 1:
        first, final = curves.eval_loss[0][1], curves.eval_loss[-1][1]
        text += f"; eval_loss {first:.4f} → {final:.4f}"
    return text


def _config(run_dir: Path) -> dict[str, Any]:
    """The run's ``axolotl.yaml``; empty when it is missing or unreadable."""
    import yaml

    try:
        config = yaml.safe_load(files.read_text(run_dir / CONFIG_FILE, CONFIG_FILE) or "")
    except (UserError, yaml.YAMLError):
        return {}
    return config if isinstance(config, dict) else {}


def loss_meaning(config: dict[str, Any], *, terms: bool | None = None) -> str | None:
    """What the logged loss is for a run trained on the parent's logits, else None.

    Axolotl 0.19's KD trainer logs one ``loss``, the weighted sum of its KD loss (the KL to
    the parent's top-k) and the cross-entropy on the parent's tokens: the line names the
    weights, so a reader does not take the sum for a cross-entropy. ``terms``: the run logged
    the two apart (overbrainer's plugin does from this version; older runs did not), None
    while it has logged no loss yet."""
    if not config.get("kd_trainer"):
        return None
    alpha, ce_alpha = config.get("kd_alpha"), config.get("kd_ce_alpha")
    temperature, beta = config.get("kd_temperature"), config.get("kd_beta")
    # Axolotl's loss: beta 0 the forward KL, 1 the reverse, between them a generalised JSD.
    kl = "KL to the parent's top-k"
    if beta == 1:
        kl = "reverse KL to the parent's top-k"
    elif isinstance(beta, int | float) and not isinstance(beta, bool) and beta:
        kl = f"JSD (beta {beta}) with the parent's top-k"
    if temperature is not None:
        kl += f" at temperature {temperature}"
    meaning = (
        f"loss = {alpha} × KD loss + {ce_alpha} × cross-entropy; KD loss: {kl} "
        "(scaled by its square)"
    )
    if terms is False:
        meaning += "; this run logged only the sum, not its parts"
    return escape_controls(meaning)


def _settings(config: dict[str, Any]) -> list[tuple[str, str]]:
    shown = []
    for key, name in SETTINGS:
        value = config.get(key)
        if value is None or (key == "lora_r" and not config.get("adapter")):
            continue
        shown.append((name, escape_controls(str(value))))
    return shown


def _timings(run_dir: Path) -> list[str]:
    """Seconds each stage of the job took, and the whole job, from the metrics times."""
    stages: list[tuple[str, float]] = []
    last: float | None = None
    try:
        source = files.open_read(metrics_path(run_dir), "metrics.jsonl")
        if source is None:
            return []
        with source:
            for event in read_events(source, "metrics.jsonl"):
                when = event.get("time")
                if not isinstance(when, int | float) or isinstance(when, bool):
                    continue
                last = float(when)
                if event["event"] == "stage" and isinstance(event.get("name"), str):
                    stages.append((escape_controls(event["name"]), last))
    except (OSError, UserError):
        return []
    if not stages or last is None:
        return []
    out = []
    for index, (name, start) in enumerate(stages):
        end = stages[index + 1][1] if index + 1 < len(stages) else last
        if end > start or index + 1 < len(stages):
            out.append(f"{name} {_duration(end - start)}")
    out.append(f"total {_duration(last - stages[0][1])}")
    return out


def _duration(seconds: float) -> str:
    seconds = max(seconds, 0.0)
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {rest:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def _parent_step(store: RunStore, parent_id: str) -> int | None:
    try:
        parent = store.load(parent_id)
    except UserError:
        return None
    return parent.snapshot.step if parent.snapshot is not None else None


def chain(store: RunStore, records: list[RunRecord]) -> list[Curves]:
    """The curves of ``records`` in drawing order: a run resumed from another one shown is
    drawn after it, as its continuation."""
    order = sorted(records, key=lambda record: _depth(record, {r.id: r for r in records}))
    out = []
    for record in order:
        curves = curves_of(store, record)
        if curves is not None:
            out.append(curves)
    return out


def _depth(record: RunRecord, shown: dict[str, Any]) -> int:
    depth, seen = 0, {record.id}
    while record.resumed_from in shown and record.resumed_from not in seen:
        record = shown[record.resumed_from]
        seen.add(record.id)
        depth += 1
    return depth


CHART_FILE = "loss.png"


def write_run_chart(store: RunStore, record: RunRecord) -> Path | None:
    """Draw ``runs/<id>/loss.png`` at the end of a training (a resumed run continues its
    parent's curves); None when there is no loss to draw or no matplotlib. Never raises
    for a chart: the training's outcome matters more."""
    try:
        records = [record]
        parent = record.resumed_from
        while parent and len(records) < 20 and parent not in {r.id for r in records}:
            try:
                records.insert(0, store.load(parent))
            except UserError:
                break
            parent = records[0].resumed_from
        drawn = [curves for curves in chain(store, records) if curves.has_loss]
        if not drawn or drawn[-1].run_id != record.id:
            return None
        path = store.run_dir(record.id) / CHART_FILE
        write_png(drawn, path)
    except UserError as error:
        logger.info(f"no loss chart for run {record.id}: {error}")
        return None
    except Exception as error:  # noqa: BLE001 - a chart never fails a training
        logger.warning(f"cannot draw the loss chart of run {record.id}: {error}")
        return None
    return path
