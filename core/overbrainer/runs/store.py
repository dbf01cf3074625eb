"""The runs of a project under ``runs/``: creating, saving, loading and listing records."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from loguru import logger
from pydantic import ValidationError

from overbrainer import files
from overbrainer.errors import UserError
from overbrainer.job.layout import RECORD
from overbrainer.job.record import RunRecord
from overbrainer.project import RUNS_DIR, runs_dir
from overbrainer.runs.ids import base_id, candidates, check_run_id
from overbrainer.runs.record_file import NotARecord, each_record, load_record
from overbrainer.runs.resolve import LATEST, resolve_run_id


class RunStore:
    """``runs/`` of the project at ``project_dir``. Every id is checked before it is used."""

    def __init__(self, project_dir: Path) -> None:
        self.project_dir = project_dir
        self.root = runs_dir(project_dir)

    def run_dir(self, run_id: str) -> Path:
        path = self.root / check_run_id(run_id)
        if path.is_symlink():
            raise UserError(f"{RUNS_DIR}/{run_id} is a symbolic link: refusing to use it")
        return path

    def resolve(self, text: str | None, *, known_only: bool = True) -> str:
        """The run id ``text`` names (``latest``, an id, a unique prefix); None: the latest."""
        return resolve_run_id(self.root, text or LATEST, known_only=known_only)

    def create(
        self,
        project_name: str,
        target: str,
        claim: Callable[[str], str | None],
        now: datetime | None = None,
    ) -> RunRecord:
        """A new ``preparing`` run, its directory made here and claimed on the target.

        ``claim(run_id)`` reserves the id on the target and returns the remote directory,
        or "" when another owner holds that id there: the next suffix is tried. None means
        no plugin could answer.
        """
        now = now or datetime.now(UTC)
        base = base_id(project_name, now)
        self.root.mkdir(parents=True, exist_ok=True)
        last = base
        for run_id in candidates(base):
            last = run_id
            directory = self.root / run_id
            try:
                directory.mkdir()
            except FileExistsError:
                continue
            try:
                remote = claim(run_id)
            except BaseException:
                # A target may have left its own record there (runpod's pod.json, with
                # the pod's fate and spend): the directory then stays.
                with contextlib.suppress(OSError):
                    directory.rmdir()
                raise
            if remote is None:
                directory.rmdir()
                raise UserError(f"no plugin can reserve a run directory on target `{target}`")
            if not remote:
                directory.rmdir()
                continue
            record = RunRecord(
                id=run_id,
                target=target,
                created=now.strftime("%Y-%m-%dT%H:%M:%SZ"),
                remote_dir=remote,
            )
            self.save(record)
            return record
        raise UserError(f"runs {base} to {last} all exist")

    def save(self, record: RunRecord) -> None:
        """Write ``run.json`` atomically: a unique temporary file, synced, then renamed."""
        directory = self.run_dir(record.id)
        text = json.dumps(record.to_json(), indent=2) + "\n"
        files.write_atomic(
            directory / RECORD, text.encode("utf-8"), f"{RUNS_DIR}/{record.id}/{RECORD}"
        )

    def load(self, run_id: str) -> RunRecord:
        """The record of ``run_id``, or a ``UserError`` saying why there is none."""
        path = self.run_dir(run_id) / RECORD
        missing = f"no run {run_id} in {RUNS_DIR}/"
        if not path.exists() and not path.is_symlink():
            raise UserError(missing)
        return load_record(path.parent, run_id, missing, _validated)

    def list(self) -> list[RunRecord]:
        """Every readable run, oldest first; unreadable ones are skipped with a warning."""
        return each_record(self.root, lambda _, run_id: self.load(run_id), logger.warning)


def _validated(data: dict[str, Any]) -> RunRecord:
    """``data`` as a ``RunRecord``; ``NotARecord`` naming the first field pydantic refuses."""
    try:
        return RunRecord.model_validate(data)
    except ValidationError as error:
        first = error.errors(include_url=False, include_input=False)[0]
        where = ".".join(str(part) for part in first["loc"]) or "record"
        raise NotARecord(f"{where}: {first['msg']}") from None
