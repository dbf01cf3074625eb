"""Projects of the reference tool are read and continued here; the files written here are
ones it can read."""

from __future__ import annotations

import json
import re

import pytest
from tests.helpers.fake_provider import Reply, openai_completion
from tests.helpers.reference_project import (
    HISTORY_FIELDS,
    JOB_EXTENSIONS,
    JOB_FIELDS,
    REJECTED_SHAPES,
    RUN_FIELDS,
    RUN_ID,
    STEP,
    STOPPED,
    strictly,
)

SWITCHES = {
    "OVERBRAINER_SSH_CLIENT": "builtin",
    "OVERBRAINER_NO_UPDATE_CHECK": "1",
    "OVERBRAINER_TUI_COLOR": "never",
    "OVERBRAINER_TUI_MOTION": "reduced",
}


def test_its_configuration_and_switches_pass_config_check(run_cli, reference_project):
    check = run_cli("-C", str(reference_project), "config", "check", env=SWITCHES)
    assert check.exit_code == 1  # its providers have no URL yet: named, one by one
    assert "has no URL: set OVERBRAINER_PROVIDERS__" in check.stderr
    providers = {
        f"OVERBRAINER_PROVIDERS__{name}__BASE_URL": "http://127.0.0.1:9/v1"
        for name in re.findall(r"OVERBRAINER_PROVIDERS__(\w+?)__BASE_URL", check.stderr)
    }
    result = run_cli("-C", str(reference_project), "config", "check", env=SWITCHES | providers)
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert "targets.gpu_cloud.ssh_client = builtin (here one client serves both" in out
    assert "export.quantize = Q4_K_M" in out and "export.ollama_name = rust-mentor" in out
    assert "hub.repo = someone/rust-mentor" in out and "compare.max_tokens = 3072" in out
    assert "training.axolotl_extra.chat_template = (set)" in out


def test_a_wrong_ssh_client_switch_is_named(run_cli, reference_project):
    result = run_cli(
        "-C", str(reference_project), "config", "check",
        env={"OVERBRAINER_SSH_CLIENT": "putty"},
    )  # fmt: skip
    assert result.exit_code == 1
    assert "OVERBRAINER_SSH_CLIENT must be openssh or builtin" in result.stderr


@pytest.mark.parametrize(
    ("table", "problem"),
    [
        ('[export]\nquantize = "Q9"', "export.quantize"),
        ('[export]\nollama_name = "a//b"', "export.ollama_name"),
        ('[hub]\nrepo = "no-namespace"', "hub.repo"),
        ("[compare]\ntemperature = 3.0", "compare.temperature"),
        ("[compare]\nserver_start_secs = 0", "compare.server_start_secs"),
    ],
)
def test_the_later_tables_are_validated_now(run_cli, reference_project, table, problem):
    config = reference_project / "overbrainer.toml"
    text = config.read_text()
    section = table.split("\n")[0]
    config.write_text(text.split(section)[0] + table + "\n")
    result = run_cli("-C", str(reference_project), "config", "check")
    assert result.exit_code == 1
    assert problem in result.stderr


def test_every_stage_continues_its_data_and_asks_nothing(run_cli, reference_project, provider):
    for stage in ("subtopics", "questions", "answers", "split"):
        result = run_cli("-C", str(reference_project), stage)
        assert result.exit_code == 0, (stage, result.stderr)
    assert provider.requests == []
    assert result.stdout == "split: 3 train, 1 eval, 0 excluded, 0 orphaned\n"


def test_its_rejected_subtopic_is_never_asked_for_again(run_cli, reference_project, provider):
    config = reference_project / "overbrainer.toml"
    text = config.read_text()
    last = "subtopics = 1\nquestions_per_subtopic = 2\n\n[providers"
    config.write_text(text.replace(last, last.replace("subtopics = 1", "subtopics = 3")))
    provider.on(lambda s: s.prompt.startswith("Generate") or "lifetimes" in s.prompt,
                Reply(openai_completion('["Elision", "Variance", "NLL"]')))
    result = run_cli("-C", str(reference_project), "subtopics", "--topic", "lifetimes")
    assert result.exit_code == 0, result.stderr
    names = [json.loads(line)["name"] for line in
             (reference_project / "data" / "subtopics.jsonl").read_text().splitlines()]
    assert "Elision" not in names and {"Variance", "NLL"} <= set(names)


