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
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from loguru import logger

from overbrainer import files
from overbrainer.after.base_gguf import LOG as BASE_LOG
from overbrainer.after.base_gguf import (
    BaseCache,
    BaseUnavailable,
    bring_home,
    make_on_target,
    prompt_key,
    serving_key,
)
from overbrainer.after.evalset import select_questions
from overbrainer.after.export import EXPORT_FILE, hub_secrets, sequence_len
from overbrainer.after.judge import (
    REFERENCE_TEMPLATE,
    TEMPLATE,
    Judge,
    Others,
    VerdictLog,
    judge_all,
    judging,
    read_verdicts,
    records_by_id,
    strip_reasoning,
    verdicts_key,
)
from overbrainer.after.metrics import length_controlled, summary
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
from overbrainer.pipeline.prompts import Templates
from overbrainer.pipeline.stage import StageContext
from overbrainer.project import RUNS_DIR, Project
from overbrainer.runs.store import RunStore

COMPARES = "compares"
SETUP = "setup.json"
ANSWERS = "child_answers.jsonl"
BASE_ANSWERS = "base_answers.jsonl"
QUESTIONS = "questions.jsonl"
HARDWARE = "hardware.json"
SERVER_LOG = "server.log"
LOG = "compare.log"
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


PARENT = "parent"
BASE = "base"
RUN_PREFIX = "run:"
DEFAULT_AGAINST = (BASE, PARENT)
"""What a compare with no ``--against`` judges the child against (the base when it can be
served)."""


def against_of(store: RunStore, run_id: str, option: str | None) -> list[str]:
    """What ``--against`` names: ``base``, ``parent`` or another run (``run:<id>``, its
    newest GGUF); None is both the base and the parent."""
    if option is None:
        return list(DEFAULT_AGAINST)
    if option in (BASE, PARENT):
        return [option]
    other = store.resolve(option)
    if other == run_id:
        raise UserError(f"--against {option}: that is the run compared; name another run")
    if newest_export(store.run_dir(other)) is None:
        raise UserError(
            f"--against {option}: run {other} has no GGUF; run `overbrainer export {other}` first"
        )
    return [RUN_PREFIX + other]


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
    against: str | None = None,
    echo: Callable[[str], None] | None = None,
) -> Path:
    """Run a compare (or judge ``rejudge`` again) and return the path of its compare.md
    (``eval_set``: the questions of that set alone, see ``after.evalset``; ``keep_machine``:
    a machine made for it is kept; ``against``: see :func:`against_of`); ``echo`` gets the
    summary. More than a tenth of the verdicts unread fails, once both files are written."""
    if rejudge is not None:
        directory = find_compare(store, rejudge)
        setup = _read_json(directory / SETUP)
        if not isinstance(setup, dict):
            raise UserError(f"{directory / SETUP} is not a compare setup")
    else:
        run_id, export = pick_run(store, run_id)
        run_dir = store.run_dir(run_id)
        record = store.load(run_id)
        opponents = against_of(store, run_id, against)
        questions = select_questions(project, run_dir, eval_set, limit)
        fill_parent_answers(project, questions)  # before a machine is made for the child
        files.mkdir_nofollow(run_dir / COMPARES, f"{RUNS_DIR}/{run_id}/{COMPARES}", levels=2)
        # Two compares started in one second get two directories, never one's verdicts.
        ident = files.mkdir_unique(
            run_dir / COMPARES, compare_id(), f"{RUNS_DIR}/{run_id}/{COMPARES}"
        )
        directory = run_dir / COMPARES / ident
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
            "against": opponents,
            "opponents": {},
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
            f"{export['file']} on target `{record.target}`, against {', '.join(opponents)}"
        )
        with open_target(
            project, hook, record, purpose="compare", keep_machine=keep_machine
        ) as target:
            try:
                if target.shell.price_per_hour is not None:  # a pod's: the child's price
                    setup["pod_price_per_hour"] = target.shell.price_per_hour
                    _write_json(directory / SETUP, setup)
                job = _prepare_job(target, run_dir, directory, setup)
                _serve(project, target, job, f"../../{setup['gguf']}", ANSWERS)
                for name in [n for n in opponents if n != PARENT]:
                    _answer_other(project, store, target, job, name, soft=against is None)
            except KeyboardInterrupt as interrupt:
                raise Interrupted(
                    f"interrupted: compare {ident} of run {run_id} cancelled", signal_of(interrupt)
                ) from None
    return _judge_and_report(project, directory, setup, echo or (lambda _line: None))


