"""``overbrainer compare``: the child (its GGUF served by llama.cpp on the run's target)
against its parent, on the first eval questions, judged by a provider's model.

A compare lives in ``runs/X/compares/<id>/``: ``setup.json`` (what is compared, fixed at
the start), ``child_answers.jsonl`` (from the target), ``verdicts-<key>.jsonl`` (one line per
verdict, so it resumes), then ``compare.json`` and ``compare.md``.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from loguru import logger

from overbrainer import files
from overbrainer.after.evalset import select_questions
from overbrainer.after.export import EXPORT_FILE, sequence_len
from overbrainer.after.judge import (
    TEMPLATE,
    Judge,
    VerdictLog,
    judge_all,
    read_verdicts,
    records_by_id,
    strip_reasoning,
    verdicts_key,
)
from overbrainer.after.metrics import summary
from overbrainer.after.parent_answers import fill_parent_answers
from overbrainer.after.parent_price import parent_price
from overbrainer.after.report import render as render_report
from overbrainer.after.report import terminal_summary
from overbrainer.after.target_run import TargetRun, open_target
from overbrainer.after.toolchain import target_file
from overbrainer.errors import Interrupted, UserError, signal_of
from overbrainer.hookcalls import Hooks
from overbrainer.job import scripts
from overbrainer.job.layout import CONFIG_FILE
from overbrainer.pipeline.exchanges import ExchangeLog
from overbrainer.project import RUNS_DIR, Project
from overbrainer.runs.store import RunStore

COMPARES = "compares"
SETUP = "setup.json"
ANSWERS = "child_answers.jsonl"
QUESTIONS = "questions.jsonl"
HARDWARE = "hardware.json"
SERVER_LOG = "server.log"
SCRIPT = "serve_child.py"
HOUR_S = 3600


def compare_id(now: datetime | None = None) -> str:
    return f"compare_{(now or datetime.now(UTC)).strftime('%Y%m%d-%H%M%S')}"


def _write_json(path: Path, data: Any) -> None:
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    files.write_atomic(path, text.encode("utf-8"), path.name)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(files.read_text(path, path.name, files.RECORD_LIMIT) or "")
    except (UserError, ValueError):
        return None


def _own_file(run_dir: Path, name: str) -> bool:
    """Whether ``name``, a record's path, is a regular file of the run's own (no link out,
    no ``..``): what compare hashes and uploads must be the run's."""
    try:
        files.own_path(name, run_dir, name)
    except UserError:
        return False
    path = run_dir / name
    return ".." not in Path(name).parts and path.is_file() and not path.is_symlink()


def newest_export(run_dir: Path) -> dict[str, Any] | None:
    """The newest ``export.json`` of the run (its own, or an export job's) whose GGUF exists."""
    found = []
    for path in [run_dir / EXPORT_FILE, *run_dir.glob(f"exports/*/{EXPORT_FILE}")]:
        data = _read_json(path)
        if not isinstance(data, dict) or not isinstance(data.get("file"), str):
            continue
        if _own_file(run_dir, data["file"]):
            found.append(data)
    return max(found, key=lambda data: str(data.get("created", "")), default=None)


def pick_run(store: RunStore, run_id: str | None) -> tuple[str, dict[str, Any]]:
    """The run to compare and its export: ``--run``, else the newest run with a GGUF."""
    if run_id is not None:
        store.load(run_id)
        export = newest_export(store.run_dir(run_id))
        if export is None:
            raise UserError(f"run {run_id} has no GGUF; run `overbrainer export {run_id}` first")
        return run_id, export
    for record in reversed(store.list()):
        export = newest_export(store.run_dir(record.id))
        if export is not None:
            return record.id, export
    raise UserError(
        "no run has a GGUF: export one with `overbrainer export <run-id>`, then compare"
    )


