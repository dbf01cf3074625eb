"""The exception types whose meaning crosses module and plugin boundaries."""

from __future__ import annotations


class UserError(Exception):
    """A problem the user can fix: the CLI prints ``error: <message>`` and exits 1.

    Anything else that escapes a command is a bug and keeps its traceback.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class TransientError(Exception):
    """A failure worth trying again: a dropped connection, a timeout, a busy service.

    While a run is followed the core retries a poll that raises it; anywhere else it is
    reported like a ``UserError``.
    """


class MissingArtifact(UserError):
    """A required artifact is not where the job should have left it."""

    def __init__(self, path: str) -> None:
        super().__init__(f'"{path}" is not on the target')
        self.path = path


class ArtifactMismatch(UserError):
    """Files brought home differ from the manifest they were checked against."""
