"""A Runpod target's price in ``plan`` (``estimate_price``, from the fake Runpod's GPU list)
and the budget's refusal of a training before any pod is made."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.helpers.fake_runpod import GPU_TYPES, FakeRunpod
from tests.helpers.run_dirs import write_examples

from overbrainer.plan.training import THROUGHPUT

TRAINING = """
[training]
target = "gpu"
base_model = "Qwen/Qwen3-0.6B"
adapter = "lora"
epochs = 3

[targets.gpu]
kind = "runpod"
gpu_types = {gpu_types}
max_hours = 1
"""


@pytest.fixture
def project(project_dir: Path, fake_runpod: FakeRunpod) -> Path:
    write_examples(project_dir / "data" / "train.jsonl", range(10))
    write_examples(project_dir / "data" / "eval.jsonl", range(10, 12))
    configure(project_dir)
    return project_dir


def configure(project_dir: Path, gpu_types: str = '["NVIDIA A40"]', extra: str = "") -> None:
    text = (project_dir / "overbrainer.toml").read_text(encoding="utf-8").split("\n[training]")[0]
    training = TRAINING.format(gpu_types=gpu_types)
    (project_dir / "overbrainer.toml").write_text(text + training + extra, encoding="utf-8")


def training_plan(run_cli) -> dict:
    result = run_cli("plan", "--json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)["training"]


def test_plan_prices_the_pod_from_runpod_s_gpu_list(project, run_cli, fake_runpod):
    found = training_plan(run_cli)
    assert (found["gpu_type"], found["usd_per_hour"], found["gpu_count"]) == ("NVIDIA A40", 0.44, 1)
    speed = THROUGHPUT["A40"][0]  # a 0.6B model: the first column
    hours = found["tokens"] / speed / 3600
    assert found["gpu_hours"] == pytest.approx(hours, abs=1e-4)
    assert found["usd"] == pytest.approx(hours * 0.44, abs=1e-4)
    assert found["basis"] == "assumed (the throughput table)"
    assert fake_runpod.pods == {} and "create" not in fake_runpod.calls


def test_the_first_type_in_stock_and_auto_s_cheapest(project, run_cli, fake_runpod):
    fake_runpod.stock = {"NVIDIA A40": "None"}
    configure(project, '["NVIDIA A40", "NVIDIA L40S"]')
    assert training_plan(run_cli)["gpu_type"] == "NVIDIA L40S"
    configure(project, '"auto"')
    found = training_plan(run_cli)
    assert (found["gpu_type"], found["usd_per_hour"]) == ("NVIDIA RTX A5000", 0.27)


def test_the_throughput_override_and_the_table_line(project, run_cli):
    configure(project, extra='\n[plan]\nthroughput = { "NVIDIA A40" = 1.0 }\n')
    found = training_plan(run_cli)
    assert found["gpu_hours"] == pytest.approx(found["tokens"] / 3600, abs=1e-4)
    assert found["basis"] == "assumed ([plan] throughput)"
    line = next(x for x in run_cli("plan").stdout.splitlines() if x.startswith("training"))
    assert f"; {found['gpu_hours']:.2f} GPU hours of NVIDIA A40 at $0.44/h: $" in line


def test_training_past_the_budget_is_refused_before_a_pod_is_made(project, run_cli, fake_runpod):
    # One token a second: hours of an A40 for this small train set.
    configure(project, extra='\n[plan]\nthroughput = { "NVIDIA A40" = 1.0 }\n'
              "\n[budget]\nmax_usd = 0.01\n")
    result = run_cli("train")
    assert result.exit_code == 1
    # From data/train.jsonl, as it is now (plan projects the answers still to come).
    chars = sum(
        len(m["content"]) + len(m.get("reasoning_content", ""))
        for line in (project / "data" / "train.jsonl").read_text().splitlines()
        for m in json.loads(line)["messages"]
    )
    hours = chars // 4 * 3 / 3600
    assert result.stderr.endswith(
        f"error: budget: training on `gpu` would cost about ${hours * 0.44:.4f} "
        f"({hours:.2f} GPU hours of NVIDIA A40 at $0.44/h), more than the "
        "$0.0100 left of max_usd $0.0100 ($0.0000 spent); no machine was created: train on a "
        "cheaper target or fewer epochs, or raise the budget ([budget] max_usd in "
        "overbrainer.toml, or `overbrainer run --max-usd`)\n"
    )
    assert fake_runpod.pods == {} and fake_runpod.deleted == {}
    assert "create" not in fake_runpod.calls
    assert not (project / "runs").exists() or not any((project / "runs").iterdir())


def test_without_a_key_plan_says_the_price_is_unknown(project, run_cli, monkeypatch):
    monkeypatch.delenv("OVERBRAINER_RUNPOD__API_KEY")
    found = training_plan(run_cli)
    assert found["usd"] is None
    assert found["basis"] == "unknown: no Runpod API key: set OVERBRAINER_RUNPOD__API_KEY"


def test_a_price_that_cannot_be_found_is_said(project, run_cli, fake_runpod):
    fake_runpod.stock = dict.fromkeys((gpu["id"] for gpu in GPU_TYPES), "None")
    configure(project, '"auto"')
    assert training_plan(run_cli)["basis"] == (
        'unknown: gpu_types = "auto": no Secure Cloud GPU type in stock with 16 GB'
    )
    configure(project, '["NVIDIA B999"]')
    assert training_plan(run_cli)["basis"] == (
        "unknown: Runpod lists no price for gpu_types NVIDIA B999"
    )
    line = next(x for x in run_cli("plan").stdout.splitlines() if x.startswith("training"))
    assert line.endswith("; no price (unknown: Runpod lists no price for gpu_types NVIDIA B999)")
    total = run_cli("plan").stdout.splitlines()[-1]
    assert "cost unknown (no price: " in total and total.split("(no price: ")[1].startswith(
        "subtopics"
    )


def test_a_budget_with_a_price_that_cannot_be_read_refuses_to_train(
    project, run_cli, fake_runpod
):
    fake_runpod.stock = dict.fromkeys((gpu["id"] for gpu in GPU_TYPES), "None")
    configure(project, '"auto"', extra="\n[budget]\nmax_usd = 5\n")
    result = run_cli("train")
    assert result.exit_code == 1
    assert result.stderr.endswith(
        "error: budget: the price of training on `gpu` cannot be known (gpu_types = \"auto\": "
        "no Secure Cloud GPU type in stock with 16 GB), so max_usd cannot be kept: no machine "
        "was created; try again once it can (or unset [budget] max_usd)\n"
    )
    assert fake_runpod.pods == {} and "create" not in fake_runpod.calls
