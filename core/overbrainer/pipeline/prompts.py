"""Prompt templates: ``prompts/<name>`` in the project, else the built-in default.

Templates are Jinja with undefined variables as errors, read when a stage starts (so an edit
applies from the next stage on) and checked before any request is made.

A project may come from anyone, so its templates are rendered in jinja's immutable sandbox:
no attribute starting with ``_`` (the way from ``cycler`` to ``os``), no method that changes
a value, and no other file (``include``, ``import`` and ``extends`` find nothing); and
within the bounds of :mod:`overbrainer.pipeline.sandbox` on what a render makes and does.

A template of text, ``{{ variable }}`` and ``{% if variable %}…{% endif %}`` alone (the
built-in ``answer_system.txt``) is rendered here as jinja renders it, without importing
jinja: a fifth of ``answers``' start-up.
"""

from __future__ import annotations

import os
import re
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

from overbrainer import files
from overbrainer.errors import UserError

TEMPLATE_LIMIT = 1 << 20
"""The largest template read (1 MiB): what a template holds goes into every prompt."""

if TYPE_CHECKING:
    import jinja2

RENDER_ERRORS = (ArithmeticError, LookupError, TypeError, ValueError, MemoryError, RecursionError)
"""What a template's expressions can raise as they run: its author's error, shown as one."""

DEFAULTS = Path(__file__).parent / "prompts"
PROMPTS_DIR = "prompts"

VARIABLES: dict[str, frozenset[str]] = {
    "subtopics.txt": frozenset({"topic", "description", "count"}),
    "questions.txt": frozenset({"topic", "description", "subtopic", "count", "accepted"}),
    "answer_system.txt": frozenset({"topic", "description"}),
    "judge.txt": frozenset({"question", "answer_a", "answer_b"}),
    "judge_reference.txt": frozenset({"question", "answer_a", "answer_b", "reference"}),
}


_PLAIN_TAG = re.compile(r"\{\{ *([a-z_]+) *\}\}|\{% *if +([a-z_]+) *%\}|\{% *endif *%\}")
_NEWLINE = re.compile(r"\r\n|\r")  # jinja's lexer makes every line break a \n


class PlainTemplate:
    """Text, variables and ``if`` blocks (not nested) of a template, rendered as jinja
    renders them (``str`` of each value, the truth of each condition)."""

    def __init__(self, parts: list[tuple[str, str]]) -> None:
        self.parts = parts
        """``("text", text)``, ``("value", name)``, ``("if", name)`` and ``("endif", "")``."""

    @classmethod
    def parse(cls, source: str, allowed: frozenset[str]) -> PlainTemplate | None:
        """The plain template ``source`` is, or None when it uses anything more of jinja
        (or a variable not ``allowed``): jinja then reads it, and says what is wrong."""
        parts: list[tuple[str, str]] = []
        inside = False
        end = 0
        for tag in _PLAIN_TAG.finditer(source):
            text = source[end : tag.start()]
            if not _plain_text(text) or text.endswith("{"):  # `{{{ x }}` is jinja's
                return None
            parts.append(("text", _NEWLINE.sub("\n", text)))
            value, condition = tag.groups()
            name = value or condition or ""
            if name and name not in allowed:
                return None
            if value:
                parts.append(("value", value))
            elif condition:
                if inside:
                    return None
                inside = True
                parts.append(("if", condition))
            else:
                if not inside:
                    return None
                inside = False
                parts.append(("endif", ""))
            end = tag.end()
        rest = source[end:]
        if inside or not _plain_text(rest):
            return None
        parts.append(("text", _NEWLINE.sub("\n", rest)))
        return cls(parts)

    def render(self, variables: dict[str, Any]) -> str | None:
        """The text, or None when a variable it uses is not given (jinja's error then)."""
        shown: list[str] = []
        skipping = False
        for kind, part in self.parts:
            if kind == "endif":
                skipping = False
            elif skipping:
                continue
            elif kind == "text":
                shown.append(part)
            elif part not in variables:
                return None
            elif kind == "value":
                shown.append(str(variables[part]))
            else:
                skipping = not variables[part]
        return "".join(shown)


def _plain_text(text: str) -> bool:
    return "{{" not in text and "{%" not in text and "{#" not in text