UNPARSED_SHARE = 10
"""More than one question in this many without a readable verdict fails the compare."""


@dataclass(frozen=True)
class Job:
    """A compare's directories: here (``directory``) and on the target (``remote``)."""

    run_dir: Path
    directory: Path
    remote: str
    setup: dict[str, Any]
    same: bool


def _prepare_job(target: TargetRun, run_dir: Path, directory: Path, setup: dict[str, Any]) -> Job:
    """The job directory on the target, with the questions and the child's GGUF."""
    host = target.shell.host
    job = Job(
        run_dir,
        directory,
        f"{target.run.remote_dir}/{COMPARES}/{setup['compare']}",
        setup,
        target.same_place(run_dir),
    )
    if not job.same:
        host.check(f"mkdir -p {scripts.q(job.remote)}\n")
        host.write_file(f"{job.remote}/{QUESTIONS}", (directory / QUESTIONS).read_bytes())
        if target.sha256(f"{target.run.remote_dir}/{setup['gguf']}") != setup["gguf_sha256"]:
            _upload_gguf(target, run_dir, setup["gguf"])
    return job


def _serve(project: Project, target: TargetRun, job: Job, gguf: str, answers: str) -> None:
    """Serve ``gguf`` (a path from the job directory there) and ask it the questions; its
    answers come home in ``answers``."""
    host = target.shell.host
    q = scripts.q
    host.write_file(f"{job.remote}/{SCRIPT}", target_file(SCRIPT))
    settings = project.settings.compare
    python = scripts.home_path(f"{target.ensure_toolchain(dict(project.env))}/bin/python")
    command = (
        f"{python} {SCRIPT} {q(gguf)} {sequence_len(job.run_dir) or 0} "
        f"{settings.max_tokens} {settings.temperature} {settings.server_start_secs} {q(answers)}"
    )
    log = LOG if answers == ANSWERS else answers.removesuffix("_answers.jsonl") + "_" + LOG
    done = target.run_script(job.remote, command, log, timeout=24 * HOUR_S)
    if not job.same:
        names = [answers, HARDWARE, SERVER_LOG, log]
        present = host.run(f"cd {q(job.remote)} && ls {' '.join(names)} 2>/dev/null\n")
        if present.text().split():
            host.download(job.remote, present.text().split(), job.directory)
    if done.code != 0:
        lines = done.stderr.decode("utf-8", "replace").strip()
        detail = (
            lines.split("error: ", 1)[1] if "error: " in lines else lines or f"exit {done.code}"
        )
        raise UserError(f"compare {job.setup['compare']} of run {target.run.id} failed: {detail}")


def _answer_other(  # noqa: PLR0917 - private, called once
    project: Project, store: RunStore, target: TargetRun, job: Job, name: str, soft: bool
) -> None:
    """Serve the base model (``base``) or another run's child (``run:<id>``) as the child
    was served, and record it in the setup. ``soft``: a base that cannot be served is said
    and left out, the compare going on against the parent."""
    setup = job.setup
    try:
        if name == BASE:
            opponent = _base_opponent(project, target, job)
        else:
            opponent = _run_opponent(project, store, target, job, name.removeprefix(RUN_PREFIX))
    except BaseUnavailable as error:
        reason = f"the base model {setup.get('base_model') or '(none)'} cannot be served: {error}"
        if not soft:
            raise UserError(f"compare {setup['compare']}: {reason}") from None
        logger.warning(f"compare: {reason}; comparing against the parent only")
        setup["against"] = [n for n in setup["against"] if n != name]
        setup["base_unavailable"] = reason
        _write_json(job.directory / SETUP, setup)
        return
    setup["opponents"][name] = opponent
    _write_json(job.directory / SETUP, setup)


