"""Prompt templates: ``prompts/<name>`` in the project, else the built-in default.

Templates are Jinja with undefined variables as errors, read when a stage starts (so an edit
applies from the next stage on) and checked before any request is made.

A project may come from anyone, so its templates are rendered in jinja's immutable sandbox:
no attribute starting with ``_`` (the way from ``cycler`` to ``os``), no method that changes
a value, and no other file (``include``, ``import`` and ``extends`` find nothing).
"""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any, NoReturn

import jinja2
import jinja2.meta
import jinja2.sandbox

from overbrainer.errors import UserError

DEFAULTS = Path(__file__).parent / "prompts"
PROMPTS_DIR = "prompts"

VARIABLES: dict[str, frozenset[str]] = {
    "subtopics.txt": frozenset({"topic", "description", "count"}),
    "questions.txt": frozenset({"topic", "description", "subtopic", "count", "accepted"}),
    "answer_system.txt": frozenset({"topic", "description"}),
    "judge.txt": frozenset({"question", "answer_a", "answer_b"}),
}


class _NoOtherFiles(jinja2.BaseLoader):
    """What ``include``, ``import`` and ``extends`` load from: nothing."""

    def get_source(self, environment: jinja2.Environment, template: str) -> NoReturn:
        raise jinja2.TemplateNotFound(template, "a template cannot include or import another")


class Templates:
    """The templates ``names`` as the project at ``project_dir`` has them now."""

    def __init__(self, project_dir: Path, *names: str) -> None:
        # Prompts are plain text sent to a model: there is no HTML to escape.
        self._jinja = jinja2.sandbox.ImmutableSandboxedEnvironment(
            undefined=jinja2.StrictUndefined,
            keep_trailing_newline=True,
            autoescape=False,
            loader=_NoOtherFiles(),
        )
        self._templates = {name: self._load(project_dir, name) for name in names}

    def render(self, name: str, **variables: Any) -> str:
        try:
            return self._templates[name].render(**variables).strip()
        except jinja2.TemplateError as error:
            line = _template_line(error, name)
            where = f"line {line}: " if line is not None else ""
            raise UserError(f"invalid template {name}: {where}{error.message}") from None

    def _load(self, project_dir: Path, name: str) -> jinja2.Template:
        override = project_dir / PROMPTS_DIR / name
        path = override if override.is_file() else DEFAULTS / name
        if path == override and not path.resolve().is_relative_to(project_dir.resolve()):
            # What a template holds is sent to the provider: never a file from elsewhere.
            raise UserError(f"invalid template {name}: a symbolic link leading out of the project")
        try:
            source = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            reason = "not UTF-8 text" if isinstance(error, UnicodeDecodeError) else error.strerror
            raise UserError(f"invalid template {name}: {reason}") from None
        try:
            tree = self._jinja.parse(source)
        except jinja2.TemplateSyntaxError as error:
            where = f"line {error.lineno}: {error.message}"
            raise UserError(f"invalid template {name}: {where}") from None
        unknown = sorted(jinja2.meta.find_undeclared_variables(tree) - VARIABLES[name])
        if unknown:
            raise UserError(f"invalid template {name}: undefined variable `{unknown[0]}`")
        code = self._jinja.compile(source, name=name, filename=name)
        return self._jinja.template_class.from_code(
            self._jinja, code, self._jinja.make_globals(None)
        )


def _template_line(error: jinja2.TemplateError, name: str) -> int | None:
    """The line of the template ``name`` where rendering failed: jinja rewrites the
    traceback so that its frames point into the template, by its file name."""
    lines = [
        line
        for frame, line in traceback.walk_tb(error.__traceback__)
        if frame.f_code.co_filename == name
    ]
    return lines[-1] if lines else None
