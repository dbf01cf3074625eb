"""`runs show`: the text of a run and its PNG loss chart, drawn from known metrics."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest
from PIL import Image
from tests.helpers.seeing_runs import add_kd_terms, v_shaped_loss, write_metrics, write_run

from overbrainer.charts.png import EVAL_COLOURS, LOSS_COLOURS
from overbrainer.charts.series import read_curves

RUN = "demo_20260922-143005"
CHILD = "demo_20260922-153005"


def colour(hex_colour: str) -> tuple[int, int, int]:
    return tuple(int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))  # type: ignore[return-value]


def pixels_of(image: Image.Image, hex_colour: str, tolerance: int = 40) -> dict[int, float]:
    """Mean row of the pixels near ``hex_colour``, by column."""
    want = colour(hex_colour)
    rgb = image.convert("RGB")
    width, height = rgb.size
    data = rgb.load()
    rows: dict[int, list[int]] = {}
    for x in range(width):
        for y in range(height):
            if x > 690 and y < 110:
                continue  # the legend, top right
            pixel = data[x, y]
            if sum(abs(a - b) for a, b in zip(pixel, want, strict=True)) <= tolerance:
                rows.setdefault(x, []).append(y)
    return {x: sum(ys) / len(ys) for x, ys in rows.items()}


def test_the_png_is_1000x600_and_its_curve_falls_where_the_loss_does(run_cli, project_dir):
    directory = write_run(project_dir, RUN)
    write_metrics(directory, range(1, 101), evals=(25, 50, 75, 100))
    result = run_cli("runs", "show", RUN, "--plot")
    assert result.exit_code == 0, result.stderr
    path = directory / "loss.png"
    assert result.stdout.splitlines()[-1] == f"runs: loss chart written to {path}"
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert 10_000 < len(data) < 500_000
    image = Image.open(io.BytesIO(data))
    assert image.size == (1000, 600)
    line = pixels_of(image, LOSS_COLOURS[0])
    columns = sorted(line)
    assert len(columns) > 300
    left, right = columns[0], columns[-1]
    middle = (left + right) // 2

    def height_at(x: int) -> float:
        near = [line[c] for c in columns if abs(c - x) <= 3]
        return sum(near) / len(near)

    quarter = (right - left) // 4
    # Image rows grow downwards: a falling loss is a growing row.
    assert height_at(left + 5) < height_at(left + quarter) < height_at(middle - 5)
    assert height_at(middle + 5) > height_at(middle + quarter) > height_at(right - 5)
    # The minimum of the data (step 50) is the lowest point of the line.
    lowest = max(columns, key=lambda c: line[c])
    assert abs(lowest - middle) < (right - left) * 0.05
    assert len(pixels_of(image, EVAL_COLOURS[0], tolerance=20)) > 20


def test_the_same_metrics_give_the_same_bytes(run_cli, project_dir, tmp_path):
    directory = write_run(project_dir, RUN)
    write_metrics(directory, range(1, 41))
    first, second = tmp_path / "a.png", tmp_path / "b.png"
    assert run_cli("runs", "show", RUN, "--plot", str(first)).exit_code == 0
    assert run_cli("runs", "show", RUN, "--plot", str(second)).exit_code == 0
    assert first.read_bytes() == second.read_bytes()
    assert b"tIME" not in first.read_bytes() and b"Software" not in first.read_bytes()


def test_runs_show_prints_record_settings_outcome_snapshot_timings_and_curves(run_cli, project_dir):
    directory = write_run(
        project_dir,
        RUN,
        "stopped",
        snapshot={"checkpoint": "output/checkpoint-60", "step": 60, "reason": "deadline"},
    )
    (directory / "axolotl.yaml").write_text(
        "base_model: Qwen/Qwen3-0.6B\nadapter: lora\nlora_r: 16\nnum_epochs: 3\n"
        "learning_rate: 0.0002\nmicro_batch_size: 2\n"
    )
    write_metrics(directory, range(1, 61), evals=(30, 60))
    result = run_cli("runs", "show", RUN)
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"{RUN}  stopped    local  2026-09-22T14:30:05Z  step 60")
    assert lines[1] == (
        "  settings: base_model Qwen/Qwen3-0.6B, adapter lora, lora_r 16, epochs 3, "
        "learning_rate 0.0002, micro_batch_size 2"
    )
    assert lines[2] == "  outcome: stopped; eval_loss 3.3000 → 2.4000"
    assert lines[3] == "  snapshot: step 60 (deadline) in output/checkpoint-60"
    assert lines[4] == "  timings: train 1 min 20 s, total 1 min 20 s"
    assert lines[5] == "  last: step 60/100, epoch 0.60, loss 2.3000, eval_loss 2.4000"
    chart = "\n".join(lines[6:])
    assert "•" in chart and "⠀" not in chart.replace("⠀", "")
    assert any(0x2801 <= ord(ch) <= 0x28FF for ch in chart)
    assert lines[-2].startswith("  lr        ▇") or lines[-2].startswith("  lr        █")
    assert lines[-1].startswith("  grad_norm ")
    assert result.stderr == ""
    assert json.loads(run_cli("runs", "show", RUN, "--json").stdout)[0]["loss_kind"] == "ce"


def test_runs_show_of_a_kd_run_says_its_loss_is_the_kd_trainers_sum(run_cli, project_dir):
    # Axolotl 0.19's KD trainer logs one loss, alpha × KL + ce_alpha × CE, never its parts.
    directory = write_run(project_dir, RUN)
    (directory / "axolotl.yaml").write_text(
        "base_model: Qwen/Qwen3-0.6B\nplugins: [overbrainer_metrics.OverbrainerMetricsPlugin, "
        "axolotl.integrations.kd.KDPlugin]\nkd_trainer: true\nkd_alpha: 0.9\n"
        "kd_ce_alpha: 0.1\nkd_temperature: 1.0\nkd_beta: 0.0\n"
    )
    write_metrics(directory, range(1, 61), evals=(30, 60))
    result = run_cli("runs", "show", RUN)
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[1] == (
        "  settings: base_model Qwen/Qwen3-0.6B, kd.alpha 0.9, kd.ce_alpha 0.1, "
        "kd.temperature 1.0, kd.beta 0.0"
    )
    assert lines[2] == (
        "  loss: loss = 0.9 × KD loss + 0.1 × cross-entropy; KD loss: KL to the parent's top-k "
        "at temperature 1.0 (scaled by its square); this run logged only the sum, not its parts"
    )
    last = next(line for line in lines if line.startswith("  last: "))
    assert ", loss " in last and ", eval_loss " in last and "kd_" not in last
    # The chart is of the sum: "KD loss" names its KL term alone, never the sum.
    assert "  loss (KD) (line: train, •: eval) against step" in lines
    assert not any(line.strip().startswith("KD loss") for line in lines)
    shown = json.loads(run_cli("runs", "show", RUN, "--json").stdout)
    assert shown[0]["loss_kind"] == "kd"


KD_YAML = (
    "base_model: Qwen/Qwen3-0.6B\nplugins: [overbrainer_metrics.OverbrainerMetricsPlugin, "
    "axolotl.integrations.kd.KDPlugin]\nkd_trainer: true\nkd_alpha: 0.9\n"
    "kd_ce_alpha: 0.1\nkd_temperature: 1.0\nkd_beta: 0.0\n"
)


def test_runs_show_of_a_kd_run_charts_its_kd_loss_beside_its_cross_entropy(run_cli, project_dir):
    directory = write_run(project_dir, RUN)
    (directory / "axolotl.yaml").write_text(KD_YAML)
    write_metrics(directory, range(1, 61), evals=(30, 60))
    last = add_kd_terms(directory)
    result = run_cli("runs", "show", RUN)
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[2] == (
        "  loss: loss = 0.9 × KD loss + 0.1 × cross-entropy; KD loss: KL to the parent's top-k "
        "at temperature 1.0 (scaled by its square)"
    )
    at = lines.index(next(line for line in lines if line.startswith("  last: ")))
    assert ", loss " in lines[at] and ", eval_loss " in lines[at] and "kd_" not in lines[at]
    assert lines[at + 1] == (
        f"  terms: KD loss {last['kd_loss']:.4f}, cross-entropy {last['ce_loss']:.4f}; "
        f"eval KD loss {last['eval_kd_loss']:.4f}, eval cross-entropy {last['eval_ce_loss']:.4f}"
    )
    assert lines[at + 2] == "  loss (KD) (line: train, •: eval) against step"
    # The two terms, each its own chart, side by side: two y axes on each row.
    heading = next(i for i, line in enumerate(lines) if line.strip().startswith("KD loss "))
    assert lines[heading].split() == ["KD", "loss", "cross-entropy"]
    rows = lines[heading + 1 : heading + 6]
    assert all(row.count("┤") == 2 for row in rows), rows
    assert all(any(0x2801 <= ord(ch) <= 0x28FF for ch in row.split("┤")[2]) for row in rows)
    assert lines[-2].startswith("  lr ") and lines[-1].startswith("  grad_norm ")
    [shown] = json.loads(run_cli("runs", "show", RUN, "--json").stdout)
    assert shown["loss_kind"] == "kd"
    assert {name: shown[name] for name in last} == last


def test_runs_show_without_plot_does_not_import_matplotlib(project_dir):
    directory = write_run(project_dir, RUN)
    write_metrics(directory, range(1, 11))
    code = (
        "import sys; from overbrainer.cli import cli\n"
        f"try: cli(['-C', {str(project_dir)!r}, 'runs', 'show', {RUN!r}])\n"
        "except SystemExit: pass\n"
        "print('matplotlib' in sys.modules, file=sys.stderr)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stderr.strip().splitlines()[-1] == "False", done.stderr
    assert f"{RUN}  succeeded" in done.stdout


def test_runs_show_a_b_draws_a_resumed_run_after_its_parent(run_cli, project_dir):
    parent = write_run(
        project_dir,
        RUN,
        "stopped",
        snapshot={"checkpoint": "output/checkpoint-50", "step": 50, "reason": "requested"},
    )
    write_metrics(parent, range(1, 51))
    child = write_run(project_dir, CHILD, resumed_from=RUN)
    write_metrics(child, range(51, 101))
    out = project_dir / "both.png"
    # Given child first: the parent is drawn first all the same.
    result = run_cli("runs", "show", CHILD, RUN, "--plot", str(out))
    assert result.exit_code == 0, result.stderr
    assert f"  resumed from: {RUN}" in result.stdout
    image = Image.open(out)
    first = pixels_of(image, LOSS_COLOURS[0])
    second = pixels_of(image, LOSS_COLOURS[1])
    first_cols = list(first)
    second_cols = list(second)
    assert first_cols and second_cols
    # The parent fills the left half, the child continues on the right.
    assert max(first_cols) < min(second_cols) + 10
    assert min(second_cols) > (min(first_cols) + max(second_cols)) / 2 - 20


def test_runs_show_messages(run_cli, project_dir):
    write_run(project_dir, RUN)
    result = run_cli("runs", "show", RUN, "--plot")
    assert result.exit_code == 1
    assert f"runs: no metrics.jsonl for run {RUN} yet" in result.stdout
    assert result.stderr == f"error: runs: no metrics.jsonl for run {RUN} yet\n"
    directory = project_dir / "runs" / RUN
    (directory / "metrics.jsonl").write_text(
        json.dumps({"event": "begin", "time": 1.0, "max_steps": 10}) + "\n"
    )
    result = run_cli("runs", "show", RUN, "--plot")
    assert result.exit_code == 1
    assert result.stderr == f"error: runs: run {RUN} has no loss to plot\n"
    result = run_cli("runs", "show", "nope_20260922-143005")
    assert result.exit_code == 1
    assert result.stderr == "error: no run nope_20260922-143005 in runs/\n"


def test_plot_without_matplotlib_says_how_to_install_it(run_cli, project_dir, monkeypatch):
    directory = write_run(project_dir, RUN)
    write_metrics(directory, range(1, 11))
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    monkeypatch.setitem(sys.modules, "matplotlib.backends.backend_agg", None)
    result = run_cli("runs", "show", RUN, "--plot")
    assert result.exit_code == 1
    assert result.stderr == ("error: --plot needs matplotlib: pip install 'overbrainer[plot]'\n")
    assert not (directory / "loss.png").exists()


@pytest.mark.parametrize("step", [1, 100])
def test_known_loss_values(step):
    assert v_shaped_loss(50) == pytest.approx(2.0)
    assert v_shaped_loss(step) > 2.0


def test_a_remote_run_is_charted_from_what_its_follower_saw(run_cli, project_dir):
    directory = write_run(project_dir, RUN, "running")
    write_metrics(directory, range(1, 31))
    (directory / "metrics.jsonl").rename(directory / "metrics.followed.jsonl")
    result = run_cli("runs", "show", RUN)
    assert result.exit_code == 0, result.stderr
    assert "  last: step 30/100, epoch 0.30, loss 3.2000" in result.stdout.splitlines()
    assert run_cli("runs", "show", RUN, "--plot").exit_code == 0
    assert (directory / "loss.png").is_file()


def test_progress_line():
    from overbrainer.charts.terminal import progress_line

    assert progress_line(60, 100, 120.0, width=10) == "step 60/100 ━━━━━━──── 60%  ETA 1 min"
    assert progress_line(100, 100, 120.0, width=10) == "step 100/100 ━━━━━━━━━━ 100%"
    assert progress_line(7, None, 3.0) == "step 7"
    assert progress_line(None, 10, None) == "no step yet"


def test_a_resumed_run_s_terminal_chart_starts_at_its_first_step(run_cli, project_dir):
    """Its steps continue its parent's (51..100): drawn from 0 the curve would take the right
    half only; from its first step it fills the chart's width."""
    write_run(
        project_dir,
        RUN,
        "stopped",
        snapshot={"checkpoint": "output/checkpoint-50", "step": 50, "reason": "requested"},
    )
    child = write_run(project_dir, CHILD, resumed_from=RUN)
    write_metrics(child, range(51, 101))
    result = run_cli("runs", "show", CHILD)
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    axis = next(i for i, line in enumerate(lines) if "└" in line)
    rows = [line.split("┤", 1)[1] for line in lines[:axis] if "┤" in line]
    width = len(rows[0])
    drawn = {i for row in rows for i, cell in enumerate(row) if cell != " "}
    assert min(drawn) <= 1  # step 51 of an axis from 50 to 100
    assert max(drawn) == width - 1
    assert lines[axis + 1].split() == ["50", "100"]


