"""The runs of a project under ``runs/``: creating, saving, loading and listing records."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from loguru import logger
from pydantic import ValidationError

from overbrainer import files
from overbrainer.errors import UserError
from overbrainer.job.layout import RECORD
from overbrainer.job.record import RunRecord
from overbrainer.project import RUNS_DIR, runs_dir
from overbrainer.runs.ids import base_id, candidates, check_run_id, is_valid_id
from overbrainer.runs.record_file import not_this_run, record_data


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
        from overbrainer.runs.resolve import LATEST, resolve_run_id

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
        directory = self.run_dir(run_id)
        path = directory / RECORD
        shown = f"{RUNS_DIR}/{run_id}/{RECORD}"
        if not path.exists() and not path.is_symlink():
            raise UserError(f"no run {run_id} in {RUNS_DIR}/")
        data = record_data(path, shown, f"no run {run_id} in {RUNS_DIR}/")
        try:
            record = RunRecord.model_validate(data)
        except ValidationError as error:
            first = error.errors(include_url=False, include_input=False)[0]
            where = ".".join(str(part) for part in first["loc"]) or "record"
            raise UserError(
                f"{shown} is not a valid run record ({where}: {first['msg']})"
            ) from None
        if record.id != run_id:
            raise not_this_run(shown)
        return record

    def list(self) -> list[RunRecord]:
        """Every readable run, oldest first; unreadable ones are skipped with a warning."""
        if not self.root.is_dir():
            return []
        records = []
        for entry in os.scandir(self.root):
            if not is_valid_id(entry.name) or not entry.is_dir(follow_symlinks=False):
                continue
            if not os.path.exists(os.path.join(entry.path, RECORD)):
                continue
            try:
                records.append(self.load(entry.name))
            except UserError as error:
                logger.warning(f"skipping run {entry.name}: {error}")
        return sorted(records, key=lambda record: (record.created, record.id))
