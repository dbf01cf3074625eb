"""``[providers.NAME] serve = {...}``: a served provider's table, and every mistake in it
named by its setting."""

from __future__ import annotations

import pytest

from overbrainer.config.env import Environment
from overbrainer.config.load import ConfigError, load_settings
from overbrainer.plugins import load_plugins

SERVED = """\
[project]
name = "Demo"

[providers.big]
protocol = "openai"
serve = {{ target = "box", engine = "vllm", model = "Qwen/Qwen3-0.6B"{more} }}

[targets.box]
kind = "local"

[roles.generator]
provider = "big"
model = "Qwen/Qwen3-0.6B"

[roles.parent]
provider = "big"
model = "{parent}"
"""


def load(project_dir, text, shell=None):
    (project_dir / "overbrainer.toml").write_text(text, encoding="utf-8")
    kinds = load_plugins({"OVERBRAINER_LOAD_PLUGINS": "local,ssh"}).kinds
    return load_settings(project_dir, Environment.load(project_dir, shell or {}), kinds)


def problems(project_dir, text, shell=None) -> str:
    with pytest.raises(ConfigError) as caught:
        load(project_dir, text, shell)
    return str(caught.value)


def test_a_served_provider_loads_with_its_defaults(project_dir):
    settings = load(project_dir, SERVED.format(more="", parent="Qwen/Qwen3-0.6B"))
    serve = settings.providers["big"].serve
    assert serve is not None
    assert (serve.target, serve.engine, serve.model) == ("box", "vllm", "Qwen/Qwen3-0.6B")
    assert serve.idle_minutes == 30
    assert serve.port is None and serve.gpus is None and serve.args == []


@pytest.mark.parametrize(
    ("more", "setting", "why"),
    [
        (", idle_minutes = 0", "providers.big.serve.idle_minutes", "must be at least 1"),
        (", port = 80", "providers.big.serve.port", "must be at least 1024"),
        (", gpus = 0", "providers.big.serve.gpus", "must be at least 1"),
        (', args = ["--port", "9"]', "providers.big.serve.args", "--port is set by overbrainer"),
        (', args = ["--host=0.0.0.0"]', "providers.big.serve.args", "--host is set by"),
        (', colour = "red"', "providers.big.serve.colour", ""),
    ],
)
def test_a_bad_serve_value_is_named_by_its_setting(project_dir, more, setting, why):
    text = problems(project_dir, SERVED.format(more=more, parent="Qwen/Qwen3-0.6B"))
    assert setting in text
    assert why in text


def test_an_engine_name_that_cannot_be_one_is_refused(project_dir):
    text = SERVED.format(more="", parent="Qwen/Qwen3-0.6B").replace('"vllm"', '"v LLM"')
    assert "providers.big.serve.engine: must be an engine's name" in problems(project_dir, text)


def test_a_served_provider_needs_a_known_target_and_its_own_model_in_roles(project_dir):
    text = SERVED.format(more="", parent="other-model").replace('target = "box"', 'target = "gpu"')
    found = problems(project_dir, text + "batch = true\n")
    assert "providers.big.serve.target: unknown target `gpu`" in found
    assert "roles.parent.model: provider `big` serves `Qwen/Qwen3-0.6B` only" in found
    assert "roles.parent.batch: provider `big` is served, and engines have no batch API" in found


def test_a_served_provider_with_a_base_url_or_anthropic_is_refused(project_dir):
    text = SERVED.format(more="", parent="Qwen/Qwen3-0.6B").replace('"openai"', '"anthropic"')
    found = problems(
        project_dir, text, {"OVERBRAINER_PROVIDERS__BIG__BASE_URL": "http://127.0.0.1:9/v1"}
    )
    assert "providers.big.serve: a served provider speaks the openai protocol" in found
    assert "providers.big: base_url and serve cannot both be set" in found


def test_a_host_target_s_price_per_hour_is_a_price(project_dir):
    text = SERVED.format(more="", parent="Qwen/Qwen3-0.6B").replace(
        'kind = "local"', 'kind = "local"\nprice_per_hour = -1'
    )
    assert "targets.box.price_per_hour: must be at least 0" in problems(project_dir, text)
    fine = load(project_dir, text.replace("= -1", "= 2.5"))
    assert fine.targets["box"].price_per_hour == 2.5


def test_config_check_passes_a_served_provider_that_has_no_url(project_dir, run_cli):
    """overbrainer starts it and knows where it listens: no URL, no key to ask for."""
    (project_dir / "overbrainer.toml").write_text(
        SERVED.format(more="", parent="Qwen/Qwen3-0.6B"), encoding="utf-8"
    )
    result = run_cli("config", "check", env={"OVERBRAINER_LOAD_PLUGINS": "local"})
    assert result.exit_code == 0, result.stdout + result.stderr
    assert "has no URL" not in result.stdout + result.stderr
