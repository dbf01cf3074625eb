"""`overbrainer watch`: a cycle after each change that matters, one line a cycle."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
from tests.helpers.fake_provider import Reply
from tests.helpers.stand_ins import FAKE_TORCH, FAKE_TRANSFORMERS, make_toolchain
from tests.helpers.trainer import group_alive
from tests.helpers.watching import CYCLE, save


def runs_of(project_dir):
    return sorted(
        (json.loads(p.read_text()) for p in (project_dir / "runs").glob("*/run.json")),
        key=lambda r: r["id"],
    )


def test_the_first_cycle_runs_everything_then_a_comment_changes_nothing(watch, provider):
    watching = watch()
    first = watching.line(CYCLE.format(n=1))
    assert first["changed"] == "start"
    assert first["ran"].startswith(
        "subtopics 2 done, questions 3 done, answers 8 done, split 7/1, train run "
    )
    assert first["ran"].endswith("succeeded")
    asked = len(provider.requests)
    watching.edit("[pipeline]", "# a comment only\n[pipeline]")
    watching.stderr_has("watch: overbrainer.toml changed, not the configuration")
    assert watching.quiet(1.0) == []
    assert len(provider.requests) == asked
    assert len(runs_of(watching.project_dir)) == 1


@pytest.mark.parametrize("where", ["inside", "relative", "absolute"])
def test_a_changed_training_key_retrains_once(watch, where):
    watching = watch(where)
    watching.line(CYCLE.format(n=1))
    watching.edit("learning_rate = 0.0002", "learning_rate = 0.001")
    second = watching.line(CYCLE.format(n=2))
    assert second["changed"] == "overbrainer.toml"
    assert second["ran"].startswith("split 7/1, train run ")
    assert second["ran"].endswith("succeeded")
    assert watching.quiet(1.5) == []  # its own writes start no third cycle
    assert [r["state"] for r in runs_of(watching.project_dir)] == ["succeeded", "succeeded"]


def test_a_new_topic_runs_only_that_topic(watch, provider):
    watching = watch()
    watching.line(CYCLE.format(n=1))
    provider.requests.clear()
    watching.edit(
        "[providers.main]",
        '[[topics]]\nname = "borrowing"\nsubtopics = 1\nquestions_per_subtopic = 2\n\n'
        "[providers.main]",
    )
    second = watching.line(CYCLE.format(n=2))
    assert "subtopics 1 done" in second["ran"] and "answers 2 done" in second["ran"]
    # One subtopics and one questions request for the new topic, an answer per question.
    prompts = [seen.prompt for seen in provider.chats()]
    assert len(prompts) == 4
    assert prompts[0] == "subtopics|borrowing|1" and prompts[1].startswith("questions|borrowing|")
    answers = (watching.project_dir / "data" / "answers.jsonl").read_text().splitlines()
    assert [json.loads(line)["topic"] for line in answers[-2:]] == ["borrowing", "borrowing"]


def test_an_invalid_edit_waits_for_the_fix(watch):
    watching = watch()
    watching.line(CYCLE.format(n=1))
    watching.edit("concurrency = 4", 'concurrency = "many"')
    watching.stderr_has("watch: the configuration cannot be used; fix it and save again:")
    watching.stderr_has("pipeline.concurrency")
    assert watching.quiet(1.0) == []
    assert watching.process.poll() is None  # the loop lives on
    watching.edit('concurrency = "many"', "concurrency = 2")
    second = watching.line(CYCLE.format(n=2))
    assert second["changed"] == "overbrainer.toml"


def test_a_prompt_change_is_seen(watch):
    watching = watch()
    watching.line(CYCLE.format(n=1))
    prompt = watching.project_dir / "prompts" / "questions.txt"
    save(prompt, prompt.read_text() + " ")
    assert watching.line(CYCLE.format(n=2))["changed"] == "prompts/questions.txt"


def test_a_change_during_training_waits_for_it_by_default(watch):
    watching = watch(FAKE_AXOLOTL_STEPS="150", FAKE_AXOLOTL_STEP_SECONDS="0.02")
    project = watching.project_dir
    _wait_for_a_running_job(project)
    watching.edit("learning_rate = 0.0002", "learning_rate = 0.001")
    first = watching.line(CYCLE.format(n=1), timeout=60)
    assert first["ran"].endswith("succeeded")  # finished, not stopped
    second = watching.line(CYCLE.format(n=2), timeout=60)
    assert second["ran"].endswith("succeeded")
    assert [r["state"] for r in runs_of(project)] == ["succeeded", "succeeded"]


def test_a_change_of_the_model_during_training_snapshots_it_and_trains_anew(watch):
    watching = watch(FAKE_AXOLOTL_STEPS="300", FAKE_AXOLOTL_STEP_SECONDS="0.02")
    project = watching.project_dir
    watching.edit("[pipeline]", '[watch]\non_change = "snapshot"\n\n[pipeline]')
    _wait_for_a_running_job(project)
    watching.edit("learning_rate = 0.0002", "learning_rate = 0.001")
    first = watching.line(CYCLE.format(n=1), timeout=60)
    assert first["ran"].endswith("stopped")
    watching.line(CYCLE.format(n=2), timeout=60)
    stopped, fresh = runs_of(project)
    assert stopped["state"] == "stopped" and stopped["snapshot"]["reason"] == "requested"
    assert fresh["state"] == "succeeded" and "resumed_from" not in fresh


def test_a_change_that_leaves_the_model_alone_resumes_from_the_snapshot(watch):
    watching = watch(FAKE_AXOLOTL_STEPS="300", FAKE_AXOLOTL_STEP_SECONDS="0.02")
    project = watching.project_dir
    watching.edit("[pipeline]", '[watch]\non_change = "snapshot"\n\n[pipeline]')
    _wait_for_a_running_job(project)
    watching.edit('adapter = "lora"', 'adapter = "lora"\nsaves_per_epoch = 2')
    assert watching.line(CYCLE.format(n=1), timeout=60)["ran"].endswith("stopped")
    watching.line(CYCLE.format(n=2), timeout=90)
    stopped, resumed = runs_of(project)
    assert resumed["resumed_from"] == stopped["id"] and resumed["state"] == "succeeded"


def test_ctrl_c_while_idle_stops_watching(watch):
    watching = watch()
    watching.line(CYCLE.format(n=1))
    assert watching.interrupt() == 130
    watching.stderr_has("watch: stopped")
    assert not any("error" in line for line in watching.err), watching.err


def test_ctrl_c_during_a_stage_writes_its_history_and_exits_130(watch, provider):
    provider.on(lambda s: s.prompt.startswith("questions|"), Reply(delay=3), times=None)
    watching = watch()
    deadline = time.monotonic() + 30
    while not any(s.prompt.startswith("questions|") for s in provider.chats()):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert watching.interrupt(signal.SIGTERM) == 143
    # Ending watch is not an error; what it cut short is said, and resumes.
    watching.stderr_has("watch: stopped (interrupted: the stage resumes on its next run)")
    cycle = watching.line(CYCLE.format(n=1)).string
    assert "error" not in cycle and "nothing to do" not in cycle, cycle
    assert cycle.endswith("; interrupted: the stage resumes on its next run"), cycle
    assert not any(line.startswith("error") for line in watching.err), watching.err
    history = (watching.project_dir / ".overbrainer" / "history.jsonl").read_text().splitlines()
    assert json.loads(history[-1])["stage"] == "questions"
    assert json.loads(history[-1])["status"] == "interrupted"


def test_ctrl_c_during_training_leaves_the_run_running_and_listed(watch, run_cli):
    watching = watch(FAKE_AXOLOTL_HANG="1", FAKE_AXOLOTL_STEP_SECONDS="0.02")
    project = watching.project_dir
    run = _wait_for_a_running_job(project)
    assert watching.interrupt() == 0  # a detach: watching stops, the run goes on
    watching.line(
        "keeps running on target `local`; follow it again with "
        f"`overbrainer train attach {run['id']}`"
    )
    cycle = next(line for line in watching.seen if line.startswith("watch: cycle 1 "))
    assert cycle.endswith("; detached, the run goes on") and "error" not in cycle, cycle
    assert group_alive(run["job"]["pid"])
    assert f"{run['id']}  running" in run_cli("runs", "ls").stdout
    os.killpg(run["job"]["pid"], signal.SIGKILL)


def _wait_for_a_running_job(project, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        runs = runs_of(project)
        if runs and runs[-1]["state"] == "running":
            metrics = project / "runs" / runs[-1]["id"] / "metrics.jsonl"
            if metrics.exists() and '"log"' in metrics.read_text():
                return runs[-1]
        assert time.monotonic() < deadline, "no running job"
        time.sleep(0.05)


REACTOR = """
import json, os
from overbrainer.plugin import hookimpl

