"""Log lines on stderr: levels from OVERBRAINER_LOG, `warning: …`, stdlib logging routed in,
registered secrets masked."""

from __future__ import annotations

import logging

import pytest
from loguru import logger

from overbrainer.errors import UserError
from overbrainer.logs import configure_logging
from overbrainer.redact import register_secret

LOUD = """
    import logging

    from loguru import logger

    from overbrainer import hookimpl
    from overbrainer.redact import register_secret


    @hookimpl
    def register_targets(register):
        register_secret("tr0ub4dor-and-3")
        logger.debug("loud: loguru debug")
        logger.info("loud: info")
        logging.getLogger("thirdparty").debug("loud: stdlib debug")
        logging.getLogger("thirdparty").warning("loud: stdlib %s with tr0ub4dor-and-3", "warning")
        logger.warning("loud: key tr0ub4dor-and-3 and sk-abcdefghijklmnopqrstu")
"""


def test_info_is_the_default_level(monkeypatch, capsys):
    configure_logging()
    logger.debug("hidden")
    logger.info("shown")
    logger.warning("careful")
    logger.error("broken")
    assert capsys.readouterr().err == "shown\nwarning: careful\nerror: broken\n"


def test_overbrainer_log_debug_shows_debug_lines(monkeypatch, capsys):
    monkeypatch.setenv("OVERBRAINER_LOG", "debug")
    configure_logging()
    logger.debug("details {}", "here")
    logger.trace("too fine")
    assert capsys.readouterr().err == "debug: details here\n"


def test_an_explicit_level_wins_over_the_environment(monkeypatch, capsys):
    monkeypatch.setenv("OVERBRAINER_LOG", "debug")
    configure_logging("warning")
    logger.info("hidden")
    logger.warning("shown")
    assert capsys.readouterr().err == "warning: shown\n"


def test_an_invalid_level_is_an_error(monkeypatch):
    monkeypatch.setenv("OVERBRAINER_LOG", "loud")
    with pytest.raises(UserError) as caught:
        configure_logging()
    assert str(caught.value) == (
        "OVERBRAINER_LOG: expected one of trace, debug, info, success, warning, error, critical"
    )


def test_stdlib_logging_reaches_the_same_sink(monkeypatch, capsys):
    configure_logging()
    logging.getLogger("paramiko.transport").info("hidden: libraries speak at warning and up")
    logging.getLogger("paramiko.transport").warning("host key for %s changed", "gpu")
    logging.getLogger("aiohttp.client").error("connection reset")
    assert capsys.readouterr().err == "warning: host key for gpu changed\nerror: connection reset\n"
    monkeypatch.setenv("OVERBRAINER_LOG", "debug")
    configure_logging()
    logging.getLogger("paramiko.transport").debug("kex done")
    assert capsys.readouterr().err == "debug: kex done\n"


def test_registered_secrets_never_reach_stderr(capsys):
    configure_logging()
    register_secret("s3cr3t-0123")
    logger.warning("using key s3cr3t-0123 for hf_abcdefghijklmnopqrstuv")
    logging.getLogger("urllib3").warning("GET /?token=s3cr3t-0123")
    err = capsys.readouterr().err
    assert err == "warning: using key *** for ***\nwarning: GET /?token=***\n"


def test_the_cli_refuses_an_invalid_level(run_cli):
    result = run_cli("runs", "ls", env={"OVERBRAINER_LOG": "verbose"})
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == (
        "error: OVERBRAINER_LOG: expected one of trace, debug, info, success, warning, error, "
        "critical\n"
    )


def test_the_cli_routes_a_plugins_log_lines(run_cli, site):
    site.install("loud", LOUD)
    result = run_cli("plugins", env={"OVERBRAINER_LOAD_PLUGINS": "loud"})
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("loud  overbrainer-loud 1.0")
    assert result.stderr == (
        "loud: info\nwarning: loud: stdlib warning with ***\nwarning: loud: key *** and ***\n"
    )


def test_the_cli_shows_debug_lines_with_overbrainer_log_debug(run_cli, site):
    site.install("loud", LOUD)
    result = run_cli(
        "plugins", env={"OVERBRAINER_LOAD_PLUGINS": "loud", "OVERBRAINER_LOG": "DEBUG"}
    )
    assert result.exit_code == 0, result.stderr
    assert result.stderr == (
        "debug: loud: loguru debug\n"
        "loud: info\n"
        "debug: loud: stdlib debug\n"
        "warning: loud: stdlib warning with ***\n"
        "warning: loud: key *** and ***\n"
    )


def test_the_first_configuration_leaves_one_sink_and_the_environment_as_it_was():
    import subprocess
    import sys

    code = (
        "import os, sys; from overbrainer.logs import configure_logging;"
        "configure_logging('INFO'); from loguru import logger;"
        "print('LOGURU_AUTOINIT' in os.environ);"
        "logger.info('one line'); logger.warning('careful')"
    )
    shown = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert shown.stdout == "False\n"
    assert shown.stderr == "one line\nwarning: careful\n"  # our sink, and only it