def _base_model(run_dir: Path) -> str | None:
    import yaml

    try:
        config = yaml.safe_load((run_dir / CONFIG_FILE).read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return None
    base = config.get("base_model") if isinstance(config, dict) else None
    return str(base) if base else None


NAME_MAX = 255
"""The longest file name (bytes) POSIX file systems take."""


def find_compare(store: RunStore, compare: str) -> Path:
    """The directory of compare ``compare`` in any run."""
    # No path, and no name longer than a file's may be (a glob of one raised ENAMETOOLONG).
    if "/" in compare or compare.startswith(".") or len(compare.encode()) > NAME_MAX:
        shown = compare if len(compare) <= 60 else compare[:59] + "…"
        raise UserError(f"no compare {shown} in {RUNS_DIR}/")
    for path in sorted(store.root.glob(f"*/{COMPARES}/{compare}/{SETUP}")):
        return path.parent
    raise UserError(f"no compare {compare} in {RUNS_DIR}/")


def compare(
    project: Project,
    hook: Hooks,
    store: RunStore,
    *,
    run_id: str | None = None,
    limit: int | None = None,
    eval_set: str | None = None,
    rejudge: str | None = None,
    keep_machine: bool = False,
    echo: Callable[[str], None] | None = None,
) -> Path:
    """Run a compare (or judge ``rejudge`` again) and return the path of its compare.md
    (``eval_set``: the questions of that set alone, see ``after.evalset``; ``keep_machine``:
    a machine made for it is kept); ``echo`` gets the summary. More than a tenth of the
    verdicts unread fails, once both files are written."""
    if rejudge is not None:
        directory = find_compare(store, rejudge)
        setup = _read_json(directory / SETUP)
        if not isinstance(setup, dict):
            raise UserError(f"{directory / SETUP} is not a compare setup")
    else:
        run_id, export = pick_run(store, run_id)
        run_dir = store.run_dir(run_id)
        record = store.load(run_id)
        questions = select_questions(project, run_dir, eval_set, limit)
        fill_parent_answers(project, questions)  # before a machine is made for the child
        ident = compare_id()
        directory = run_dir / COMPARES / ident
        files.mkdir_nofollow(directory, f"{COMPARES}/{ident}", levels=2)
        setup = {
            "run": run_id,
            "compare": ident,
            "gguf": export["file"],
            "gguf_sha256": export.get("sha256"),
            "quantize": export.get("quantize"),
            "llama_cpp": export.get("llama_cpp"),
            "base_model": _base_model(run_dir),
            "seed": project.settings.pipeline.seed,
            "eval": eval_set,
            "created": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "questions": questions,
        }
        _write_json(directory / SETUP, setup)
        lines = [
            json.dumps({"id": question["id"], "messages": question["messages"]}) + "\n"
            for question in questions
        ]
        files.write_atomic(directory / QUESTIONS, "".join(lines).encode("utf-8"), QUESTIONS)
        logger.info(
            f"compare: {ident}: run {run_id}, {len(questions)} questions, child "
            f"{export['file']} on target `{record.target}`"
        )
        with open_target(
            project, hook, record, purpose="compare", keep_machine=keep_machine
        ) as target:
            try:
                if target.shell.price_per_hour is not None:  # a pod's: the child's price
                    setup["pod_price_per_hour"] = target.shell.price_per_hour
                    _write_json(directory / SETUP, setup)
                _answer_on_target(project, target, run_dir, directory, setup)
            except KeyboardInterrupt as interrupt:
                raise Interrupted(
                    f"interrupted: compare {ident} of run {run_id} cancelled", signal_of(interrupt)
                ) from None
    return _judge_and_report(project, directory, setup, echo or (lambda _line: None))


UNPARSED_SHARE = 10
"""More than one question in this many without a readable verdict fails the compare."""


def _answer_on_target(
    project: Project, target: TargetRun, run_dir: Path, directory: Path, setup: dict[str, Any]
) -> None:
    run = target.run
    host = target.shell.host
    q = scripts.q
    job_dir = f"{run.remote_dir}/{COMPARES}/{setup['compare']}"
    remote_gguf = f"{run.remote_dir}/{setup['gguf']}"
    same = target.same_place(run_dir)
    if not same:
        host.check(f"mkdir -p {q(job_dir)}\n")
        host.write_file(f"{job_dir}/{QUESTIONS}", (directory / QUESTIONS).read_bytes())
        if target.sha256(remote_gguf) != setup["gguf_sha256"]:
            _upload_gguf(target, run_dir, setup["gguf"])
    host.write_file(f"{job_dir}/{SCRIPT}", target_file(SCRIPT))
    settings = project.settings.compare
    python = scripts.home_path(f"{target.ensure_toolchain(dict(project.env))}/bin/python")
    command = (
        f"{python} {SCRIPT} {q('../../' + setup['gguf'])} {sequence_len(run_dir) or 0} "
        f"{settings.max_tokens} {settings.temperature} {settings.server_start_secs}"
    )
    done = target.run_script(job_dir, command, "compare.log", timeout=24 * HOUR_S)
    if not same:
        names = [ANSWERS, HARDWARE, SERVER_LOG, "compare.log"]
        present = host.run(f"cd {q(job_dir)} && ls {' '.join(names)} 2>/dev/null\n").text().split()
        if present:
            host.download(job_dir, present, directory)
    if done.code != 0:
        lines = done.stderr.decode("utf-8", "replace").strip()
        detail = (
            lines.split("error: ", 1)[1] if "error: " in lines else lines or f"exit {done.code}"
        )
        raise UserError(f"compare {setup['compare']} of run {run.id} failed: {detail}")


def _upload_gguf(target: TargetRun, run_dir: Path, file: str) -> None:
    logger.info(f"compare: uploading {file} to the target")
    with tempfile.TemporaryDirectory(prefix="overbrainer-gguf-") as tmp:
        stage = Path(tmp)
        (stage / file).parent.mkdir(parents=True)
        try:
            (stage / file).hardlink_to(run_dir / file)
        except OSError:
            shutil.copy2(run_dir / file, stage / file)
        target.shell.host.upload(stage, target.run.remote_dir)


def _judge_and_report(
    project: Project, directory: Path, setup: dict[str, Any], echo: Callable[[str], None]
) -> Path:
    from overbrainer.pipeline.prompts import Templates

    settings = project.settings
    judge = Judge.of(settings)
    if judge.is_parent:
        logger.warning(
            f"compare: the judge {judge.provider}/{judge.role.model} is the parent's model: a "
            "judge prefers its own answers, so the child's rate may be low; set roles.judge "
            "to another model for a fairer one"
        )
    # Read once, by the rules of every template (no FIFO, no link out, no hard link, 1 MiB).
    templates = Templates(project.dir, TEMPLATE)
    key = verdicts_key(judge.provider, judge.role.model, templates.source(TEMPLATE))
    verdicts_file = directory / f"verdicts-{key}.jsonl"
    questions = setup["questions"]
    answers = records_by_id(directory / ANSWERS)

    def render(question: str, answer_a: str, answer_b: str) -> str:
        return templates.render(TEMPLATE, question=question, answer_a=answer_a, answer_b=answer_b)

    exchanges = ExchangeLog(project.dir)
    try:
        asyncio.run(
            judge_all(
                settings,
                dict(project.env),
                questions,
                answers,
                render,
                VerdictLog(verdicts_file),
                int(setup["seed"]),
                setup["compare"],
                exchanges=exchanges,
            )
        )
    except KeyboardInterrupt as interrupt:
        raise Interrupted(
            "interrupted: the verdicts so far are kept; resume with "
            f"`overbrainer compare --rejudge {setup['compare']}`",
            signal_of(interrupt),
        ) from None
    finally:
        exchanges.close()
    verdicts = read_verdicts(verdicts_file)
    compare_settings = settings.compare
    child_price = compare_settings.child_price_per_hour
    from_pod = child_price is None and isinstance(setup.get("pod_price_per_hour"), int | float)
    if from_pod:
        child_price = float(setup["pod_price_per_hour"])
    parent = parent_price(settings, dict(project.env))
    figures = summary(questions, verdicts, answers, parent.price_in, parent.price_out, child_price)
    data = {
        **{k: v for k, v in setup.items() if k != "questions"},
        "hardware": _read_json(directory / HARDWARE) or {},
        "judge": f"{judge.provider}/{judge.role.model}",
        "judge_is_parent": judge.is_parent,
        "verdicts_file": verdicts_file.name,
        "summary": figures,
        "costs": {
            "parent_per_1k": figures["parent_per_1k"],
            "child_per_1k": figures["child_per_1k"],
            "ratio": figures["ratio"],
        },
        "child_price_from_pod": from_pod,
        "parent_price": parent.json(),
        "questions": [
            _row(q, answers.get(q["id"], {}), verdicts.get(q["id"], {})) for q in questions
        ],
    }
    _write_json(directory / "compare.json", data)
    report = directory / "compare.md"
    files.write_atomic(report, render_report(data).encode("utf-8"), report.name)
    for line in terminal_summary(data):
        echo(line)
    unparsed = figures["unparsed"]
    if unparsed * UNPARSED_SHARE > figures["questions"]:
        shown = f"{RUNS_DIR}/{setup['run']}/{COMPARES}/{setup['compare']}"
        raise UserError(
            f"{unparsed} of {figures['questions']} verdicts could not be read, more than a "
            f"tenth: the judge's replies are in {shown}/compare.json (questions[].orders[]"
            ".replies); change roles.judge or prompts/judge.txt, then `overbrainer compare "
            f"--rejudge {setup['compare']}` asks those again"
        )
    return report


def _row(
    question: dict[str, Any], answer: dict[str, Any], verdict: dict[str, Any]
) -> dict[str, Any]:
    return {
        "id": question["id"],
        "set": question.get("set"),
        "topic": question.get("topic"),
        "question": question["question"],
        "reference": question.get("reference"),
        "parent": question["parent"],
        "child": strip_reasoning(answer.get("answer", "")) if "answer" in answer else None,
        "error": answer.get("error"),
        "verdict": verdict.get("verdict"),
        "reason": verdict.get("reason"),
        "child_first": verdict.get("child_first"),
        "flipped": verdict.get("flipped", False),
        "orders": verdict.get("orders", []),
        "seconds": answer.get("seconds"),
        "first_token_seconds": answer.get("first_token_seconds"),
        "tokens_per_second": answer.get("tokens_per_second"),
        "tokens": answer.get("tokens"),
        "finish": answer.get("finish"),
    }
