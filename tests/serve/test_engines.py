"""The engines: vLLM's and SGLang's documented command lines, taken by a stand-in that
parses those flags strictly and answers as they do; an engine a third party registers
through an entry point; an engine nobody registered, named by its setting."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from tests.helpers.serving import MODEL, engine_argv, running, watchdog_pids, write_served_project

from overbrainer.cli import cli
from overbrainer.engines import EngineLaunch
from overbrainer.engines.builtin import LlamaCpp, Sglang, Vllm


def invoke(project, *args, env=None):
    return CliRunner().invoke(cli, ["-C", str(project), *args], env=env, catch_exceptions=False)


@pytest.mark.parametrize(
    ("engine", "expected"),
    [
        ("vllm", ["vllm", "serve", MODEL, "--host", "127.0.0.1", "--port", "{port}",
                  "--tensor-parallel-size", "2", "--max-model-len", "4096"]),
        ("sglang", ["sglang", "-m", "sglang.launch_server", "--model-path", MODEL, "--host",
                    "127.0.0.1", "--port", "{port}", "--tp", "2", "--context-length", "4096"]),
    ],
)  # fmt: skip
def test_vllm_and_sglang_start_with_their_documented_flags_and_answer(
    tmp_path, engine_venv, engine, expected
):
    flag = "--max-model-len" if engine == "vllm" else "--context-length"
    project = write_served_project(
        tmp_path / "p", engine_venv, engine=engine, more=f', gpus = 2, args = ["{flag}", "4096"]'
    )
    up = invoke(project, "serve", "up")
    assert up.exit_code == 0, up.output
    port = up.stdout.strip().rsplit(":", 1)[1].split("/")[0]
    (pid,) = watchdog_pids(tmp_path)
    try:
        argv = engine_argv(tmp_path)
        assert argv == [part.replace("{port}", port) for part in expected]
        # overbrainer chose the engine's port on the target's loopback: reached as is here
        assert up.stdout == f"big: up at http://127.0.0.1:{port}/v1\n"
    finally:
        assert invoke(project, "serve", "down").stdout == "big: ended\n"
    assert not running(pid)


def test_each_built_in_engine_listens_on_the_loopback_only():
    launch = EngineLaunch("m", 8123, "/v/bin/", gpus=4, args=("--x",))
    for engine in (Vllm(), Sglang(), LlamaCpp()):
        argv = engine.command(launch)
        assert argv[argv.index("--host") + 1] == "127.0.0.1", engine.name
        assert argv[argv.index("--port") + 1] == "8123", engine.name
        assert argv[0].startswith("/v/bin/") and argv[-1] == "--x", engine.name
    llama = LlamaCpp().command(launch)
    assert llama[1:4] == ["-m", "llama_cpp.server", "--model"]
    assert llama[llama.index("--model_alias") + 1] == "m"  # the name the roles ask for


ECHO_ENGINE = """
from overbrainer.plugin import hookimpl
from overbrainer.plugin.operations import Engine


class Echo(Engine):
    name = "echo"

    def command(self, launch):
        return [launch.bin_dir + "vllm", "serve", launch.model, "--host", "127.0.0.1",
                "--port", str(launch.port)]


@hookimpl
def register_engines(register):
    register(Echo())
"""


def test_a_third_party_engine_registered_by_entry_point_serves(tmp_path, engine_venv, site):
    site.install("echo", ECHO_ENGINE)
    project = write_served_project(tmp_path / "p", engine_venv, engine="echo")
    env = {"OVERBRAINER_LOAD_PLUGINS": "echo,local"}

    up = invoke(project, "serve", "up", env=env)

    assert up.exit_code == 0, up.output
    assert "starting echo with Qwen/Qwen3-0.6B on target `box`" in up.stderr
    assert invoke(project, "serve", "down", env=env).stdout == "big: ended\n"


def test_an_engine_nobody_registered_is_named_by_its_setting(tmp_path, engine_venv):
    project = write_served_project(tmp_path / "p", engine_venv, engine="tgi")

    up = CliRunner().invoke(cli, ["-C", str(project), "serve", "up"])

    assert up.exit_code == 1
    assert (
        "providers.big.serve.engine: no installed engine `tgi` (installed: llama.cpp, sglang, "
        "vllm)" in up.stderr
    )
    assert watchdog_pids(tmp_path) == []