def test_its_stopped_run_is_listed_attached_and_resumed(run_cli, reference_project, monkeypatch):
    listing = run_cli("-C", str(reference_project), "runs", "ls")
    assert f"{STOPPED}  stopped" in listing.stdout
    attached = run_cli("-C", str(reference_project), "train", "attach", STOPPED)
    assert attached.exit_code == 0, attached.stderr
    assert attached.stdout.splitlines()[1].startswith(
        f"train: run {STOPPED} stopped at step {STEP} (requested)"
    )
    monkeypatch.setenv("FAKE_AXOLOTL_STEPS", str(STEP + 2))
    monkeypatch.setenv("FAKE_AXOLOTL_STEP_SECONDS", "0.01")
    resumed = run_cli("-C", str(reference_project), "train", "--resume-from", STOPPED)
    assert resumed.exit_code == 0, resumed.stderr
    records = [json.loads(p.read_text()) for p in (reference_project / "runs").glob("*/run.json")]
    new = next(r for r in records if r["id"] != STOPPED)
    assert new["resumed_from"] == STOPPED and new["state"] == "succeeded"


def test_what_this_tool_writes_passes_the_reference_tools_reading(run_cli, reference_project,
                                                                   provider, monkeypatch):
    """A project grown here (a stage that rejects, a split, a training) read back field by
    field as the reference tool would, refusing any field it does not know."""
    config = reference_project / "overbrainer.toml"
    text = config.read_text()
    config.write_text(text.replace("questions_per_subtopic = 2", "questions_per_subtopic = 4", 1))
    provider.on(lambda s: s.model == "gen-model",
                Reply(openai_completion('["q1", "Q1", "a new question about borrowing"]')),
                times=None)
    monkeypatch.setenv("FAKE_AXOLOTL_STEPS", "2")
    monkeypatch.setenv("FAKE_AXOLOTL_STEP_SECONDS", "0.01")
    result = run_cli("-C", str(reference_project), "run")
    assert result.exit_code == 0, result.stderr
    data = reference_project / "data"
    rejected = [json.loads(line) for line in (data / "rejected.jsonl").read_text().splitlines()]
    assert len(rejected) > 2  # this run set texts aside too
    for record in rejected:
        strictly(record, REJECTED_SHAPES[record["kind"]], "data/rejected.jsonl")
        assert set(record) == REJECTED_SHAPES[record["kind"]]
    history = reference_project / ".overbrainer" / "history.jsonl"
    for line in history.read_text().splitlines():
        entry = json.loads(line)
        strictly(entry, HISTORY_FIELDS | {"split"}, "history.jsonl")
        if entry["stage"] == "split":
            assert (entry["done"], entry["cost"]) == (0, None)
    runs = [json.loads(p.read_text()) for p in (reference_project / "runs").glob("*/run.json")]
    new = next(r for r in runs if r["id"] != STOPPED)
    assert RUN_ID.match(new["id"])
    strictly(new, RUN_FIELDS, "run.json")
    strictly(new["job"], JOB_FIELDS | JOB_EXTENSIONS, "run.json job")
    assert isinstance(new["job"]["dir"], str) and new["job"]["pid"] > 1
    metrics = reference_project / "runs" / new["id"] / "metrics.jsonl"
    for line in metrics.read_text().splitlines():
        assert isinstance(json.loads(line)["time"], float)  # Unix seconds, as it writes them


def test_a_project_named_with_no_leading_letter_gets_an_id_it_lists(run_cli, reference_project,
                                                                     monkeypatch):
    config = reference_project / "overbrainer.toml"
    config.write_text(config.read_text().replace('name = "rust_errors"', 'name = "(Test)"', 1))
    monkeypatch.setenv("FAKE_AXOLOTL_STEPS", "1")
    assert run_cli("-C", str(reference_project), "split").exit_code == 0
    result = run_cli("-C", str(reference_project), "train")
    assert result.exit_code == 0, result.stderr
    ids = [p.name for p in (reference_project / "runs").iterdir() if p.name != STOPPED]
    assert len(ids) == 1 and ids[0].startswith("test_") and RUN_ID.match(ids[0])
