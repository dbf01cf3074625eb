"""The project's `.env`: what it assigns, and errors that name a line, never its content."""

from __future__ import annotations

import pytest

from overbrainer.config.dotenv import DotenvError, parse_dotenv, read_dotenv


def test_assignments_quotes_comments_and_export():
    text = (
        "# a comment\n"
        "\n"
        "PLAIN=value\n"
        "SPACED = value with spaces   # trailing comment\n"
        "export EXPORTED=1\n"
        "HASH=a#b\n"
        "EMPTY=\n"
        "SINGLE='no $expansion \\n here'\n"
        'DOUBLE="line\\nbreak \\"quoted\\""  # comment\n'
        'MULTI="first\n'
        'second"\n'
        "PLAIN=later wins\n"
    )
    assert parse_dotenv(text) == {
        "PLAIN": "later wins",
        "SPACED": "value with spaces",
        "EXPORTED": "1",
        "HASH": "a#b",
        "EMPTY": "",
        "SINGLE": "no $expansion \\n here",
        "DOUBLE": 'line\nbreak "quoted"',
        "MULTI": "first\nsecond",
    }


@pytest.mark.parametrize("inside", ["\u2028", "\u2029", "\x85", "\x0c", "\x0b", "\x1c"])
def test_a_value_keeps_characters_other_tools_take_for_line_ends(inside):
    text = f"KEY=sk-a{inside}b\r\nQUOTED='c{inside}d'\rLAST=e\n"
    assert parse_dotenv(text) == {"KEY": f"sk-a{inside}b", "QUOTED": f"c{inside}d", "LAST": "e"}


def test_a_syntax_error_counts_lines_as_a_dotenv_ends_them():
    with pytest.raises(DotenvError) as caught:
        parse_dotenv("A=x\u2028y\r\nB=1\rthis line is bad\n")
    assert caught.value.line == 3


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("A=1\nthis line holds sk-secret-value\n", 2),
        ("A=1\n\n1BAD=x\n", 3),
        ("A=1\nB='never closed\nC=3\n", 2),
        ('A="closed" then-garbage-sk-secret\n', 1),
        ("A-B=1\n", 1),
    ],
)
def test_a_syntax_error_names_the_line_only(text, line):
    with pytest.raises(DotenvError) as caught:
        parse_dotenv(text)
    assert str(caught.value) == f"cannot parse .env (syntax error at line {line})"
    assert caught.value.line == line


def test_invalid_utf8_is_a_syntax_error_at_its_line(tmp_path):
    (tmp_path / ".env").write_bytes(b"A=1\nB=2\nC=\xff\xfe\n")
    with pytest.raises(DotenvError) as caught:
        read_dotenv(tmp_path / ".env")
    assert str(caught.value) == "cannot parse .env (syntax error at line 3)"


def test_a_missing_file_assigns_nothing(tmp_path):
    assert read_dotenv(tmp_path / ".env") == {}


def test_an_unreadable_dotenv_is_a_user_error(run_cli, project_dir):
    (project_dir / ".env").mkdir()
    result = run_cli("config", "check")
    assert result.exit_code == 1
    assert result.stderr == "error: cannot read .env: Is a directory\n"


def test_a_malformed_dotenv_fails_the_command_without_its_content(run_cli, project_dir):
    (project_dir / ".env").write_text(
        "OVERBRAINER_PIPELINE__SEED=1\nhf_tokenvaluewithoutequals_sk-abcdefghijklmnopqrst\n"
    )
    result = run_cli("config", "check")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == "error: cannot parse .env (syntax error at line 2)\n"
