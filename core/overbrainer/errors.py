"""The exception types whose meaning crosses module and plugin boundaries, and
SIGTERM's own interrupt."""

from __future__ import annotations

import signal


class UserError(Exception):
    """A problem the user can fix: the CLI prints ``error: <message>`` and exits 1.

    Anything else that escapes a command is a bug and keeps its traceback.
    """

    exit_code = 1

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


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised by the handler the CLI installs: handled wherever Ctrl-C is (a
    stage writes its history line, a run being followed is detached), since a service
    manager or a batch system stops a process this way."""


class Interrupted(UserError):
    """A command stopped by a signal: it exits 128 + the signal's number, 130 for Ctrl-C,
    143 for SIGTERM, as a shell reports it."""

    def __init__(self, message: str, signum: int) -> None:
        super().__init__(message)
        self.exit_code = 128 + signum


class Stopped(Interrupted):
    """A command that runs until Ctrl-C (``watch``) ended that way: its normal end, so the
    CLI says the message without ``error:``; the exit status is still 128 + the signal."""


class InterruptedBeforeJob(UserError):
    """Ctrl-C (or SIGTERM) before a run's job started: nothing runs, so the command fails
    (exit 1), and what sits above a run (``watch``) stops as it does for any interruption."""


class DetachedRun(UserError):
    """Ctrl-C (or SIGTERM) while a started run was followed: not a failure, the job keeps
    running. The CLI prints the message on stdout and exits 0; what sits above a run
    (``watch``, ``run``) stops as it does for any error it does not retry."""

    exit_code = 0


def signal_of(interrupt: KeyboardInterrupt) -> int:
    """The signal behind ``interrupt``: SIGTERM for ``Terminated``, else SIGINT."""
    return signal.SIGTERM if isinstance(interrupt, Terminated) else signal.SIGINT
