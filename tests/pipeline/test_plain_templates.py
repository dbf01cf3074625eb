"""Plain templates, rendered without jinja, come out as jinja renders them."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

from overbrainer.errors import UserError
from overbrainer.pipeline.prompts import DEFAULTS, VARIABLES, PlainTemplate, Templates

PIECES = [
    "text ", "\n", "\r\n", "\r", "{", "}", "{ x }", "}}", "%}", "#}", "{{{ topic }}", "{%",
    "{#", "{{", "{{ topic }}", "{{topic}}", "{{  description  }}", "{{ count }}",
    "{{ accepted }}", "{{ true }}", "{{ topic|upper }}", "{{- topic }}", "{{ topic -}}",
    "{% if description %}", "{%if count%}", "{% endif %}", "{% else %}", "{# note #}",
    "{% if topic %}", "{{ unknown }}", "é ", " ", "\t",
]
VALUES = ["", "ownership", "a {{ b }} c", "None", "line\r\nbreak", 0, 3, None, [], ["x", "y"]]


def jinja_render(templates_dir: Path, source: str, variables: dict[str, object]) -> str:
    """What the jinja path makes of ``source``, or the error it gives."""
    (templates_dir / "prompts").mkdir(exist_ok=True)
    (templates_dir / "prompts" / "questions.txt").write_bytes(source.encode("utf-8"))
    try:
        templates = Templates(templates_dir, "questions.txt")
        templates._templates["questions.txt"] = templates._compile("questions.txt", source)
        return templates.render("questions.txt", **variables)
    except UserError as error:
        return f"error: {error.message}"


def test_plain_templates_render_as_jinja_does(tmp_path: Path):
    generator = random.Random(27)
    plain_seen = 0
    for _ in range(3000):
        source = "".join(generator.choice(PIECES) for _ in range(generator.randint(0, 9)))
        names = sorted(VARIABLES["questions.txt"])
        variables = {n: generator.choice(VALUES) for n in names if generator.random() < 0.9}
        expected = jinja_render(tmp_path, source, variables)
        plain = PlainTemplate.parse(source, VARIABLES["questions.txt"])
        if plain is None:
            continue
        shown = plain.render(variables)
        if shown is None:  # a variable missing: jinja's path says so
            assert expected.startswith("error:"), source
            continue
        plain_seen += 1
        assert shown.strip() == expected, repr(source)
    assert plain_seen > 500  # the generator does reach the plain path


@pytest.mark.parametrize("name", ["answer_system.txt", "subtopics.txt"])
def test_the_built_in_templates_that_are_plain_render_as_with_jinja(tmp_path: Path, name: str):
    source = (DEFAULTS / name).read_text(encoding="utf-8")
    assert PlainTemplate.parse(source, VARIABLES[name]) is not None
    templates = Templates(tmp_path, name)
    compiled = Templates(tmp_path, name)
    compiled._templates[name] = compiled._compile(name, source)
    for description in ("", None, "moves and borrows", "{{ topic }}"):
        variables = {"topic": "ownership", "description": description, "count": 4}
        wanted = {k: v for k, v in variables.items() if k in VARIABLES[name]}
        assert templates.render(name, **wanted) == compiled.render(name, **wanted)


def test_a_plain_template_missing_a_variable_fails_as_jinja_says(tmp_path: Path):
    templates = Templates(tmp_path, "answer_system.txt")
    with pytest.raises(UserError, match=r"invalid template answer_system\.txt: .*'description'"):
        templates.render("answer_system.txt", topic="ownership")


def test_answers_does_not_import_jinja_for_the_built_in_prompt(tmp_path: Path):
    import subprocess

    code = (
        "import sys; from pathlib import Path; from overbrainer.pipeline.prompts import Templates;"
        f"t = Templates(Path({str(tmp_path)!r}), 'answer_system.txt');"
        "print(t.render('answer_system.txt', topic='t', description='d'));"
        "print('jinja2' in sys.modules)"
    )
    shown = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert shown.splitlines()[-1] == "False"
    assert shown.startswith("You are an expert on t (d).")
