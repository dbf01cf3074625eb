"""``overbrainer export``: a run's model as a GGUF file and an Ollama Modelfile.

The heavy work (merge, conversion, quantization) runs on the run's own target, in
``<run dir there>/exports/<id>/``, with the runtime's Python and the llama.cpp toolchain
(:mod:`overbrainer.after.toolchain`); the GGUF comes home into ``runs/X/output/gguf/``.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from loguru import logger

from overbrainer import files
from overbrainer.after.accept import AcceptedRun, accept_run
from overbrainer.after.chat_template import read_chat_template
from overbrainer.after.evalset import NoEvalQuestions, eval_questions
from overbrainer.after.ollama_template import OllamaChat, ollama_chat
from overbrainer.after.system_turn import system_line, trained_system
from overbrainer.after.target_run import TargetRun, open_target
from overbrainer.after.toolchain import LLAMA_CPP, target_file
from overbrainer.config.model import _ollama_name
from overbrainer.config.secrets import resolve_secret
from overbrainer.errors import Interrupted, UserError, signal_of
from overbrainer.hookcalls import Hooks
from overbrainer.job import scripts
from overbrainer.job.layout import CONFIG_FILE, OUTPUT_DIR, TRAIN_FILE
from overbrainer.job.manifest import sha256_file
from overbrainer.project import RUNS_DIR, Project
from overbrainer.runs.store import RunStore

GGUF_DIR = f"{OUTPUT_DIR}/gguf"
EXPORT_FILE = "export.json"
SCRIPT = "export_gguf.py"
HOUR_S = 3600
HF_TOKEN = "HF_TOKEN"  # noqa: S105 - the variable's name, not a secret
AUTO = "AUTO"
LADDER = ("Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0")
"""What ``--quantize auto`` tries, smallest first (``target/export_gguf.py`` holds the same)."""
VERIFY_PROMPTS = 8
"""Eval prompts the GGUF is verified on, unless ``--verify N`` says otherwise."""
PROMPTS_FILE = "verify_prompts.jsonl"
RESULT_FILE = "export-result.json"
UNKNOWN_TOKENIZER = "pre-tokenizer was not recognized"
"""What llama.cpp's converter says of a tokenizer it does not know."""


@dataclass(frozen=True)
class Exported:
    """A delivered export: the GGUF (relative to the run directory) and its record."""

    run_id: str
    quantize: str
    file: str
    size: int
    record: Path
    verify: dict[str, Any] | None
    """The GGUF's verification against the merged model (``export.json``'s), if it ran."""
    modelfile: str
    """The Modelfile's name, beside the GGUF."""
    chat_problem: str | None
    """Why the Modelfile has no TEMPLATE, when it has none."""


def check_ollama_name(name: str) -> None:
    """Refuse ``--ollama NAME`` that Ollama itself would refuse."""
    try:
        _ollama_name(name)
    except ValueError as error:
        raise UserError(f"--ollama {name}: {error}") from None


def export_id(now: datetime | None = None) -> str:
    return f"export_{(now or datetime.now(UTC)).strftime('%Y%m%d-%H%M%S')}"


def human_size(size: int) -> str:
    """Decimal units as the reference prints them: ``412.3 MB``, from 1000 MB ``1.2 GB``."""
    if size >= 1000**3:
        return f"{size / 1000**3:.1f} GB"
    if size >= 1000**2:
        return f"{size / 1000**2:.1f} MB"
    if size >= 1000:
        return f"{size / 1000:.1f} kB"
    return f"{size} B"


def sequence_len(run_dir: Path) -> int | None:
    """``sequence_len`` of the run's axolotl.yaml, when it has one."""
    try:
        text = files.read_text(run_dir / CONFIG_FILE, CONFIG_FILE) or ""
    except UserError:
        return None
    match = re.search(r"^sequence_len:\s*(\d+)\s*$", text, re.M)
    return int(match.group(1)) if match else None


def modelfile_name(gguf_name: str) -> str:
    """The Modelfile of one GGUF: ``<id>-<TYPE>.Modelfile``, so each type keeps its own."""
    return gguf_name.removesuffix(".gguf") + ".Modelfile"


def modelfile(
    gguf_name: str,
    num_ctx: int | None,
    chat: OllamaChat | None = None,
    system: str | None = None,
) -> str:
    """An Ollama Modelfile for the GGUF beside it: the chat format the child was trained
    with (``TEMPLATE`` and ``PARAMETER stop``), when it could be written, the ``SYSTEM``
    line it was trained with (``system``, written by :func:`system_line`), and its context."""
    lines = [f"FROM ./{gguf_name}"]
    if chat is not None and chat.template is not None:
        lines.append(f'TEMPLATE """{chat.template}"""')
        lines += [f"PARAMETER stop {json.dumps(stop, ensure_ascii=False)}" for stop in chat.stops]
    if system is not None:
        lines.append(system)
    if num_ctx:
        lines.append(f"PARAMETER num_ctx {num_ctx}")
    return "\n".join(lines) + "\n"