class Templates:
    """The templates ``names`` as the project at ``project_dir`` has them now."""

    def __init__(self, project_dir: Path, *names: str) -> None:
        self._sources: dict[str, str] = {}
        self._templates = {name: self._load(project_dir, name) for name in names}

    def source(self, name: str) -> str:
        """The text of the template ``name`` as it was read (for a key that changes with it)."""
        return self._sources[name]

    def render(self, name: str, **variables: Any) -> str:
        template = self._templates[name]
        if isinstance(template, PlainTemplate):
            shown = template.render(variables)
            if shown is not None:
                return shown.strip()
            template = self._templates[name] = self._compile(name, self._sources[name])
        import jinja2

        # jinja2 only for a template that needs it: a plain one is rendered above.
        from overbrainer.pipeline import sandbox  # noqa: PLC0415 - it imports jinja2

        try:
            return sandbox.render(template, variables).strip()
        except jinja2.TemplateError as error:
            raise self._error(name, error, error.message or str(error)) from None
        except RENDER_ERRORS as error:
            # A template's own mistake ({{ 1/0 }}, {{ "a" + 1 }}), or jinja's sandbox
            # refusing a range past 100,000 items (an OverflowError).
            raise self._error(name, error, f"{type(error).__name__}: {error}") from None

    @staticmethod
    def _error(name: str, error: BaseException, message: str) -> UserError:
        line = _template_line(error, name)
        where = f"line {line}: " if line is not None else ""
        return UserError(f"invalid template {name}: {where}{message}")

    def _load(self, project_dir: Path, name: str) -> jinja2.Template | PlainTemplate:
        override = project_dir / PROMPTS_DIR / name
        if override.is_symlink() and not override.resolve().is_relative_to(
            project_dir.resolve()
        ):
            # What a template holds is sent to the provider: never a file from elsewhere.
            raise UserError(f"invalid template {name}: a symbolic link leading out of the project")
        # Missing: the built-in one; a FIFO, a device or a directory: refused, never replaced.
        fd = files.open_regular(override, f"{PROMPTS_DIR}/{name}")
        try:
            if fd is not None and os.fstat(fd).st_nlink > 1:
                # A hard link can be a file from anywhere on the disk (a key, say).
                raise UserError(
                    f"invalid template {name}: a hard link (it may be a file from outside "
                    "the project): copy it instead"
                )
            if fd is None:
                raw = (DEFAULTS / name).read_bytes()
            else:
                with os.fdopen(fd, "rb") as file:
                    fd = None
                    raw = file.read(TEMPLATE_LIMIT + 1)
            if len(raw) > TEMPLATE_LIMIT:
                raise UserError(f"invalid template {name}: larger than {TEMPLATE_LIMIT} bytes")
            source = raw.decode("utf-8")
        except (OSError, UnicodeDecodeError) as error:
            reason = "not UTF-8 text" if isinstance(error, UnicodeDecodeError) else error.strerror
            raise UserError(f"invalid template {name}: {reason}") from None
        finally:
            if fd is not None:
                os.close(fd)
        self._sources[name] = source
        plain = PlainTemplate.parse(source, VARIABLES[name])
        if plain is not None:
            return plain
        return self._compile(name, source)

    def _compile(self, name: str, source: str) -> jinja2.Template:
        import jinja2
        import jinja2.meta

        from overbrainer.pipeline import sandbox  # noqa: PLC0415 - it imports jinja2

        try:
            tree = sandbox.environment().parse(source)
        except jinja2.TemplateSyntaxError as error:
            where = f"line {error.lineno}: {error.message}"
            raise UserError(f"invalid template {name}: {where}") from None
        unknown = sorted(jinja2.meta.find_undeclared_variables(tree) - VARIABLES[name])
        if unknown:
            raise UserError(f"invalid template {name}: undefined variable `{unknown[0]}`")
        return sandbox.compiled(tree, name)


def _template_line(error: BaseException, name: str) -> int | None:
    """The line of the template ``name`` where rendering failed: jinja rewrites the
    traceback so that its frames point into the template, by its file name."""
    lines = [
        line
        for frame, line in traceback.walk_tb(error.__traceback__)
        if frame.f_code.co_filename == name
    ]
    return lines[-1] if lines else None
