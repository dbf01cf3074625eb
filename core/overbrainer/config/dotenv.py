"""A strict ``.env`` reader: ``KEY=value`` lines, quotes, comments, ``export``.

A line it cannot read is an error naming only its number: the line may hold a secret.
"""

from __future__ import annotations

import re
from pathlib import Path

from overbrainer import files
from overbrainer.errors import UserError

_ASSIGN = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*")
_LINE_END = re.compile(r"\r\n|\r|\n")
"""What ends a line of a .env: not ``str.splitlines``'s set, which also splits at U+2028,
U+0085 or a form feed, characters a value (a key, a password) may hold."""
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "$": "$"}


class DotenvError(UserError):
    def __init__(self, line: int) -> None:
        super().__init__(f"cannot parse .env (syntax error at line {line})")
        self.line = line


def parse_dotenv(text: str) -> dict[str, str]:
    """The variables ``text`` assigns, in order; later assignments win."""
    values: dict[str, str] = {}
    lines = _LINE_END.split(text)
    index = 0
    while index < len(lines):
        number = index + 1
        line = lines[index]
        index += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _ASSIGN.match(line)
        if match is None:
            raise DotenvError(number)
        key, rest = match.group(1), line[match.end() :]
        if rest[:1] in ("'", '"'):
            quote = rest[0]
            body = rest[1:]
            # A quoted value may span lines; it must close, and nothing but a comment may
            # follow the closing quote.
            while (end := _closing(body, quote)) is None:
                if index >= len(lines):
                    raise DotenvError(number)
                body += "\n" + lines[index]
                index += 1
            tail = body[end + 1 :].strip()
            if tail and not tail.startswith("#"):
                raise DotenvError(number)
            raw = body[:end]
            values[key] = _unescape(raw) if quote == '"' else raw
        else:
            values[key] = re.split(r"\s+#", rest, maxsplit=1)[0].strip()
    return values


def _closing(body: str, quote: str) -> int | None:
    escaped = False
    for position, char in enumerate(body):
        if escaped:
            escaped = False
        elif char == "\\" and quote == '"':
            escaped = True
        elif char == quote:
            return position
    return None


def _unescape(raw: str) -> str:
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), "\\" + m.group(1)), raw)


def read_dotenv(path: Path) -> dict[str, str]:
    """The variables of the ``.env`` file at ``path``; none when it does not exist."""
    data = files.read_regular(path, ".env", files.RECORD_LIMIT)  # a FIFO would block
    if data is None:
        return {}
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise DotenvError(data[: error.start].count(b"\n") + 1) from None
    return parse_dotenv(text)
