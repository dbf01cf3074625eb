"""Curves drawn with Braille characters, for ``runs show`` and the TUI: no dependency, and
the same text for the same curves."""

from __future__ import annotations

from collections.abc import Sequence

from overbrainer.charts.series import Point

_DOTS = ((0x01, 0x08), (0x02, 0x10), (0x04, 0x20), (0x40, 0x80))
"""The Braille bit of the dot at (row, column) of a 4x2 cell."""
EVAL_MARK = "•"


def braille_chart(
    lines: Sequence[Sequence[Point]],
    points: Sequence[Point] = (),
    *,
    width: int = 60,
    height: int = 10,
    x_max: int | None = None,
    x_min: int = 0,
) -> list[str]:
    """Rows of a chart ``width`` x ``height`` characters (plus a label margin): each of
    ``lines`` as a Braille line, ``points`` as ``•``. x runs from ``x_min`` (a resumed run's
    first step: its curve fills the chart) to ``x_max`` (else the last step seen), y over
    the values drawn."""
    values = [value for line in lines for _, value in line] + [value for _, value in points]
    if not values:
        return []
    low, high = min(values), max(values)
    if high == low:
        low, high = low - 0.5, high + 0.5
    steps = [step for line in lines for step, _ in line] + [step for step, _ in points]
    right = max(x_max or 0, *steps, x_min + 1)
    cols, rows = width * 2, height * 4
    cells = [[0] * width for _ in range(height)]
    marks: dict[tuple[int, int], str] = {}

    def pixel(point: Point) -> tuple[int, int]:
        step, value = point
        x = round((step - x_min) / (right - x_min) * (cols - 1))
        y = round((high - value) / (high - low) * (rows - 1))
        return min(max(x, 0), cols - 1), min(max(y, 0), rows - 1)

    def dot(x: int, y: int) -> None:
        cells[y // 4][x // 2] |= _DOTS[y % 4][x % 2]

    for line in lines:
        previous: tuple[int, int] | None = None
        for point in line:
            x, y = pixel(point)
            if previous is None:
                dot(x, y)
            else:
                for px, py in _segment(previous, (x, y)):
                    dot(px, py)
            previous = (x, y)
    for point in points:
        x, y = pixel(point)
        marks[(y // 4, x // 2)] = EVAL_MARK
    top, bottom = f"{high:.4g}", f"{low:.4g}"
    margin = max(len(top), len(bottom))
    out = []
    for index, row in enumerate(cells):
        label = top if index == 0 else bottom if index == height - 1 else ""
        text = "".join(
            marks.get((index, column), chr(0x2800 + bits) if bits else " ")
            for column, bits in enumerate(row)
        )
        out.append(f"{label:>{margin}} ┤{text}")
    axis = f"{'':>{margin}} └{'─' * width}"
    start, end = str(x_min), str(right)
    out.append(axis)
    out.append(f"{'':>{margin}}  {start}{end:>{width - len(start)}}")
    return out


def sparkline(values: Sequence[float], width: int = 40) -> str:
    """``values`` (the last ``width``, else averaged into ``width`` buckets) as ▁▂▃▄▅▆▇█."""
    if not values:
        return ""
    if len(values) > width:
        size = len(values) / width
        values = [
            sum(chunk) / len(chunk)
            for chunk in (
                values[int(i * size) : max(int((i + 1) * size), int(i * size) + 1)]
                for i in range(width)
            )
        ]
    low, high = min(values), max(values)
    bars = "▁▂▃▄▅▆▇█"
    if high == low:
        return bars[0] * len(values)
    return "".join(bars[round((v - low) / (high - low) * (len(bars) - 1))] for v in values)


def _segment(start: tuple[int, int], end: tuple[int, int]) -> list[tuple[int, int]]:
    """The pixels of the straight line from ``start`` to ``end`` (Bresenham)."""
    (x0, y0), (x1, y1) = start, end
    dx, dy = abs(x1 - x0), -abs(y1 - y0)
    sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
    error = dx + dy
    out = []
    while True:
        out.append((x0, y0))
        if (x0, y0) == (x1, y1):
            return out
        double = 2 * error
        if double >= dy:
            error += dy
            x0 += sx
        if double <= dx:
            error += dx
            y0 += sy


def progress_line(
    step: int | None, total: int | None, elapsed: float | None, width: int = 30
) -> str:
    """``step N/M ━━━━──── P%  ETA T`` (the ETA from the pace so far), or ``step N``."""
    if step is None:
        return "no step yet"
    if not total:
        return f"step {step}"
    share = min(step / total, 1.0)
    done = round(share * width)
    line = f"step {step}/{total} {'━' * done}{'─' * (width - done)} {int(share * 100)}%"
    if elapsed and step and step < total:
        left = elapsed / step * (total - step)
        line += f"  ETA {_short(left)}"
    return line


def _short(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
