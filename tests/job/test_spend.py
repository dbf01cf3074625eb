"""``target.spend.json``: how a target reports what its machines cost, and how it is read."""

from __future__ import annotations

import json

import pytest

from overbrainer.job.spend import read_spend, run_spend
from overbrainer.plugin import layout
from overbrainer.plugin.files import MachineSpend, write_spend


def test_a_written_record_reads_back_and_sums(tmp_path):
    write_spend(tmp_path, [
        MachineSpend("training", usd_per_hour=1.8, spent_usd=0.5),
        MachineSpend("after-training", usd_per_hour=3.6, started=1000.0),
        MachineSpend("unpriced"),
    ])
    assert read_spend(tmp_path) == [
        MachineSpend("training", 1.8, None, 0.5),
        MachineSpend("after-training", 3.6, 1000.0, None),
        MachineSpend("unpriced"),
    ]
    assert run_spend(tmp_path, 1000.0 + 1800) == pytest.approx(0.5 + 1.8)
    assert run_spend(tmp_path, 500.0) == pytest.approx(0.5)  # a clock behind the start: 0


def test_it_stays_at_home(tmp_path):
    assert layout.TARGET_SPEND == "target.spend.json"
    assert layout.TARGET_SPEND in layout.HOME_ONLY


@pytest.mark.parametrize(
    ("fields", "key"),
    [
        ({"usd_per_hour": -1.0}, "usd_per_hour"),
        ({"spent_usd": float("nan")}, "spent_usd"),
        ({"started": float("inf")}, "started"),
        ({"spent_usd": True}, "spent_usd"),
        ({"usd_per_hour": "0.4"}, "usd_per_hour"),
    ],
)
def test_a_figure_that_is_no_amount_is_refused(fields, key):
    with pytest.raises(ValueError, match=rf"^MachineSpend\.{key} must be a finite number >= 0 "
                                         r"or None$"):
        MachineSpend("pod", **fields)


def test_entries_that_are_not_valid_are_left_out(tmp_path):
    (tmp_path / layout.TARGET_SPEND).write_text(json.dumps({"machines": [
        {"name": "good", "spent_usd": 2},
        {"name": "negative", "spent_usd": -2},
        {"spent_usd": 3},
        "pod",
        {"name": "text", "usd_per_hour": "1", "started": 0},
    ]}))
    assert read_spend(tmp_path) == [MachineSpend("good", spent_usd=2)]
    assert run_spend(tmp_path, 0.0) == 2


@pytest.mark.parametrize("text", ["{not json", "[]", '{"machines": 3}', "\xff"])
def test_a_record_that_is_not_one_reads_as_none(tmp_path, text):
    (tmp_path / layout.TARGET_SPEND).write_text(text, encoding="latin-1")
    assert read_spend(tmp_path) is None
    assert run_spend(tmp_path, 0.0) is None


def test_a_link_is_neither_followed_nor_written_through(tmp_path):
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text('{"machines": [{"name": "pod", "spent_usd": 9}]}')
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / layout.TARGET_SPEND).symlink_to(elsewhere)
    assert read_spend(run_dir) is None
    write_spend(run_dir, [MachineSpend("pod", spent_usd=1)])
    assert not (run_dir / layout.TARGET_SPEND).is_symlink()
    assert json.loads(elsewhere.read_text())["machines"][0]["spent_usd"] == 9
    assert run_spend(run_dir, 0.0) == 1
