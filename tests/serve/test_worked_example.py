"""docs/serving.md's worked example is what ``plan`` says of examples/served-parent: the
figures of its table are made here from ``plan --json`` and looked for in the page, so a
change to the throughput table, the prior or the prices that moves them fails here."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from overbrainer.cli import cli
from overbrainer.duration import duration
from overbrainer.plan.serve_hours import PREFILL

ROOT = Path(__file__).parents[2]
EXAMPLE = ROOT / "examples" / "served-parent"
DOC = ROOT / "docs" / "serving.md"


def plan(project: Path) -> dict[str, object]:
    result = CliRunner().invoke(cli, ["-C", str(project), "plan", "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    found: dict[str, object] = json.loads(result.stdout)
    return found


def test_the_doc_s_figures_are_plan_s(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "served-parent"
    shutil.copytree(EXAMPLE, project)
    served = plan(project)["served"]["big"]  # type: ignore[index]
    monkeypatch.setenv("OVERBRAINER_ROLES__PARENT__PROVIDER", "api")
    monkeypatch.setenv("OVERBRAINER_ROLES__PARENT__MODEL", "qwen/qwen3-32b")
    api = plan(project)["stages"]["answers"]  # type: ignore[index]
    doc = " ".join(DOC.read_text().split())

    assert api["requests"] == 10_000, "the example prices 10,000 answers"
    assert served["tokens_in"] == api["tokens_in"] and served["tokens_out"] == api["tokens_out"]
    figures = [
        f"10,000 answers, {served['tokens_in']:,} tokens in and {served['tokens_out']:,} out",
        f"{served['tokens_per_second']:,.0f} tokens/s out",
        f"{served['tokens_per_second'] / 2:,.0f} a GPU, times 2",
        f"at ${served['price_per_hour']:.2f}/h | {duration(served['hours'] * 3600)} "
        f"| ${served['usd']:.2f} |",
        f"| ${api['usd']:.2f} |",
    ]
    for figure in figures:
        assert figure in doc, f"docs/serving.md's worked example no longer says {figure!r}"
    # the throughput at which the pod costs what the API does, in hundreds
    equal = (served["tokens_out"] + served["tokens_in"] / PREFILL) * served["price_per_hour"]
    equal /= 3600 * api["usd"]
    assert f"above about {round(equal, -2):,.0f} tokens a second out" in doc
    assert (api["usd"] < served["usd"]) == ("At these figures the API is the cheaper" in doc)