def chat_lines(run_dir: Path, model: str) -> OllamaChat:
    """The Modelfile's chat format, from the chat template of the run's model (its
    ``merged/`` first: what was converted)."""
    shown = f"{RUNS_DIR}/{run_dir.name}/{model}"
    template = None
    for sub, where in (("merged", f"{shown}/merged"), ("", shown)):
        template = read_chat_template(run_dir / model / sub if sub else run_dir / model, where)
        if template is not None:
            break
    return ollama_chat(template)


def _write_modelfile(accepted: AcceptedRun, gguf_name: str, dest: Path, chat: OllamaChat) -> str:
    """Write the Modelfile of ``gguf_name`` into ``dest``; its name."""
    run_id = accepted.record.id
    modelfile_file = modelfile_name(gguf_name)
    shown = f"{RUNS_DIR}/{run_id}/{GGUF_DIR}/{modelfile_file}"
    trained = trained_system(accepted.dir / TRAIN_FILE, f"{RUNS_DIR}/{run_id}/{TRAIN_FILE}")
    text = modelfile(gguf_name, sequence_len(accepted.dir), chat, system_line(trained, shown))
    files.write_atomic(dest / modelfile_file, text.encode("utf-8"), shown)
    return modelfile_file


def export_run(
    project: Project,
    hook: Hooks,
    store: RunStore,
    run_id: str,
    *,
    quantize: str | None = None,
    ollama: str | None = None,
    echo: Callable[[str], None],
    label: str = "export",
    keep_machine: bool = False,
    verify: int = VERIFY_PROMPTS,
    max_drift: float | None = None,
) -> Exported:
    """Export run ``run_id`` to GGUF on its target and deliver it home (``keep_machine``: a
    machine made for it is kept), verified on the first ``verify`` eval prompts;
    ``max_drift`` fails it past that mean log-prob drift (``AUTO`` picks the type by it)."""
    accepted = accept_run(store, run_id, "export")
    kind = quantize or project.settings.export.quantize
    name = ollama or project.settings.export.ollama_name
    if kind == AUTO and max_drift is None:
        raise UserError(
            "--quantize auto needs --max-drift X: the most mean log-probability drift (nats "
            "a token) a type of the ladder may show"
        )
    prompts, unverified = _verify_prompts(project, accepted.dir, verify, kind, max_drift)
    job_id = export_id()
    secrets = hub_secrets(project)  # a token that cannot be handed over fails before a pod
    with open_target(
        project, hook, accepted.record, purpose=label, keep_machine=keep_machine
    ) as target:
        shown_kind = (
            f"auto (the smallest of {', '.join(LADDER)} within --max-drift {max_drift})"
            if kind == AUTO
            else kind
        )
        echo(
            f"export: {job_id}: {RUNS_DIR}/{run_id}/{accepted.model} to GGUF {shown_kind} on "
            f"target `{accepted.record.target}`"
        )
        if unverified is not None:
            logger.warning(f"export: {unverified}: the GGUF is not verified")
        try:
            exported = _export_on_target(
                project, target, accepted, job_id, kind, secrets, prompts, max_drift
            )
        except KeyboardInterrupt as interrupt:
            raise Interrupted(
                f"interrupted: export {job_id} of run {run_id} cancelled", signal_of(interrupt)
            ) from None
    gguf = accepted.dir / exported.file
    echo(
        f"{label}: GGUF in {RUNS_DIR}/{run_id}/{exported.file} ({exported.quantize}, "
        f"{human_size(exported.size)}), Modelfile beside it"
    )
    if exported.verify is not None:
        echo(f"{label}: {verified_line(exported.verify)}")
    if exported.chat_problem is not None:
        logger.warning(
            f"{label}: {exported.chat_problem}; {exported.modelfile} has no TEMPLATE, so Ollama "
            "uses the template it recognizes in the GGUF, or else the bare prompt"
        )
    _ollama(gguf.parent, run_id, name, exported.modelfile, echo, label)
    return exported


def verified_line(check: dict[str, Any]) -> str:
    """The summary of a verification, as ``export`` prints it."""
    agreement, drift = check.get("token_agreement"), check.get("mean_logprob_drift")
    return (
        f"verified on {check.get('prompts')} eval prompts ({check.get('tokens')} tokens, "
        "greedy): token agreement "
        f"{f'{agreement:.1%}' if isinstance(agreement, int | float) else '-'}, mean "
        f"log-prob drift {f'{drift:.4f}' if isinstance(drift, int | float) else '-'} nats a "
        "token (GGUF under llama.cpp against the merged model under transformers)"
    )