def _stage(target: TargetRun, job: Job, source: Path, name: str, sha256: str) -> None:
    """Put the GGUF ``source`` (this machine's) in the job directory as ``name``."""
    if job.same:
        (job.directory / name).unlink(missing_ok=True)
        _link_or_copy(source, job.directory / name)
    elif target.sha256(f"{job.remote}/{name}") != sha256:
        logger.info(f"compare: uploading {name} to the target")
        with tempfile.TemporaryDirectory(prefix="overbrainer-gguf-") as tmp:
            _link_or_copy(source, Path(tmp) / name)
            target.shell.host.upload(Path(tmp), job.remote)


def _link_or_copy(source: Path, dest: Path) -> None:
    try:
        dest.hardlink_to(source)
    except OSError:
        shutil.copy2(source, dest)


def _unstage(target: TargetRun, job: Job, name: str) -> None:
    """Remove a served GGUF's copy from the job directory (the original is kept)."""
    if job.same:
        (job.directory / name).unlink(missing_ok=True)
    else:
        target.shell.host.run(f"rm -f {scripts.q(job.remote + '/' + name)}\n")


def _base_opponent(project: Project, target: TargetRun, job: Job) -> dict[str, Any]:
    """The base model served as the child was: its GGUF made on first use and kept, its
    answers kept and reused (only the questions it has not answered are asked)."""
    setup = job.setup
    base_model = setup.get("base_model")
    if not base_model:
        raise BaseUnavailable(f"the run's {CONFIG_FILE} names no base_model")
    cache = BaseCache.of(project.state_dir, str(base_model), str(setup.get("quantize") or "F16"))
    record = cache.record()
    made = record is None
    if record is None:
        logger.info(
            f"compare: making a GGUF ({cache.quantize}) of the base model {base_model} on the "
            f"target ({BASE_LOG}), to keep in {cache.shown} for later compares"
        )
        make_on_target(target, dict(project.env), job.remote, cache, hub_secrets(project))
        record = bring_home(target, job.remote, job.directory, cache)
    settings = project.settings.compare
    serving = serving_key(
        record["sha256"], sequence_len(job.run_dir) or 0, settings.max_tokens, settings.temperature
    )
    prompts = {q["id"]: prompt_key(q["messages"]) for q in setup["questions"]}
    kept = cache.answers(serving)
    reused = _reuse(target, job, prompts, kept)
    name = cache.gguf_name
    if reused < len(prompts):
        if job.same or not made:  # not in the job directory: kept in the cache
            _stage(target, job, cache.directory / name, name, record["sha256"])
        try:
            _serve(project, target, job, name, BASE_ANSWERS)
        except UserError as error:  # a compare not asked for the base goes on without it
            raise BaseUnavailable(f"serving it failed: {error.message}") from None
        finally:
            _unstage(target, job, name)
            new = records_by_id(job.directory / BASE_ANSWERS)
            cache.add_answers(serving, [
                {**{k: v for k, v in answer.items() if k != "id"}, "prompt": prompts[qid]}
                for qid, answer in new.items()
                if qid in prompts and "error" not in answer and prompts[qid] not in kept
            ])  # fmt: skip
    elif made:
        _unstage(target, job, name)
    asked = len(prompts) - reused
    logger.info(
        f"compare: the base model answered {asked} question{'' if asked == 1 else 's'}; "
        f"{reused} answer{'' if reused == 1 else 's'} kept from earlier compares reused"
    )
    return {
        "label": "its base model",
        "model": base_model,
        "gguf": f"{cache.shown}/{name}",
        "gguf_sha256": record["sha256"],
        "answers": BASE_ANSWERS,
        "reused": reused,
    }


