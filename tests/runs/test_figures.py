"""`runs ls` and `runs show`: duration, last losses, exports and compares, and `--json`."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

from tests.helpers.run_records import backdate, write_run
from tests.helpers.seeing_runs import START, write_metrics

RUN = "demo_20260922-143005"
CREATED = datetime.fromtimestamp(START - 100, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
"""100 s before the run's first metric; its last metric line comes at START + 60."""


def _trained(project_dir, run_id=RUN, created=CREATED):
    directory = write_run(project_dir, run_id, created)
    write_metrics(directory, range(0, 41), max_steps=40, evals=(20, 40))
    return directory


def _made(directory):
    (directory / "exports" / "20260922-150000").mkdir(parents=True)
    (directory / "exports" / "20260922-150000" / "export.json").write_text("{}")
    (directory / "compares" / "c1").mkdir(parents=True)
    (directory / "compares" / "c1" / "compare.json").write_text("{}")
    (directory / "compares" / "unfinished").mkdir()  # no compare.json: not one


def test_runs_ls_has_a_header_duration_losses_and_marks(run_cli, project_dir):
    _made(_trained(project_dir))
    write_run(project_dir, "demo_20260923-000000", "2026-09-23T00:00:00Z", "failed")
    result = run_cli("runs", "ls")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines() == [
        "RUN                   STATE      TARGET  CREATED               TOOK   LOSS    EVAL_LOSS"
        "  MADE",
        f"{RUN}  succeeded  gpu     {CREATED}  2m40s  2.6000  2.7000     exported compared",
        "demo_20260923-000000  failed     gpu     2026-09-23T00:00:00Z",
    ]


def test_runs_ls_json(run_cli, project_dir):
    directory = _trained(project_dir)
    _made(directory)
    write_run(
        project_dir,
        "demo_20260923-000000",
        "2026-09-23T00:00:00Z",
        "stopped",
        snapshot={"checkpoint": "output/checkpoint-7", "step": 7, "reason": "cost"},
    )
    (project_dir / "runs" / "demo_20260923-000000" / "target.note").write_text("pod deleted\n")
    result = run_cli("runs", "ls", "--json")
    assert result.exit_code == 0, result.stderr
    listed = json.loads(result.stdout)
    assert listed[1] == {
        "id": "demo_20260923-000000",
        "state": "stopped",
        "target": "gpu",
        "created": "2026-09-23T00:00:00Z",
        "snapshot": {"step": 7, "reason": "cost"},
        "note": "pod deleted",
        "duration_s": None,
        "loss": None,
        "eval_loss": None,
        "exports": 0,
        "compares": 0,
        "loss_kind": "ce",
    }
    assert listed[0]["id"] == RUN
    assert (listed[0]["loss"], listed[0]["eval_loss"]) == (2.6, 2.7)
    assert (listed[0]["exports"], listed[0]["compares"]) == (1, 1)
    assert listed[0]["duration_s"] == 160.0


def test_runs_ls_marks_the_losses_of_a_run_trained_on_logits(run_cli, project_dir):
    """Axolotl's KD trainer logs its weighted sum of KL and cross-entropy as `loss`: the
    listing says so, as `runs show` does, fresh and from its cache alike."""
    _trained(project_dir)
    kd = _trained(project_dir, "demo_20260923-000000", "2026-09-23T00:00:00Z")
    (kd / "axolotl.yaml").write_text("base_model: Qwen/Qwen3-0.6B\nkd_trainer: true\n")
    backdate(project_dir)  # settled: the first listing keeps its rows in the cache
    for _ in range(2):  # the second listing reads them from there
        result = run_cli("runs", "ls")
        assert result.exit_code == 0, result.stderr
        header, plain, distilled = result.stdout.splitlines()
        assert plain.endswith("  2.6000       2.7000")
        assert distilled.endswith("  2.6000 (KD)  2.7000 (KD)")
        assert header.index("EVAL_LOSS") == distilled.index("2.7000 (KD)")
        listed = json.loads(run_cli("runs", "ls", "--json").stdout)
        assert [run["loss_kind"] for run in listed] == ["ce", "kd"]
    assert len(json.loads((project_dir / "runs" / ".listing.json").read_text())["runs"]) == 2


def test_runs_ls_json_with_no_runs(run_cli):
    result = run_cli("runs", "ls", "--json")
    assert (result.exit_code, json.loads(result.stdout)) == (0, [])


