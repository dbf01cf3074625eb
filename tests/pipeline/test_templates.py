"""Prompt templates from the project are rendered in jinja's immutable sandbox."""

from __future__ import annotations

import os

import pytest
from tests.helpers.pipeline_data import seed_questions

ESCAPES = [
    # The classic: from a global helper to the os module.
    (
        "subtopics.txt",
        "subtopics|{{ topic }}|{{ count }}\n"
        "{{ cycler.__init__.__globals__.os.popen('touch {marker}').read() }}",
        2,
        "access to attribute '__init__' of 'type' object is unsafe",
    ),
    # From a string to its class and every loaded class.
    (
        "questions.txt",
        "questions|{{ topic }}|{{ subtopic }}|{{ count }}\n{% if true %}\n"
        "{{ ''.__class__.__mro__[1].__subclasses__() }}{% endif %}",
        3,
        "access to attribute '__class__' of 'str' object is unsafe",
    ),
    # Changing what the stage passed in.
    (
        "questions.txt",
        "questions|{{ topic }}|{{ subtopic }}|{{ count }}{{ accepted.append('x') }}",
        1,
        "access to attribute 'append' of 'list' object is unsafe",
    ),
]


@pytest.mark.parametrize(("name", "template", "line", "reason"), ESCAPES)
def test_attribute_escapes_are_refused_naming_the_template_and_line(
    run_cli, project_dir, provider, tmp_path, name, template, line, reason
):
    marker = tmp_path / "escaped"
    if name == "questions.txt":
        seed_questions(project_dir, {("lifetimes", "elision"): []})
    (project_dir / "prompts" / name).write_text(template.replace("{marker}", str(marker)))
    stage = name.removesuffix(".txt")
    result = run_cli(stage, "--topic", "lifetimes")
    assert result.exit_code == 1
    assert result.stderr.endswith(f"error: invalid template {name}: line {line}: {reason}.\n")
    assert not marker.exists()
    assert provider.chats() == []


def test_the_answer_system_prompt_is_sandboxed_too(run_cli, project_dir, provider):
    seed_questions(project_dir, {("lifetimes", "elision"): ["q1"]})
    (project_dir / "prompts" / "answer_system.txt").write_text(
        "system\n{{ range.__globals__['os'].environ }}"
    )
    result = run_cli("answers")
    assert result.exit_code == 1
    assert result.stderr.endswith(
        "error: invalid template answer_system.txt: line 2: "
        "access to attribute '__globals__' of 'function' object is unsafe.\n"
    )
    assert provider.chats() == []


def test_a_template_cannot_include_a_file(run_cli, project_dir, provider):
    (project_dir / "prompts" / "subtopics.txt").write_text(
        "subtopics|{{ topic }}|{{ count }}{% include '/etc/passwd' %}"
    )
    result = run_cli("subtopics")
    assert result.exit_code == 1
    assert "error: invalid template subtopics.txt: line 1: " in result.stderr
    assert "root:" not in result.stdout + result.stderr
    assert provider.chats() == []


def test_ordinary_templates_still_work(run_cli, project_dir, provider):
    (project_dir / "prompts" / "subtopics.txt").write_text(
        "{% set parts = ['subtopics', topic, count] %}{{ parts | join('|') }}"
    )
    result = run_cli("subtopics")
    assert result.exit_code == 0, result.stderr
    assert sorted(s.prompt for s in provider.chats()) == [
        "subtopics|lifetimes|1",
        "subtopics|ownership|2",
    ]


def test_a_template_linked_out_of_the_project_is_refused(run_cli, project_dir, provider,
                                                         tmp_path):
    # Its text would go to the provider: a private key, a file of secrets.
    secret = tmp_path / "id_ed25519"
    secret.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nsecret\n")
    (project_dir / "prompts" / "subtopics.txt").unlink()
    (project_dir / "prompts" / "subtopics.txt").symlink_to(secret)
    result = run_cli("subtopics")
    assert result.exit_code == 1
    assert result.stderr.endswith(
        "error: invalid template subtopics.txt: a symbolic link leading out of the project\n"
    )
    assert provider.chats() == []


def test_a_hard_linked_template_is_refused(run_cli, project_dir, provider, tmp_path):
    # A hard link is the same file as one elsewhere (a key, say): no path tells it apart.
    secret = tmp_path / "id_ed25519"
    secret.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nsecret\n")
    (project_dir / "prompts" / "subtopics.txt").unlink()
    os.link(secret, project_dir / "prompts" / "subtopics.txt")
    result = run_cli("subtopics")
    assert result.exit_code == 1
    assert result.stderr.endswith(
        "error: invalid template subtopics.txt: a hard link (it may be a file from outside "
        "the project): copy it instead\n"
    )
    assert provider.chats() == []