def _verify_prompts(
    project: Project, run_dir: Path, count: int, kind: str, max_drift: float | None
) -> tuple[bytes | None, str | None]:
    """The ``{id, messages}`` lines of the first ``count`` eval prompts, or None when the
    export is not verified (``count`` 0, or no eval data: why, unless a check needs it)."""
    if count <= 0:
        if kind == AUTO or max_drift is not None:
            raise UserError("--quantize auto and --max-drift verify the GGUF: --verify 0 cannot")
        return None, None
    try:
        questions = eval_questions(project, run_dir, count)
    except NoEvalQuestions as error:
        unverified = f"{error.shown} has no question with an answer"
        if kind == AUTO or max_drift is not None:
            raise UserError(
                f"{unverified}: --quantize auto and --max-drift verify the GGUF on eval prompts"
            ) from None
        return None, unverified
    lines = [
        json.dumps({"id": q["id"], "messages": q["messages"]}, ensure_ascii=False) + "\n"
        for q in questions
    ]
    return "".join(lines).encode("utf-8"), None


def _export_on_target(  # noqa: PLR0917 - private, called once
    project: Project,
    target: TargetRun,
    accepted: AcceptedRun,
    job_id: str,
    kind: str,
    secrets: dict[str, str],
    prompts: bytes | None,
    max_drift: float | None,
) -> Exported:
    run = target.run  # its directory there (a pod made for this export has its own)
    q = scripts.q
    job_dir = f"{run.remote_dir}/exports/{job_id}"
    host = target.shell.host
    local_job = accepted.dir / "exports" / job_id
    shown = f"{RUNS_DIR}/{run.id}/exports/{job_id}"
    files.mkdir_nofollow(local_job, shown, levels=2)
    target.ensure_inputs(accepted.dir, (accepted.model, CONFIG_FILE))
    host.check(f"mkdir -p {q(job_dir)}\n")
    host.write_file(f"{job_dir}/{SCRIPT}", target_file(SCRIPT))
    toolchain = target.ensure_toolchain(dict(project.env))
    command = (
        f"{target.shell.python} {SCRIPT} {q('../../' + accepted.model)} "
        f"{q('../../' + CONFIG_FILE)} {q(kind)} {q('gguf/' + run.id + '-{TYPE}.gguf')} "
        f"{q(toolchain)} {q(project.settings.project.name)}"
    )
    if prompts is not None:
        host.write_file(f"{job_dir}/{PROMPTS_FILE}", prompts)
        count = len(prompts.splitlines())
        command += f" --verify {PROMPTS_FILE} --verify-count {count}"
    if max_drift is not None:
        command += f" --max-drift {max_drift!r}"
    logger.info(f"export: {job_id}: merging, converting and quantizing on the target (export.log)")
    done = target.run_script(job_dir, command, "export.log", timeout=6 * HOUR_S, secrets=secrets)
    if done.code != 0:
        _fetch_log(target, job_dir, local_job)
        raise UserError(
            f"export {job_id} of run {run.id} failed: {_failure(done.stderr, done.code)}; the "
            f"job's log is {shown}/export.log"
        )
    result = _result(target, job_dir, local_job)
    chosen = str(result.get("quantize") or kind)
    gguf_name = f"{run.id}-{chosen}.gguf"
    dest = accepted.dir / GGUF_DIR
    files.mkdir_nofollow(dest, f"{RUNS_DIR}/{run.id}/{GGUF_DIR}", levels=2)
    if target.same_place(accepted.dir):
        source = accepted.dir / "exports" / job_id / "gguf" / gguf_name
        if not source.is_file():
            raise UserError(f"the export left no GGUF file in {RUNS_DIR}/{run.id}/exports/{job_id}")
        source.replace(dest / gguf_name)
        shutil.rmtree(source.parent, ignore_errors=True)
    else:
        _fetch_gguf(target, job_dir, gguf_name, dest, run.id, job_id)
        host.run(f"rm -rf {q(job_dir + '/gguf')}\n")
    _fetch_log(target, job_dir, local_job)
    gguf = dest / gguf_name
    size = gguf.stat().st_size
    chat = chat_lines(accepted.dir, accepted.model)
    modelfile_file = _write_modelfile(accepted, gguf_name, dest, chat)
    file = f"{GGUF_DIR}/{gguf_name}"
    check = result.get("verify") if isinstance(result.get("verify"), dict) else None
    record: dict[str, Any] = {
        "quantize": chosen,
        "llama_cpp": LLAMA_CPP,
        "file": file,
        "sha256": sha256_file(gguf),
        "size": size,
        "created": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "verify": check,
    }
    if kind == AUTO:
        record["auto"] = {"max_drift": max_drift, "tried": result.get("tried", [])}
    text = json.dumps(record, indent=2) + "\n"
    files.write_atomic(local_job / EXPORT_FILE, text.encode("utf-8"), f"{shown}/{EXPORT_FILE}")
    return Exported(
        run.id, chosen, file, size, local_job / EXPORT_FILE, check, modelfile_file, chat.problem
    )