def _reuse(
    target: TargetRun, job: Job, prompts: dict[str, str], kept: dict[str, dict[str, Any]]
) -> int:
    """Start the base's answers file with the kept answers to these prompts (here and in the
    job directory there, where the server skips them); how many."""
    reused = [
        {**{k: v for k, v in kept[key].items() if k != "prompt"}, "id": qid}
        for qid, key in prompts.items()
        if key in kept
    ]
    data = "".join(json.dumps(answer) + "\n" for answer in reused).encode("utf-8")
    files.write_atomic(job.directory / BASE_ANSWERS, data, BASE_ANSWERS)
    if not job.same:
        target.shell.host.write_file(f"{job.remote}/{BASE_ANSWERS}", data)
    return len(reused)


def _run_opponent(
    project: Project, store: RunStore, target: TargetRun, job: Job, other: str
) -> dict[str, Any]:
    """Another run's child: its newest GGUF, served here as this run's child is."""
    other_dir = store.run_dir(other)
    export = newest_export(other_dir)
    if export is None:  # checked before; gone since
        raise UserError(f"run {other} has no GGUF; run `overbrainer export {other}` first")
    name = f"run-{other}.gguf"
    answers = f"run-{other}_answers.jsonl"
    _stage(target, job, other_dir / export["file"], name, str(export.get("sha256")))
    try:
        _serve(project, target, job, name, answers)
    finally:
        _unstage(target, job, name)
    return {
        "label": f"run {other}'s child",
        "run": other,
        "gguf": export["file"],
        "gguf_sha256": export.get("sha256"),
        "answers": answers,
    }


def _upload_gguf(target: TargetRun, run_dir: Path, file: str) -> None:
    logger.info(f"compare: uploading {file} to the target")
    with tempfile.TemporaryDirectory(prefix="overbrainer-gguf-") as tmp:
        stage = Path(tmp)
        (stage / file).parent.mkdir(parents=True)
        _link_or_copy(run_dir / file, stage / file)
        target.shell.host.upload(stage, target.run.remote_dir)


