"""The untrained base model, served as its child is: a GGUF made from ``base_model`` the way
export makes the child's (same converter, same quantization type, on the run's target), and
its answers, both kept per base model in ``.overbrainer/bases/<name>-<key>/`` for later
compares (a base model does not change; the answers are keyed by the prompt and the serving
settings, so a new question is asked and an old one is not).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import xxhash

from overbrainer import files
from overbrainer.after.judge import records_by_id
from overbrainer.after.target_run import TargetRun
from overbrainer.after.toolchain import LLAMA_CPP, target_file
from overbrainer.errors import UserError
from overbrainer.job import scripts
from overbrainer.job.layout import CONFIG_FILE
from overbrainer.job.manifest import sha256_file
from overbrainer.train.inputs import model_identity

BASES = "bases"
RECORD = "base.json"
SCRIPT = "export_gguf.py"
LOG = "base_export.log"
RESULT = "export-result.json"
"""What the export script writes beside its GGUF (the type chosen): not kept for a base."""
HOUR_S = 3600


class BaseUnavailable(UserError):
    """The base model's GGUF cannot be made (no base model, no toolchain, a converter that
    fails): a compare that was not asked for the base says so and goes on without it."""


@dataclass(frozen=True)
class BaseCache:
    """Where a base model's GGUF (of one quantization type) and its answers are kept."""

    directory: Path
    shown: str
    base_model: str
    quantize: str

    @classmethod
    def of(cls, state_dir: Path, base_model: str, quantize: str) -> BaseCache:
        """The cache of ``base_model`` (by its identity: a hub id, or a directory's content)
        quantized to ``quantize`` by this llama.cpp."""
        identity = model_identity(base_model)
        key = xxhash.xxh3_64_hexdigest(f"{identity}\x1f{quantize}\x1f{LLAMA_CPP}".encode())
        name = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(base_model.rstrip("/")).name)[:40] or "base"
        directory = state_dir / BASES / f"{name}-{key}"
        return cls(directory, f".overbrainer/{BASES}/{directory.name}", base_model, quantize)

    @property
    def gguf_name(self) -> str:
        return f"base-{self.quantize}.gguf"

    def record(self) -> dict[str, Any] | None:
        """``base.json`` when its GGUF is there, whole (its size as recorded)."""
        try:
            data = json.loads(files.read_text(self.directory / RECORD, RECORD) or "")
        except (UserError, ValueError):
            return None
        gguf = self.directory / self.gguf_name
        if not isinstance(data, dict) or not gguf.is_file() or gguf.is_symlink():
            return None
        return data if gguf.stat().st_size == data.get("size") else None

    def keep(self, made: Path) -> dict[str, Any]:
        """Keep the GGUF ``made`` (moved in) and write its record."""
        files.mkdir_nofollow(self.directory, self.shown, levels=3)
        dest = self.directory / self.gguf_name
        made.replace(dest)
        record = {
            "base_model": self.base_model,
            "quantize": self.quantize,
            "llama_cpp": LLAMA_CPP,
            "file": self.gguf_name,
            "sha256": sha256_file(dest),
            "size": dest.stat().st_size,
            "created": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        text = json.dumps(record, indent=2) + "\n"
        files.write_atomic(self.directory / RECORD, text.encode(), f"{self.shown}/{RECORD}")
        return record

    def answers_file(self, serving: str) -> Path:
        return self.directory / f"answers-{serving}.jsonl"

    def answers(self, serving: str) -> dict[str, dict[str, Any]]:
        """The kept answers served with ``serving`` (see :func:`serving_key`), by prompt key."""
        return records_by_id(self.answers_file(serving), "prompt")

    def add_answers(self, serving: str, records: list[dict[str, Any]]) -> None:
        """Append answers (each with its ``prompt`` key) to those kept."""
        if not records:
            return
        files.mkdir_nofollow(self.directory, self.shown, levels=3)
        path = self.answers_file(serving)
        fd = files.open_append(path, f"{self.shown}/{path.name}")
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write("".join(json.dumps(record) + "\n" for record in records))


def prompt_key(messages: list[dict[str, Any]]) -> str:
    """What a kept answer answered: the messages asked, hashed."""
    return xxhash.xxh3_64_hexdigest(json.dumps(messages, sort_keys=True).encode("utf-8"))


def serving_key(sha256: str, n_ctx: int, max_tokens: int, temperature: float) -> str:
    """The GGUF and the settings an answer was served with: another of them, other answers."""
    return xxhash.xxh3_64_hexdigest(
        f"{sha256}\x1f{n_ctx}\x1f{max_tokens}\x1f{temperature!r}".encode()
    )


def make_on_target(
    target: TargetRun, env: dict[str, str], job_dir: str, cache: BaseCache, secrets: dict[str, str]
) -> str:
    """Make the base model's GGUF in ``job_dir`` on the target (export's script, without
    verification: there is no merged model to check it against); its name there."""
    host = target.shell.host
    q = scripts.q
    host.write_file(f"{job_dir}/{SCRIPT}", target_file(SCRIPT))
    try:
        toolchain = target.ensure_toolchain(env)
    except UserError as error:
        raise BaseUnavailable(error.message) from None
    name = Path(cache.base_model.rstrip("/")).name or "base"
    command = (
        f"{target.shell.python} {SCRIPT} {q(cache.base_model)} {q('../../' + CONFIG_FILE)} "
        f"{q(cache.quantize)} {q('base-{TYPE}.gguf')} {q(toolchain)} {q(name)}"
    )
    done = target.run_script(job_dir, command, LOG, timeout=6 * HOUR_S, secrets=secrets)
    if done.code != 0:
        lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
        errors = [line[len("error: ") :] for line in lines if line.startswith("error: ")]
        detail = errors[-1] if errors else (lines[-1] if lines else f"exit {done.code}")
        raise BaseUnavailable(f"making its GGUF failed: {detail}")
    host.run(f"rm -f {q(job_dir + '/' + RESULT)} {q(job_dir + '/' + SCRIPT)}\n")
    return cache.gguf_name


def bring_home(
    target: TargetRun, job_dir: str, local_job: Path, cache: BaseCache
) -> dict[str, Any]:
    """Keep the GGUF just made in ``job_dir`` in the cache (downloaded from a remote target,
    checked by its SHA-256); its record."""
    name = cache.gguf_name
    if target.same_place(local_job.parents[1]):
        return cache.keep(local_job / name)
    staging = local_job / f".{name}.part"
    staging.mkdir(exist_ok=True)
    try:
        target.shell.host.download(job_dir, [name], staging)
        if sha256_file(staging / name) != target.sha256(f"{job_dir}/{name}"):
            raise BaseUnavailable("its GGUF changed on its way home")
        return cache.keep(staging / name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