def test_runs_ls_reads_only_the_tail_of_a_long_metrics_file(run_cli, project_dir):
    directory = _trained(project_dir)
    lines = (directory / "metrics.jsonl").read_text().splitlines()
    filler = [lines[2]] * 5000  # ~750 KiB of old log lines before the end
    (directory / "metrics.jsonl").write_text("\n".join(lines[:2] + filler + lines[2:]) + "\n")
    listed = json.loads(run_cli("runs", "ls", "--json").stdout)[0]
    assert (listed["loss"], listed["eval_loss"]) == (2.6, 2.7)


def test_runs_show_lists_exports_and_compares(run_cli, project_dir):
    _made(_trained(project_dir))
    result = run_cli("runs", "show", RUN)
    assert result.exit_code == 0, result.stderr
    assert f"  exports: runs/{RUN}/exports/20260922-150000" in result.stdout.splitlines()
    assert f"  compares: runs/{RUN}/compares/c1" in result.stdout.splitlines()


def test_runs_show_json(run_cli, project_dir):
    _made(_trained(project_dir))
    result = run_cli("runs", "show", "--json")
    assert result.exit_code == 0, result.stderr
    [shown] = json.loads(result.stdout)
    assert shown["record"]["id"] == RUN and shown["record"]["state"] == "succeeded"
    assert (shown["step"], shown["max_steps"], shown["loss"], shown["eval_loss"]) == (
        40,
        40,
        2.6,
        2.7,
    )
    assert shown["exports"] == ["20260922-150000"] and shown["compares"] == ["c1"]
    assert set(shown) == {
        "record",
        "duration_s",
        "step",
        "max_steps",
        "epoch",
        "loss",
        "eval_loss",
        "loss_kind",
        "kd_loss",
        "ce_loss",
        "eval_kd_loss",
        "eval_ce_loss",
        "exports",
        "compares",
        "machine",
    }
    assert shown["machine"] is None  # no sample of its machine
    assert shown["loss_kind"] == "ce"  # trained on the parent's text: cross-entropy
    assert shown["kd_loss"] is None and shown["eval_ce_loss"] is None  # it has no KD terms


def test_runs_show_json_hides_a_secret_in_the_record_s_message(run_cli, project_dir):
    write_run(
        project_dir, RUN, CREATED, "failed", message="upload refused: hf_abcdefghijklmnopqrstuv"
    )
    result = run_cli("runs", "show", "--json")
    assert "hf_abcdefghijklmnopqrstuv" not in result.stdout
    assert json.loads(result.stdout)[0]["record"]["message"] == "upload refused: ***"


def test_runs_ls_header_names_each_column_at_its_start(run_cli, project_dir):
    """Runs of different widths in every column: each header starts where its column's
    values start, on every row that has one (issue 43: TARGET and CREATED were off)."""
    _made(_trained(project_dir))
    write_run(project_dir, "demo_20260923-000000_7", "2026-09-23T00:00:00Z", "stopped",
              "a_much_longer_target",
              snapshot={"checkpoint": "output/checkpoint-7", "step": 7, "reason": "cost"})
    (project_dir / "runs" / "demo_20260923-000000_7" / "target.note").write_text("pod gone\n")
    write_run(project_dir, "demo_20260924-000000", "2026-09-24T00:00:00Z", "failed", "pc")
    listed = json.loads(run_cli("runs", "ls", "--json").stdout)
    result = run_cli("runs", "ls")
    assert result.exit_code == 0, result.stderr
    header, *rows = result.stdout.splitlines()
    starts = {m.group(): m.start() for m in re.finditer(r"\S+", header)}
    assert list(starts) == ["RUN", "STATE", "TARGET", "CREATED", "SNAPSHOT", "NOTE", "TOOK",
                            "LOSS", "EVAL_LOSS", "MADE"]
    assert len(rows) == len(listed) == 3
    for row, run in zip(rows, listed, strict=True):
        shown = {"RUN": run["id"], "STATE": run["state"], "TARGET": run["target"],
                 "CREATED": run["created"], "NOTE": run["note"]}
        if run["snapshot"]:
            shown["SNAPSHOT"] = f"step {run['snapshot']['step']} ({run['snapshot']['reason']})"
        if run["loss"] is not None:
            shown["LOSS"], shown["EVAL_LOSS"] = f"{run['loss']:.4f}", f"{run['eval_loss']:.4f}"
        if run["exports"]:
            shown["MADE"] = "exported"
        for column, value in shown.items():
            if value is not None:
                start = starts[column]
                assert row[start:].startswith(value), (column, row)
                assert start == 0 or row[start - 2:start] == "  ", (column, row)
        if run["duration_s"] is not None:
            assert row[starts["TOOK"] - 2:starts["TOOK"] + 1].startswith("  "), row
            assert row[starts["TOOK"]] != " ", row