def _failure(stderr: bytes, code: int) -> str:
    """What the export script said last, what to do about a tokenizer llama.cpp lacks."""
    lines = stderr.decode("utf-8", "replace").strip().splitlines()
    errors = [line[len("error: ") :] for line in lines if line.startswith("error: ")]
    detail = errors[-1] if errors else (lines[-1] if lines else f"exit {code}")
    if UNKNOWN_TOKENIZER in detail:
        return (
            "llama.cpp's converter does not know this model's tokenizer (it recognizes a "
            f"byte-level BPE pre-tokenizer by its hash, and {LLAMA_CPP} has no hash for this "
            "one): train from a base model whose tokenizer llama.cpp supports (a byte-fallback "
            "BPE, as the quickstart's tiny model has, or a known family)"
        )
    return detail


def _result(target: TargetRun, job_dir: str, local_job: Path) -> dict[str, Any]:
    """``export-result.json`` of the job: the type chosen and its verification."""
    if target.same_place(local_job.parents[1]):
        path = local_job / RESULT_FILE
        data = path.read_bytes() if path.is_file() else b"{}"
    else:
        data = target.shell.host.read_range(f"{job_dir}/{RESULT_FILE}", 0, 1 << 20)
    try:
        found = json.loads(data or b"{}")
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def hub_secrets(project: Project) -> dict[str, str]:
    """``HF_TOKEN`` for the merge, when the project has a token: a gated base model is
    downloaded on the target with it, as in training."""
    token = project.settings.hf_token
    if token is None:
        return {}

    value = resolve_secret(token, "hf_token", project.env).get_secret_value()
    if "\n" in value or "\r" in value:
        raise UserError(f"{HF_TOKEN} cannot be handed to the target: it holds a line break")
    return {HF_TOKEN: value}


def _fetch_gguf(  # noqa: PLR0917 - private, called once
    target: TargetRun, job_dir: str, name: str, dest: Path, run_id: str, job_id: str
) -> None:
    listing = target.shell.host.run(f"ls {scripts.q(job_dir + '/gguf')}\n").text().split()
    if name not in listing:
        raise UserError(f"the export left no GGUF file in {RUNS_DIR}/{run_id}/exports/{job_id}")
    staging = dest / f".{name}.part"
    staging.mkdir(exist_ok=True)
    try:
        target.shell.host.download(f"{job_dir}/gguf", [name], staging)
        expected = target.sha256(f"{job_dir}/gguf/{name}")
        if sha256_file(staging / name) != expected:
            raise UserError(f"the GGUF of export {job_id} changed on its way home: export again")
        (staging / name).replace(dest / name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _fetch_log(target: TargetRun, job_dir: str, local_job: Path) -> None:
    if target.same_place(local_job.parents[1]):
        return
    data = target.shell.host.read_range(f"{job_dir}/export.log", 0, 1 << 20)
    files.write_atomic(local_job / "export.log", data, "export.log")


def _ollama(  # noqa: PLR0917 - private, called once
    gguf_dir: Path,
    run_id: str,
    name: str | None,
    modelfile_file: str,
    echo: Callable[[str], None],
    label: str,
) -> None:
    where = f"{RUNS_DIR}/{run_id}/{GGUF_DIR}"
    if name is None:
        echo(
            f"{label}: run it with Ollama after `cd {where} && ollama create <name> -f "
            f"{modelfile_file}`"
        )
        return
    command = f"ollama create {name} -f {modelfile_file}"
    shown = f"cd {where} && {command}"
    ollama = shutil.which("ollama")
    if ollama is None:
        logger.warning(f"ollama is not on PATH: create the model with `{shown}`")
        return
    done = subprocess.run(
        [ollama, "create", name, "-f", modelfile_file],
        cwd=gguf_dir,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        logger.warning(
            f"ollama create {name} failed: {lines[-1] if lines else done.returncode}; "
            f"create it with `{shown}`"
        )
        return
    echo(f"{label}: Ollama model {name} created: `ollama run {name}`")