def _write(record):
    with open(os.environ["REACTOR_LOG"], "a") as log:
        log.write(json.dumps(record) + "\\n")

@hookimpl
def on_config_change(old, new, changed_keys):
    _write({"changed": changed_keys, "old": old.training.learning_rate,
            "new": new.training.learning_rate})

@hookimpl
def on_cycle_end(summary):
    _write({"cycle": summary.number, "line": summary.line(),
            "run": summary.run.id if summary.run else None})
"""


def test_a_plugin_hears_of_each_change_and_each_cycle(watch, site, tmp_path):
    site.install("reactor", REACTOR)
    log = tmp_path / "reactor.jsonl"
    watching = watch(
        OVERBRAINER_LOAD_PLUGINS="local,reactor",
        PYTHONPATH=os.pathsep.join([str(site.path), os.environ.get("PYTHONPATH", "")]),
        REACTOR_LOG=str(log),
    )
    first = watching.line(CYCLE.format(n=1))
    watching.edit("learning_rate = 0.0002", "learning_rate = 0.001")
    second = watching.line(CYCLE.format(n=2))
    deadline = time.monotonic() + 10  # the hook hears of a cycle just after its line is out
    while len(records := [json.loads(line) for line in log.read_text().splitlines()]) < 3:
        assert time.monotonic() < deadline, records
        time.sleep(0.05)
    assert records[0]["cycle"] == 1 and records[0]["line"] == first.string
    assert records[1] == {"changed": ["training.learning_rate"], "old": 0.0002, "new": 0.001}
    assert records[2]["cycle"] == 2 and records[2]["line"] == second.string
    assert records[2]["run"] == runs_of(watching.project_dir)[-1]["id"]


def test_a_cycle_exports_its_new_run_as_run_does(watch, project_dir, tmp_path):
    """``[export] after_training``: each new run is exported within its cycle, and the
    cycle's line says so; a cycle whose run is up to date exports nothing again."""
    toolchain = make_toolchain(tmp_path / "llama-cpp")
    site = next((tmp_path / "fake-venv").glob("lib/python3.*/site-packages"))
    stand_ins = {"torch": FAKE_TORCH, "transformers": FAKE_TRANSFORMERS}  # the verification's
    for module in ("torch", "numpy", "transformers", "yaml"):  # what the converter needs
        (site / module).mkdir()
        (site / module / "__init__.py").write_text(stand_ins.get(module, ""))
    config = project_dir / "overbrainer.toml"
    text = config.read_text().replace('adapter = "lora"', 'adapter = "lora"\nmerge = true')
    save(config, text + '\n[export]\nafter_training = true\nquantize = "Q8_0"\n')
    watching = watch(OVERBRAINER_LLAMA_CPP=str(toolchain))
    first = watching.line(CYCLE.format(n=1))
    [run] = runs_of(project_dir)
    assert first["ran"].endswith(f"train run {run['id']} succeeded, export run {run['id']} Q8_0")
    gguf = project_dir / "runs" / run["id"] / "output" / "gguf" / f"{run['id']}-Q8_0.gguf"
    assert gguf.read_bytes().startswith(b"GGUF converted auto from ../../output/merged")
    watching.edit('adapter = "lora"', 'adapter = "lora"\nevals_per_epoch = 2')
    second = watching.line(CYCLE.format(n=2))
    assert second["ran"] == f"split 7/1, train up to date with run {run['id']}"
    watching.edit("learning_rate = 0.0002", "learning_rate = 0.001")
    third = watching.line(CYCLE.format(n=3))
    newer = runs_of(project_dir)[-1]["id"]
    assert newer != run["id"]
    assert third["ran"].endswith(f"train run {newer} succeeded, export run {newer} Q8_0")
    assert len(list((project_dir / "runs").glob("*/exports/*/export.json"))) == 2


