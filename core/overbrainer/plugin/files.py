"""Files as the core reads and writes them, for a target that keeps or brings files home.

- Project files (:mod:`overbrainer.files`): ``read_regular`` (a regular file only, within
  a bound), ``write_atomic`` (rename, never through a link), ``open_append``
  (``O_NOFOLLOW``), ``mkdir_nofollow`` and ``own_path`` (a path from a record, checked to
  be inside a directory).
- The manifest of what a job brings home: ``parse_manifest``, ``select``, ``covered``,
  ``manifest_of``, ``verify``, ``sha256_file``, ``Manifest``, ``Entry``, and
  ``collect_directory`` for a job directory this machine can read; the errors
  ``MissingArtifact`` and ``ArtifactMismatch``.
- Metric lines: ``complete_lines``, ``parse_event``.
- What a run's machines cost, for the Prometheus endpoint: ``write_spend`` and
  ``MachineSpend`` (``layout.TARGET_SPEND``, beside ``target.note``).
- Redaction, for what a plugin prints or keeps of a machine's own logs: ``redact``,
  ``LineRedactor`` (a private key block across lines), ``register_secret`` and
  ``escape_controls`` (a line stays one line, with no terminal control).
"""

from __future__ import annotations

from overbrainer.errors import ArtifactMismatch, MissingArtifact
from overbrainer.files import mkdir_nofollow, open_append, own_path, read_regular, write_atomic
from overbrainer.job.manifest import (
    Entry,
    Manifest,
    collect_directory,
    covered,
    manifest_of,
    parse_manifest,
    select,
    sha256_file,
    verify,
)
from overbrainer.job.metrics import complete_lines, parse_event
from overbrainer.job.spend import MachineSpend, write_spend
from overbrainer.redact import LineRedactor, escape_controls, redact, register_secret

__all__ = [
    "ArtifactMismatch",
    "Entry",
    "LineRedactor",
    "MachineSpend",
    "Manifest",
    "MissingArtifact",
    "collect_directory",
    "complete_lines",
    "covered",
    "escape_controls",
    "manifest_of",
    "mkdir_nofollow",
    "open_append",
    "own_path",
    "parse_event",
    "parse_manifest",
    "read_regular",
    "redact",
    "register_secret",
    "select",
    "sha256_file",
    "verify",
    "write_atomic",
    "write_spend",
]
