"""The loss chart as a PNG (matplotlib, Agg backend): train loss as a line, eval loss as
points, the learning rate on a second axis, snapshot and resume points marked.

The same curves give the same bytes: no timestamp or software metadata is written.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from overbrainer.charts.series import Curves
from overbrainer.errors import UserError
from overbrainer.replace import replace_file

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

WIDTH_PX, HEIGHT_PX, DPI = 1000, 600, 100
LOSS_COLOURS = ("#1f77b4", "#ff7f0e", "#8c564b", "#17becf")
"""Train loss of the first, second, … run drawn."""
EVAL_COLOURS = ("#d62728", "#9467bd", "#e377c2", "#7f7f7f")
LR_COLOUR = "#2ca02c"
MARK_COLOUR = "#555555"
NEEDS_MATPLOTLIB = "--plot needs matplotlib: pip install 'overbrainer[plot]'"


def render_png(runs: Sequence[Curves]) -> bytes:
    """The chart of ``runs`` (drawn in order, a resumed run after its parent) as PNG bytes."""
    figure = draw(runs)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
    return buffer.getvalue()


def loss_name(runs: Sequence[Curves]) -> str:
    """What the losses drawn are: a KD run's are the KD trainer's weighted sum, not a
    cross-entropy, named ``loss (KD)`` as ``runs ls`` and ``runs show`` name it ("KD loss"
    is the sum's KL term alone); runs of both kinds each get their mark instead."""
    kinds = {run.kd for run in runs}
    return "loss (KD)" if kinds == {True} else "loss"


def draw(runs: Sequence[Curves]) -> Figure:
    """The chart of ``runs`` as a matplotlib figure (with its Agg canvas)."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise UserError(NEEDS_MATPLOTLIB) from None

    name = loss_name(runs)
    figure = Figure(figsize=(WIDTH_PX / DPI, HEIGHT_PX / DPI), dpi=DPI)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    rates = axes.twinx() if any(run.learning_rate for run in runs) else None
    for index, run in enumerate(runs):
        colour = LOSS_COLOURS[index % len(LOSS_COLOURS)]
        kd = " (KD)" if run.kd and name == "loss" else ""
        label = f"{run.run_id}{kd}" if len(runs) > 1 else f"train {name}"
        if run.loss:
            steps, values = zip(*run.loss, strict=True)
            axes.plot(steps, values, color=colour, linewidth=1.6, label=label, zorder=3)
        if run.eval_loss:
            steps, values = zip(*run.eval_loss, strict=True)
            axes.scatter(
                steps,
                values,
                color=EVAL_COLOURS[index % len(EVAL_COLOURS)],
                s=28,
                zorder=4,
                label=f"eval {name}" if len(runs) == 1 else f"{run.run_id}{kd} eval",
            )
        if rates is not None and run.learning_rate:
            steps, values = zip(*run.learning_rate, strict=True)
            rates.plot(
                steps,
                values,
                color=LR_COLOUR,
                linewidth=1.0,
                linestyle="--",
                alpha=0.6,
                label="learning rate" if index == 0 else None,
            )
        _mark(axes, run)
    ends = [run.max_steps or run.step or 0 for run in runs]
    axes.set_xlim(0, max(max(ends, default=0), 1))
    axes.set_xlabel("step")
    axes.set_ylabel(name)
    axes.grid(True, alpha=0.3)
    if rates is not None:
        rates.set_ylabel("learning rate", color=LR_COLOUR)
        rates.tick_params(axis="y", colors=LR_COLOUR)
        rates.set_ylim(bottom=0)
    axes.set_title(" → ".join(run.run_id for run in runs))
    handles, labels = axes.get_legend_handles_labels()
    if rates is not None:
        more_handles, more_labels = rates.get_legend_handles_labels()
        handles, labels = handles + more_handles, labels + more_labels
    if handles:
        axes.legend(handles, labels, loc="upper right", fontsize="small")
    figure.tight_layout()
    return figure


def write_png(runs: Sequence[Curves], path: Path) -> None:
    """Write the chart of ``runs`` to ``path`` atomically."""
    data = render_png(runs)
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_file(path, lambda file: file.write(data))


def _mark(axes: Axes, run: Curves) -> None:
    """Vertical lines at the run's snapshot and at the step it resumed from."""
    if run.snapshot_step is not None:
        axes.axvline(run.snapshot_step, color=MARK_COLOUR, linestyle=":", linewidth=1.2)
        axes.annotate(
            f"snapshot {run.snapshot_step}",
            (run.snapshot_step, 1.0),
            xycoords=("data", "axes fraction"),
            fontsize="small",
            color=MARK_COLOUR,
            xytext=(3, -12),
            textcoords="offset points",
        )
    if run.resume_step is not None:
        axes.axvline(run.resume_step, color=MARK_COLOUR, linestyle="--", linewidth=1.2)
        axes.annotate(
            f"resumed from {run.resumed_from}",
            (run.resume_step, 0.0),
            xycoords=("data", "axes fraction"),
            fontsize="small",
            color=MARK_COLOUR,
            xytext=(3, 4),
            textcoords="offset points",
        )