def test_a_fifo_template_is_refused_not_replaced_by_the_built_in(run_cli, project_dir,
                                                                  provider):
    (project_dir / "prompts" / "answer_system.txt").unlink(missing_ok=True)
    os.mkfifo(project_dir / "prompts" / "answer_system.txt")
    result = run_cli("plan")
    assert result.exit_code == 1
    assert result.stderr.endswith(
        "error: prompts/answer_system.txt is a FIFO: refusing to read it\n"
    ), result.stderr
    assert provider.chats() == []


def test_a_template_linked_inside_the_project_is_read(run_cli, project_dir, provider):
    shared = project_dir / "shared"
    shared.mkdir()
    (shared / "subtopics.txt").write_text("subtopics|{{ topic }}|{{ count }}")
    (project_dir / "prompts" / "subtopics.txt").unlink()
    (project_dir / "prompts" / "subtopics.txt").symlink_to("../shared/subtopics.txt")
    assert run_cli("subtopics").exit_code == 0


@pytest.mark.parametrize(("source", "said"), [
    ('{{ "a" * 10**10 }}', "a value larger than 4 Mi characters is not made"),
    ("{{ range(10**9)|list|length }}", "range too big"),
    ("{% for i in range(90000) %}{{ 'x' * 100 }}{% endfor %}",
     "the prompt would be larger than 4 Mi characters"),
    ("{{ 2 ** 100000000 }}", "a power past 10,000 is not computed"),
    # Loops and calls that write nothing: no output bound stops them, the steps do.
    ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
     "takes more than 1,000,000 loop steps and calls"),
    ("{% macro f(n) %}{% if n %}{{ f(n-1) }}{{ f(n-1) }}{% endif %}{% endmacro %}{{ f(40) }}",
     "takes more than 1,000,000 loop steps and calls"),
    # What is built before it is output: each value, and all a render makes.
    ('{% set x %}{% for i in range(100) %}{{ "a" * 4000000 }}{% endfor %}{% endset %}'
     "{{ x|length }}", "would make more than 64 Mi characters"),
    ("{% set x %}{% for i in range(100000) %}" + "A" * 1000 + "{% endfor %}{% endset %}{{ x[:9] }}",
     "would make more than 64 Mi characters"),
    ('{% set a = "a" * 4000000 %}{{ (a ~ a)|length }}', "a value larger than 4 Mi characters"),
    ('{% set a = "a" * 4000000 %}{{ ([a] * 1000)|join|length }}',
     "a value larger than 4 Mi characters"),
    ('{{ "a"|center(10**9)|length }}', "a value larger than 4 Mi characters"),
    ('{{ ("%2000000000s" % "a")|length }}', "a value larger than 4 Mi characters"),
    ('{{ "{:>2000000000}".format("a")|length }}', "a value larger than 4 Mi characters"),
    ('{{ "{0:{1}}".format("a", 10**9) }}', "a width taken from an argument is not computed"),
    ("{% set ns = namespace(x=3) %}{% for i in range(40) %}{% set ns.x = ns.x * ns.x %}"
     "{% endfor %}{{ ns.x > 1 }}", "an integer wider than 65,536 bits is not computed"),
    ('{{ ("ab" * 1000000)|wordwrap(1)|length }}', "a word this long is not wrapped"),
    ("{{ lipsum(10**9) }}", "undefined variable `lipsum`"),
    # A template's own mistakes are its errors, never a traceback.
    ("{{ 1 / 0 }}", "line 1: ZeroDivisionError: division by zero"),
    ('{{ "a" + 1 }}', 'line 1: TypeError: can only concatenate str (not "int") to str'),
])
@pytest.mark.parametrize("command", ["answers", "plan"])
def test_a_template_cannot_take_the_memory_or_the_minute(
    run_cli, project_dir, provider, source, said, command
):
    (project_dir / "prompts" / "answer_system.txt").write_text(source + "\n")
    seed_questions(project_dir, {("ownership", "moves"): ["Why?"]})
    result = run_cli(command)
    assert result.exit_code == 1
    assert "error: invalid template answer_system.txt: " in result.stderr, result.stderr
    assert said.lower() in result.stderr.lower()
    assert provider.chats() == []