KD_CONFIG = "base_model: Qwen/Qwen3-0.6B\nkd_trainer: true\nkd_alpha: 0.9\nkd_ce_alpha: 0.1\n"


def legend_and_axis(project_dir, *run_ids):
    """The loss axis's label and the legend's entries of the chart of ``run_ids``."""
    from overbrainer.charts.png import draw

    runs = [read_curves(project_dir / "runs" / run_id, run_id) for run_id in run_ids]
    axes = draw(runs).axes[0]
    return axes.get_ylabel(), [text.get_text() for text in axes.get_legend().get_texts()]


def test_the_png_of_a_kd_run_names_its_loss_the_kd_trainers_sum(run_cli, project_dir):
    directory = write_run(project_dir, RUN)
    (directory / "axolotl.yaml").write_text(KD_CONFIG)
    write_metrics(directory, range(1, 41), evals=(20, 40))
    assert run_cli("runs", "show", RUN, "--plot").exit_code == 0
    assert (directory / "loss.png").is_file()
    assert legend_and_axis(project_dir, RUN) == (
        "loss (KD)", ["train loss (KD)", "eval loss (KD)", "learning rate"])


def test_the_png_of_a_kd_run_beside_a_plain_one_marks_the_kd_run(project_dir):
    write_metrics(write_run(project_dir, RUN), range(1, 41), evals=(40,))
    kd = write_run(project_dir, CHILD)
    (kd / "axolotl.yaml").write_text(KD_CONFIG)
    write_metrics(kd, range(1, 41), evals=(40,))
    assert legend_and_axis(project_dir, RUN) == (
        "loss", ["train loss", "eval loss", "learning rate"])
    assert legend_and_axis(project_dir, RUN, CHILD) == ("loss", [
        RUN, f"{RUN} eval", f"{CHILD} (KD)", f"{CHILD} (KD) eval", "learning rate"])