def _judge_and_report(
    project: Project, directory: Path, setup: dict[str, Any], echo: Callable[[str], None]
) -> Path:
    settings = project.settings
    judge = Judge.of(settings)
    if judge.is_parent:
        logger.warning(
            f"compare: the judge {judge.provider}/{judge.role.model} is the parent's model: a "
            "judge prefers its own answers, so the child's rate may be low; set roles.judge "
            "to another model for a fairer one"
        )
    questions = setup["questions"]
    answers = records_by_id(directory / ANSWERS)
    against = _judged_against(setup)
    judged: dict[str, Judged] = {}
    try:
        with judging(project.dir, settings) as context:  # paid: journal, budget, history
            for name in against:
                judged[name] = _judge_against(project, judge, directory, setup, name, context)
    except KeyboardInterrupt as interrupt:
        raise Interrupted(
            "interrupted: the verdicts so far are kept; resume with "
            f"`overbrainer compare --rejudge {setup['compare']}`",
            signal_of(interrupt),
        ) from None
    compare_settings = settings.compare
    child_price = compare_settings.child_price_per_hour
    from_pod = child_price is None and isinstance(setup.get("pod_price_per_hour"), int | float)
    if from_pod:
        child_price = float(setup["pod_price_per_hour"])
    parent = parent_price(settings, dict(project.env))
    entries: list[dict[str, Any]] = []
    for name in against:
        found = judged[name]
        figures = summary(
            questions, found.verdicts, answers, parent.price_in, parent.price_out, child_price
        )
        figures["length_controlled"] = length_controlled(
            _lengths(questions, answers, found.verdicts, found.others)
        )
        entries.append({
            "name": name,
            "label": _label(setup, name),
            "verdicts_file": found.file.name,
            "reference": found.reference,
            "summary": figures,
        })  # fmt: skip
    first = entries[0]["summary"]
    data: dict[str, Any] = {
        **{k: v for k, v in setup.items() if k != "questions"},
        "hardware": _read_json(directory / HARDWARE) or {},
        "judge": f"{judge.provider}/{judge.role.model}",
        "judge_is_parent": judge.is_parent,
        "against": entries,
        "costs": {
            "parent_per_1k": first["parent_per_1k"],
            "child_per_1k": first["child_per_1k"],
            "ratio": first["ratio"],
        },
        "child_price_from_pod": from_pod,
        "parent_price": parent.json(),
    }
    if PARENT in judged:  # what `push --require-win-rate` and the model card read
        parent_entry = next(e for e in entries if e["name"] == PARENT)
        data["summary"] = parent_entry["summary"]
        data["verdicts_file"] = parent_entry["verdicts_file"]
    data["questions"] = [_row(q, answers.get(q["id"], {}), judged) for q in questions]
    _write_json(directory / "compare.json", data)
    report = directory / "compare.md"
    files.write_atomic(report, render_report(data).encode("utf-8"), report.name)
    for line in terminal_summary(data):
        echo(line)
    unread = [
        (entry, f"{entry['summary']['unparsed']} of {entry['summary']['questions']}")
        for entry in entries
        if entry["summary"]["unparsed"] * UNPARSED_SHARE > entry["summary"]["questions"]
    ]
    if unread:  # every opponent said at once: a rejudge asks them all again
        shown = f"{RUNS_DIR}/{setup['run']}/{COMPARES}/{setup['compare']}"
        if len(unread) == 1:
            entry, count = unread[0]
            said = count if entry["name"] == PARENT else f"against {entry['label']}, {count}"
        else:
            said = "; ".join(f"against {entry['label']}, {count}" for entry, count in unread)
        raise UserError(
            f"{said} verdicts could not be read, more than a tenth: the judge's "
            f"replies are in {shown}/compare.json (questions[].orders[].replies); change "
            f"roles.judge or prompts/judge.txt, then `overbrainer compare --rejudge "
            f"{setup['compare']}` asks those again"
        )
    return report


def _judged_against(setup: dict[str, Any]) -> list[str]:
    """What the child is judged against: the setup's ``against`` (older compares: the
    parent) less the others a stopped compare did not serve."""
    against = [str(name) for name in setup.get("against") or [PARENT]]
    served = setup.get("opponents") or {}
    unserved = [name for name in against if name != PARENT and name not in served]
    if unserved:
        logger.warning(
            f"compare: {', '.join(unserved)} not served (the compare stopped first): not judged"
        )
        against = [name for name in against if name not in unserved]
    if not against:
        raise UserError(f"compare {setup['compare']} has nothing to judge the child against")
    return against


@dataclass(frozen=True)
class Judged:
    """One opponent's verdicts: their file, by question id, and the answers judged."""

    file: Path
    verdicts: dict[str, dict[str, Any]]
    others: Others | None
    reference: bool


def _label(setup: dict[str, Any], name: str) -> str:
    if name == PARENT:
        return "its parent"
    opponent = (setup.get("opponents") or {}).get(name) or {}
    return str(opponent.get("label") or name)


