"""Keeping secrets out of what is printed: known values and secret-shaped text become ``***``."""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit, urlunsplit

MASK = "***"

SECRET_WORDS = frozenset({
    "key", "apikey", "token", "secret", "password", "passwd", "pwd", "sig", "signature",
    "credential", "credentials", "auth", "authorization", "jwt",
})
"""Words that make a name (of a query parameter) hold a secret: ``api_key``, ``accessToken``,
``X-Amz-Signature``; but not ``max_tokens`` or ``keyboard``."""

_known: set[str] = set()
_longest_first: list[str] = []
"""``_known``, the longest first (a secret inside another is masked after it)."""

_PATTERNS = [
    # Provider, Hugging Face and Runpod keys by their shape.
    (re.compile(r"\b(?:sk|pk|rk)-[A-Za-z0-9_-]{16,}"), MASK),
    (re.compile(r"\bhf_[A-Za-z0-9]{16,}"), MASK),
    (re.compile(r"\brpa_[A-Za-z0-9]{16,}"), MASK),
    (re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/-]{8,}=*"), rf"\g<1>{MASK}"),
    # NAME=value where the name says it holds a secret; a quoted value is hidden whole. An
    # upper-case name (an environment variable) counts when it contains the word anywhere;
    # any other name when one of its _-separated parts is the word, so that
    # `tokenizers==0.23` or `max_tokens=16` stay readable.
    (
        re.compile(
            r"""\b([A-Z0-9_]*(?:KEY|TOKEN|SECRET|PASSWORD)[A-Z0-9_]*=)("[^"]*"|'[^']*'|\S+)"""
        ),
        rf"\g<1>{MASK}",
    ),
    (
        re.compile(
            r"""(?i)\b((?:[a-z0-9]+_)*(?:apikey|key|token|secret|password|passwd)(?:_[a-z0-9]+)*=)"""
            r"""("[^"]*"|'[^']*'|[^\s=]\S*)"""
        ),
        rf"\g<1>{MASK}",
    ),
    (
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?-----END [A-Z0-9 ]*PRIVATE KEY-----",
            re.S,
        ),
        f"-----PRIVATE KEY {MASK}-----",
    ),
]
_NEEDS = ("k-", "hf_", "rpa_", "bearer", "=", "=", "-----BEGIN")
"""For each of ``_PATTERNS``, a text that any match holds (``bearer`` in lower case): a
pattern is only searched for in a text holding it. Most texts hold none, and a reply is
redacted on every request of a stage (six regex passes were a quarter of its CPU)."""
_PEM_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----")
_PEM_END = re.compile(r"-----END [A-Z0-9 ]*PRIVATE KEY-----")
# C0 controls but tab and newline, DEL, and the C1 controls (U+009B is a CSI on its own).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def secret_name(name: str) -> bool:
    """Whether ``name`` says its value is a secret: one of its words (split at
    non-alphanumerics and at camelCase humps) is one of ``SECRET_WORDS``."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return any(word in SECRET_WORDS for word in re.split(r"[^a-z0-9]+", spaced.lower()))


def mask_url(url: str) -> str:
    """``url`` as it may be printed: any user and password, and the values of query
    parameters whose names say they are secrets, become ``***``."""
    bare = "//" not in url
    try:
        parts = urlsplit(f"//{url}" if bare else url)
    except ValueError:
        return MASK
    host = parts.netloc.rpartition("@")[2]
    netloc = f"{MASK}@{host}" if "@" in parts.netloc else host
    query = "&".join(
        f"{name}={MASK}" if sep and secret_name(unquote(name)) else f"{name}{sep}{value}"
        for name, sep, value in (item.partition("=") for item in parts.query.split("&"))
    )
    shown = urlunsplit(parts._replace(netloc=netloc, query=query))
    return shown.removeprefix("//") if bare else shown


def register_secret(value: str) -> None:
    """Remember a secret value so every later redaction hides it."""
    if len(value) >= 4 and value not in _known:
        _known.add(value)
        _longest_first[:] = sorted(_known, key=len, reverse=True)


def _may_match(text: str) -> bool:
    """Whether ``text`` holds one of ``_NEEDS``: one expression for the text that holds
    none (most), where the loop over the patterns cost twice as much."""
    return (
        "k-" in text or "hf_" in text or "rpa_" in text or "=" in text
        or "-----BEGIN" in text or "bearer" in text.lower()
    )


def redact(text: str) -> str:
    """``text`` with every known secret and secret-shaped token masked."""
    for value in _longest_first:
        if value in text:
            text = text.replace(value, MASK)
    if not _may_match(text):
        return text
    lowered = None
    for (pattern, replacement), needed in zip(_PATTERNS, _NEEDS, strict=True):
        if needed == "bearer":
            lowered = text.lower()
            if needed not in lowered:
                continue
        elif needed not in text:
            continue
        text = pattern.sub(replacement, text)
    return text


class LineRedactor:
    """Redacts a log line by line, hiding the inside of a private key block as well."""

    def __init__(self) -> None:
        self._in_key = False

    def line(self, text: str) -> str:
        if self._in_key:
            if _PEM_END.search(text):
                self._in_key = False
            return MASK
        if _PEM_BEGIN.search(text) and not _PEM_END.search(text):
            self._in_key = True
            return MASK
        return redact(text)


# Every C0 and C1 control (line breaks too), DEL, and the Unicode marks that reorder or
# break lines (bidi overrides and isolates, line and paragraph separators).
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def escape_controls(text: str, keep: str = "") -> str:
    """``text`` with each control character shown as an escape (``\\x1b``, ``\\u202e``),
    but those of ``keep``: a name read from a file cannot move the cursor, colour the
    screen, or print a line of its own."""

    def escaped(match: re.Match[str]) -> str:
        char = match.group()
        if char in keep:
            return char
        code = ord(char)
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"

    return _UNPRINTABLE.sub(escaped, text)


def printable(line: str) -> str:
    """``line`` as a terminal would leave it, control characters shown as escapes."""
    if "\r" in line:
        shown = [part for part in line.split("\r") if part]
        line = shown[-1] if shown else ""
    line = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", line)  # colours and cursor moves
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", line)