PAUSED = """
    from typing import Literal

    from overbrainer.plugin import Executor, TargetBase, TargetInfo, UserError, hookimpl


    class PausedTarget(TargetBase):
        kind: Literal["paused"]


    class PausedExecutor(Executor):
        def describe(self):
            return TargetInfo(device="cpu", local_paths=False)

        def claim(self, run_id):
            raise UserError("interrupted service: the cluster's queue is paused")

        def _unused(self, *args):
            raise NotImplementedError

        launch = poll = request_snapshot = cancel = collect = read_log = _unused


    @hookimpl
    def register_targets(register):
        register("paused", PausedTarget)


    @hookimpl
    def create_executor(name, target, project, run):
        return PausedExecutor() if target.kind == "paused" else None
"""


def test_a_cycle_that_fails_keeps_watching_whatever_its_error_says(watch, project_dir, site):
    # Only an interruption stops watching: not an error whose words start as one does.
    site.install("paused", PAUSED)
    config = project_dir / "overbrainer.toml"
    text = config.read_text(encoding="utf-8").replace('target = "local"', 'target = "queue"', 1)
    config.write_text(text + '\n[targets.queue]\nkind = "paused"\n', encoding="utf-8")
    watching = watch(
        OVERBRAINER_LOAD_PLUGINS="local,paused",
        PYTHONPATH=os.pathsep.join([str(site.path), os.environ.get("PYTHONPATH", "")]),
    )
    first = watching.line(CYCLE.format(n=1))
    assert "interrupted service: the cluster's queue is paused" in first.string
    assert watching.quiet(1.0) == []
    assert watching.process.poll() is None  # the loop lives on
    watching.edit('target = "queue"', 'target = "local"')
    second = watching.line(CYCLE.format(n=2))
    assert second["ran"].endswith("succeeded")