def _judge_against(  # noqa: PLR0917 - private, called once
    project: Project,
    judge: Judge,
    directory: Path,
    setup: dict[str, Any],
    name: str,
    context: StageContext,
) -> Judged:
    """Judge the child against ``name`` (its parent, its base, another run's child): the
    parent's answer shown as a reference when ``[compare] reference`` and it is not the
    parent."""
    settings = project.settings
    reference = settings.compare.reference and name != PARENT
    template = REFERENCE_TEMPLATE if reference else TEMPLATE
    # Read once, by the rules of every template (no FIFO, no link out, no hard link, 1 MiB).
    templates = Templates(project.dir, template)
    key = verdicts_key(judge.provider, judge.role.model, templates.source(template))
    prefix = "verdicts" if name == PARENT else f"verdicts-{name.replace(RUN_PREFIX, 'run-')}"
    verdicts_file = directory / f"{prefix}-{key}.jsonl"
    others = None
    if name != PARENT:
        # The file's name alone: setup.json is a record, never a way out of the compare.
        answers = Path(str(setup["opponents"][name].get("answers", ""))).name
        others = Others(_label(setup, name), records_by_id(directory / answers))

    def render(question: dict[str, Any], answer_a: str, answer_b: str) -> str:
        # A held-out file's own answer is the reference where it gives one, else the parent's.
        given = question.get("reference") or strip_reasoning(question["parent"])
        extra = {"reference": given} if reference else {}
        return templates.render(
            template, question=question["question"], answer_a=answer_a, answer_b=answer_b,
            **extra,
        )  # fmt: skip

    asyncio.run(
        judge_all(
            context,
            dict(project.env),
            setup["questions"],
            records_by_id(directory / ANSWERS),
            render,
            VerdictLog(verdicts_file),
            int(setup["seed"]),
            setup["compare"],
            others=others,
        )
    )
    return Judged(verdicts_file, read_verdicts(verdicts_file), others, reference)


def _lengths(
    questions: list[dict[str, Any]],
    answers: dict[str, dict[str, Any]],
    verdicts: dict[str, dict[str, Any]],
    others: Others | None,
) -> list[tuple[bool, float]]:
    """Each judged question's win-or-tie and its length difference (characters, child minus
    the other, reasoning left out): what the length-controlled rate regresses."""
    found = []
    for question in questions:
        verdict = verdicts.get(question["id"], {}).get("verdict")
        if verdict not in ("win", "tie", "loss", "error"):
            continue
        child = strip_reasoning(answers.get(question["id"], {}).get("answer", ""))
        if others is None:
            other = strip_reasoning(question["parent"])
        else:
            other = strip_reasoning(others.answers.get(question["id"], {}).get("answer", ""))
        found.append((verdict in ("win", "tie"), float(len(child) - len(other))))
    return found


VERDICT_FIELDS = ("verdict", "reason", "child_first", "flipped", "orders")


def _row(
    question: dict[str, Any],
    answer: dict[str, Any],
    judged: dict[str, Judged],
) -> dict[str, Any]:
    """A question of ``compare.json``: the child's answer, and against the parent its
    verdict at the top level (as before there were others), each other's under ``against``."""
    qid = question["id"]
    parent = judged[PARENT].verdicts.get(qid, {}) if PARENT in judged else {}
    row = {
        "id": qid,
        "set": question.get("set"),
        "topic": question.get("topic"),
        "question": question["question"],
        "reference": question.get("reference"),
        "parent": question["parent"],
        "child": strip_reasoning(answer.get("answer", "")) if "answer" in answer else None,
        "error": answer.get("error"),
        "verdict": parent.get("verdict"),
        "reason": parent.get("reason"),
        "child_first": parent.get("child_first"),
        "flipped": parent.get("flipped", False),
        "orders": parent.get("orders", []),
        "seconds": answer.get("seconds"),
        "first_token_seconds": answer.get("first_token_seconds"),
        "tokens_per_second": answer.get("tokens_per_second"),
        "tokens": answer.get("tokens"),
        "finish": answer.get("finish"),
    }
    others = {}
    for name, found in judged.items():
        if found.others is None:
            continue
        verdict = found.verdicts.get(qid, {})
        other = found.others.answers.get(qid, {})
        others[name] = {
            "answer": strip_reasoning(other.get("answer", "")) if "answer" in other else None,
            "error": other.get("error"),
            **{field: verdict.get(field) for field in VERDICT_FIELDS},
        }
    if others:
        row["against"] = others
    return row
