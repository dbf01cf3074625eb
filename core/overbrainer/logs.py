"""Log sinks, set once by the CLI entry point: libraries only call ``logger``.

Lines go to stderr as plain sentences (``warning: …`` for warnings), redacted, coloured only
on a terminal and never with ``NO_COLOR`` set. Standard ``logging`` records (paramiko,
aiohttp) are routed into the same sink.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import TYPE_CHECKING, Any

from overbrainer.errors import UserError
from overbrainer.redact import escape_controls, redact

if TYPE_CHECKING:
    from loguru import Record

LEVELS = ("TRACE", "DEBUG", "INFO", "SUCCESS", "WARNING", "ERROR", "CRITICAL")

_PREFIX = {
    "TRACE": "<dim>trace: </dim>",
    "DEBUG": "<dim>debug: </dim>",
    "WARNING": "<yellow>warning: </yellow>",
    "ERROR": "<red>error: </red>",
    "CRITICAL": "<red>error: </red>",
}


class InterceptHandler(logging.Handler):
    """Gives standard-library log records to loguru, keeping the caller's level."""

    def emit(self, record: logging.LogRecord) -> None:
        logger = _logger()
        try:
            level: str | int = logger.level(record.levelname).name
        except ValueError:
            level = record.levelno
        logger.opt(depth=6, exception=record.exc_info).log(level, record.getMessage())


def _format(record: Record) -> str:
    return _PREFIX.get(record["level"].name, "") + "{message}\n{exception}"


def _escape(record: Any) -> None:
    """Escape the control characters a message quotes (names and ids from files), before
    any colour is added; line breaks stay."""
    record["message"] = escape_controls(record["message"], keep="\n")


def _write(message: str) -> None:
    # Looked up at each write, so a test runner's captured stderr receives it.
    sys.stderr.write(redact(message))


def log_level(level: str | None = None) -> str:
    """``level`` (default ``OVERBRAINER_LOG``, else INFO), checked without loguru: a
    command that defers logging (``runs ls``) still refuses a bad one at once."""
    name = (level or os.environ.get("OVERBRAINER_LOG") or "INFO").upper()
    if name not in LEVELS:
        raise UserError(f"OVERBRAINER_LOG: expected one of {', '.join(LEVELS).lower()}")
    return name


def _logger() -> Any:
    """loguru's logger, imported (the first time) without the stderr sink it adds on its
    own: it is removed at once below, and adding it costs a look-up of the interpreter's
    library paths. Imported here, not at the top: the variable must be set first, and
    a command that defers logging (``runs ls``) imports loguru only to warn."""
    first = "loguru" not in sys.modules and "LOGURU_AUTOINIT" not in os.environ
    if first:
        os.environ["LOGURU_AUTOINIT"] = "0"
    try:
        from loguru import logger  # noqa: PLC0415
    finally:
        if first:
            del os.environ["LOGURU_AUTOINIT"]
    return logger


def configure_logging(level: str | None = None) -> None:
    """Send log lines at ``level`` (default ``OVERBRAINER_LOG``, else INFO) to stderr."""
    logger = _logger()
    name = log_level(level)
    colour = sys.stderr.isatty() and not os.environ.get("NO_COLOR")
    logger.remove()
    logger.configure(patcher=_escape)
    logger.add(_write, level=name, format=_format, colorize=colour, backtrace=False)
    # Third-party libraries speak at WARNING and up unless debugging was asked for.

    stdlib_level = logging.DEBUG if name in ("TRACE", "DEBUG") else logging.WARNING
    logging.basicConfig(handlers=[InterceptHandler()], level=stdlib_level, force=True)
