"""``runs logs --pod`` counts only a plugin's True as a printed machine log: any other
answer is refused as no answer at all."""

from __future__ import annotations

import pytest
from tests.helpers.run_records import write_run

RUN = "demo_20260922-143005"
ANSWER = """
from overbrainer import hookimpl

@hookimpl
def show_machine_log(project, run, query):
    print(f"{{query.source}} {{query.tail}} {{query.follow}}")
    return {answer}
"""


@pytest.mark.parametrize(("answer", "code"), [("True", 0), ("False", 1), ("'yes'", 1)])
def test_only_true_is_a_printed_machine_log(run_cli, project_dir, site, answer, code):
    write_run(project_dir, RUN, "2026-09-22T14:30:05Z", target="local")
    site.install("answerer", ANSWER.format(answer=answer))
    result = run_cli(
        "runs", "logs", RUN, "--pod", "--tail", "3",
        env={"OVERBRAINER_LOAD_PLUGINS": "local,answerer"},
    )  # fmt: skip
    assert result.exit_code == code, result.stderr
    assert result.stdout == "None 3 False\n"
    if code:
        assert result.stderr == (
            f"error: runs: run {RUN} has no machine log (its target `local` keeps none): "
            "--pod has nothing to read\n"
        )
