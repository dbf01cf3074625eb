"""Environment layering: `OVERBRAINER_*` variables over the file over the defaults, `.env` under
the shell."""

from __future__ import annotations

import pytest

from overbrainer.config.env import Environment
from overbrainer.config.load import ConfigError, load_settings
from overbrainer.plugins import load_plugins

POD = """
[targets.pod]
kind = "runpod"
gpu_types = ["NVIDIA A40"]
max_hours = 4
"""


@pytest.fixture
def kinds():
    return load_plugins({"OVERBRAINER_LOAD_PLUGINS": "local,ssh,runpod"}).kinds


def load(project_dir, kinds, shell=None):
    return load_settings(project_dir, Environment.load(project_dir, shell or {}), kinds)


def test_env_over_file_over_default(project_dir, write_config, kinds):
    write_config("\n[pipeline]\nconcurrency = 4\nseed = 7\n")
    settings = load(project_dir, kinds, {"OVERBRAINER_PIPELINE__CONCURRENCY": "16"})
    assert settings.pipeline.concurrency == 16  # env over the file
    assert settings.pipeline.seed == 7  # the file over the default
    assert settings.pipeline.max_retries == 5  # the default
    assert load(project_dir, kinds).pipeline.concurrency == 4


def test_env_values_are_coerced_to_the_fields_type(project_dir, kinds):
    settings = load(
        project_dir,
        kinds,
        {
            "OVERBRAINER_PIPELINE__EVAL_RATIO": "0.25",
            "OVERBRAINER_PIPELINE__INCLUDE_SYSTEM_PROMPT": "true",
            "OVERBRAINER_ROLES__GENERATOR__MAX_TOKENS": "2048",
        },
    )
    assert settings.pipeline.eval_ratio == 0.25
    assert settings.pipeline.include_system_prompt is True
    assert settings.roles.generator.max_tokens == 2048


def test_secrets_and_strings_from_env_stay_intact(project_dir, kinds):
    settings = load(
        project_dir,
        kinds,
        {
            "OVERBRAINER_PROVIDERS__MAIN__API_KEY": "0123",
            "OVERBRAINER_PROVIDERS__MAIN__BASE_URL": "http://127.0.0.1:8080/v1",
            "OVERBRAINER_HF_TOKEN": "007",
            "OVERBRAINER_PROJECT__NAME": "0042",
        },
    )
    assert settings.providers["main"].api_key.get_secret_value() == "0123"
    assert settings.providers["main"].base_url == "http://127.0.0.1:8080/v1"
    assert settings.hf_token.get_secret_value() == "007"
    assert settings.project.name == "0042"


def test_target_keys_accept_numeric_strings_from_env(project_dir, write_config, kinds):
    write_config(POD)
    settings = load(
        project_dir,
        kinds,
        {
            "OVERBRAINER_TARGETS__POD__MAX_HOURS": "2.5",
            "OVERBRAINER_TARGETS__POD__GPU_COUNT": "2",
            "OVERBRAINER_TARGETS__POD__CONTAINER_DISK_GB": "80",
        },
    )
    pod = settings.targets["pod"]
    assert (pod.max_hours, pod.gpu_count, pod.container_disk_gb) == (2.5, 2, 80)


def test_runpod_lists_come_from_env_as_comma_separated_strings(project_dir, write_config, kinds):
    write_config(POD)
    settings = load(
        project_dir,
        kinds,
        {
            "OVERBRAINER_TARGETS__POD__GPU_TYPES": "NVIDIA L40S, NVIDIA RTX A6000,",
            "OVERBRAINER_TARGETS__POD__DATA_CENTER_IDS": "EU-RO-1",
        },
    )
    assert settings.targets["pod"].gpu_types == ["NVIDIA L40S", "NVIDIA RTX A6000"]
    assert settings.targets["pod"].data_center_ids == ["EU-RO-1"]
    auto = load(project_dir, kinds, {"OVERBRAINER_TARGETS__POD__GPU_TYPES": "auto"})
    assert auto.targets["pod"].gpu_types == "auto"


def test_a_target_host_comes_from_env(project_dir, write_config, kinds):
    write_config('\n[targets.gpu_box]\nkind = "ssh"\n')
    assert load(project_dir, kinds).targets["gpu_box"].host is None
    settings = load(project_dir, kinds, {"OVERBRAINER_TARGETS__GPU_BOX__HOST": "me@gpu:2222"})
    assert settings.targets["gpu_box"].host == "me@gpu:2222"


def test_unknown_overbrainer_variables_fail(project_dir, write_config, kinds):
    write_config(POD)
    with pytest.raises(ConfigError) as caught:
        load(
            project_dir,
            kinds,
            {
                "OVERBRAINER_NOPE": "1",
                "OVERBRAINER_PIPELINE__SPEED": "3",
                "OVERBRAINER_TARGETS__POD__COLOUR": "red",
                "OVERBRAINER_PROJECT__NAME__FIRST": "x",
                "OVERBRAINER_TOPICS__0__NAME": "x",
                "OVERBRAINER_PIPELINE___SEED": "1",
                "OVERBRAINER_LOAD_PLUGINS": "local",  # steers the tool: not a setting
                "OVERBRAINER_TRACE_PLUGINS": "0",
            },
        )
    assert sorted(caught.value.problems) == [
        "OVERBRAINER_NOPE: unknown field",
        "OVERBRAINER_PIPELINE__SPEED: unknown field",
        "OVERBRAINER_PIPELINE___SEED: unknown field",
        "OVERBRAINER_PROJECT__NAME__FIRST: unknown field",
        "OVERBRAINER_TARGETS__POD__COLOUR: unknown field",
        "OVERBRAINER_TOPICS__0__NAME: unknown field",
    ]


def test_config_check_fails_on_an_unknown_variable(run_cli):
    result = run_cli("config", "check", env={"OVERBRAINER_PIPELINE__CONCURENCY": "16"})
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == (
        "error: invalid configuration:\n  OVERBRAINER_PIPELINE__CONCURENCY: unknown field\n"
    )


def test_a_bad_env_value_names_the_variable_never_the_value(project_dir, kinds):
    with pytest.raises(ConfigError) as caught:
        load(
            project_dir,
            kinds,
            {"OVERBRAINER_PIPELINE__CONCURRENCY": "sk-abcdefghijklmnopqrstuvwxyz"},
        )
    assert caught.value.problems == [
        "pipeline.concurrency (from OVERBRAINER_PIPELINE__CONCURRENCY): expected an integer",
    ]
    assert "sk-" not in str(caught.value)
    with pytest.raises(ConfigError) as caught:
        load(project_dir, kinds, {"OVERBRAINER_PIPELINE": "16"})
    assert caught.value.problems == ["pipeline (from OVERBRAINER_PIPELINE): expected a table"]


def test_dotenv_is_loaded_and_the_shell_wins(project_dir, kinds):
    (project_dir / ".env").write_text(
        "# provider settings\n"
        "OVERBRAINER_PIPELINE__CONCURRENCY=32\n"
        "export OVERBRAINER_PIPELINE__SEED = 9  # a comment\n"
        "OVERBRAINER_PROVIDERS__MAIN__API_KEY='0123'\n"
        'OVERBRAINER_PROVIDERS__MAIN__BASE_URL="http://127.0.0.1:9/v1"\n'
    )
    settings = load(project_dir, kinds, {"OVERBRAINER_PIPELINE__CONCURRENCY": "4"})
    assert settings.pipeline.concurrency == 4
    assert settings.pipeline.seed == 9
    assert settings.providers["main"].api_key.get_secret_value() == "0123"
    assert settings.providers["main"].base_url == "http://127.0.0.1:9/v1"


def test_the_environment_keeps_shell_and_dotenv_apart(project_dir):
    (project_dir / ".env").write_text("A=from-dotenv\nB=from-dotenv\n")
    env = Environment.load(project_dir, {"A": "from-shell"})
    assert env.merged == {"A": "from-shell", "B": "from-dotenv"}
    (project_dir / ".env").write_text("B=changed\nC=new\n")
    assert env.reloaded(project_dir).merged == {"A": "from-shell", "B": "changed", "C": "new"}


def test_config_check_shows_env_values_and_masks_secrets(run_cli, project_dir):
    (project_dir / ".env").write_text(
        "OVERBRAINER_PROVIDERS__MAIN__API_KEY=sk-dotenv-secret-0123456789\n"
    )
    result = run_cli(
        "config",
        "check",
        env={
            "OVERBRAINER_PIPELINE__CONCURRENCY": "16",
            "OVERBRAINER_HF_TOKEN": "vault:secret/hf#token",
            "OVERBRAINER_PROVIDERS__MAIN__BASE_URL": "https://bob:hunter2@llm.example.invalid/v1",
        },
    )
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "pipeline.concurrency = 16" in lines
    assert "providers.main.api_key = ***" in lines
    assert "providers.main.base_url = https://***@llm.example.invalid/v1" in lines
    assert "hf_token = *** (vault reference)" in lines
    assert "runpod.api_key = (unset)" in lines
    for secret in ("sk-dotenv", "hunter2", "bob", "secret/hf"):
        assert secret not in result.stdout + result.stderr


BASE_URL = "OVERBRAINER_PROVIDERS__MAIN__BASE_URL"
KEY = "OVERBRAINER_PROVIDERS__MAIN__API_KEY"


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://u:p@127.0.0.1:99999/v1", "its port is not a number from 1 to 65535"),
        ("http://127.0.0.1:0/v1", "its port is not a number from 1 to 65535"),
        ("http://127.0.0.1:http/v1", "its port is not a number from 1 to 65535"),
        ("ftp://llm.example.invalid/v1", "must start with http:// or https://"),
        ("llm.example.invalid/v1", "must start with http:// or https://"),
        ("http:///v1", "has no host"),
        ("http://[::1/v1", "is not a valid URL"),
        # The host's own text is in the parser's message: its words tell nothing.
        ("http://[airport]/v1", "is not a valid URL"),
        ("http://llm.example.invalid/v1 x", "must not contain spaces or control characters"),
    ],
)
def test_a_provider_url_that_cannot_be_used_is_a_config_error(run_cli, url, why):
    result = run_cli("config", "check", env={BASE_URL: url})
    assert result.exit_code == 1
    assert result.stderr == (
        f"error: invalid configuration:\n  providers.main.base_url (from {BASE_URL}): {why}\n"
    )
    assert url not in result.stderr


def test_a_stage_never_tries_an_unusable_url(run_cli):
    result = run_cli("subtopics", env={BASE_URL: "http://u:p@127.0.0.1:99999/v1"})
    assert result.exit_code == 1
    assert result.stderr == (
        "error: invalid configuration:\n"
        f"  providers.main.base_url (from {BASE_URL}): its port is not a number from 1 to 65535\n"
    )


def test_the_runpod_url_is_checked_too(run_cli):
    result = run_cli("config", "check", env={"OVERBRAINER_RUNPOD__BASE_URL": "localhost:99"})
    assert result.exit_code == 1
    assert result.stderr.endswith(
        "runpod.base_url (from OVERBRAINER_RUNPOD__BASE_URL): must start with http:// or https://\n"
    )


@pytest.mark.parametrize("url", ["https://llm.example.invalid/v1", "http://[::1]:8080/v1",
                                 "http://u:p@127.0.0.1:65535"])
def test_usable_urls_are_accepted(run_cli, url):
    result = run_cli("config", "check", env={BASE_URL: url, KEY: "sk-test"})
    assert result.exit_code == 0, result.stderr


def test_secrets_in_a_url_query_are_masked_when_it_is_printed(run_cli):
    query = (
        "api_key=S1&key=S2&token=S3&sig=S4&X-Amz-Signature=S5&model=gpt&password=S6"
        "&client_secret=S7&accessToken=S8&apiKey=S9&max_tokens=16&keyboard=us"
    )
    result = run_cli("config", "check", env={
        BASE_URL: f"https://u:S0@llm.example.invalid:8443/v1?{query}",
        KEY: "sk-test",
        "OVERBRAINER_RUNPOD__BASE_URL": "https://rp.example.invalid/graphql?api_key=S10",
    })
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert (
        "providers.main.base_url = https://***@llm.example.invalid:8443/v1?api_key=***&key=***"
        "&token=***&sig=***&X-Amz-Signature=***&model=gpt&password=***&client_secret=***"
        "&accessToken=***&apiKey=***&max_tokens=16&keyboard=us"
    ) in lines
    assert "runpod.base_url = https://rp.example.invalid/graphql?api_key=***" in lines
    for secret in [f"S{n}" for n in range(11)]:
        assert f"={secret}" not in result.stdout + result.stderr
        assert f":{secret}@" not in result.stdout


def test_env_strings_still_become_booleans_and_numbers(project_dir, kinds):
    settings = load(
        project_dir,
        kinds,
        {
            "OVERBRAINER_PIPELINE__INCLUDE_SYSTEM_PROMPT": "yes",
            "OVERBRAINER_PIPELINE__DEDUP_THRESHOLD": "1",
            "OVERBRAINER_PIPELINE__SEED": "+7",
            "OVERBRAINER_ROLES__PARENT__REASONING": "off",
        },
    )
    assert settings.pipeline.include_system_prompt is True
    assert settings.pipeline.dedup_threshold == 1.0
    assert settings.pipeline.seed == 7
    assert settings.roles.parent.reasoning is False
    with pytest.raises(ConfigError) as caught:
        load(project_dir, kinds, {"OVERBRAINER_PIPELINE__CONCURRENCY": "1e3",
                                  "OVERBRAINER_PIPELINE__EVAL_RATIO": "nan"})
    assert caught.value.problems == [
        "pipeline.concurrency (from OVERBRAINER_PIPELINE__CONCURRENCY): expected an integer",
        "pipeline.eval_ratio (from OVERBRAINER_PIPELINE__EVAL_RATIO): must be a finite number",
    ]


# -- providers that connect the first time ---------------------------------------------------


def test_a_provider_named_with_a_dash_takes_its_variables_with_an_underscore(
    run_cli, write_config, minimal_config, project_dir
):
    write_config(base=minimal_config.replace("[providers.main]", "[providers.my-server]")
                 .replace('provider = "main"', 'provider = "my-server"'))
    (project_dir / ".env").write_text(
        "OVERBRAINER_PROVIDERS__MY_SERVER__BASE_URL=https://llm.example.invalid/v1\n"
        "OVERBRAINER_PROVIDERS__MY_SERVER__API_KEY=sk-test-dash\n"
    )
    result = run_cli("config", "check")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "providers.my-server.base_url = https://llm.example.invalid/v1" in lines
    assert "providers.my-server.api_key = ***" in lines
    assert not any(line.startswith("providers.my_server") for line in lines)


def test_a_dash_provider_without_a_url_names_the_variable_to_set(
    run_cli, write_config, minimal_config
):
    write_config(base=minimal_config.replace("[providers.main]", "[providers.my-server]")
                 .replace('provider = "main"', 'provider = "my-server"'))
    result = run_cli("config", "check")
    assert result.exit_code == 1
    assert "set OVERBRAINER_PROVIDERS__MY_SERVER__BASE_URL" in result.stderr


def test_a_variable_of_a_provider_the_file_lacks_is_a_stray_not_a_phantom(
    run_cli, project_dir
):
    (project_dir / ".env").write_text(
        "OVERBRAINER_PROVIDERS__GONEPROVIDER__BASE_URL=https://gone.example.invalid/v1\n"
        "OVERBRAINER_PROVIDERS__GONEPROVIDER__API_KEY=sk-test-gone\n"
        "OVERBRAINER_PROVIDERS__MAIN__BASE_URL=http://127.0.0.1:9/v1\n"
    )
    result = run_cli("config", "check")
    assert result.exit_code == 0, result.stderr
    assert "protocol" not in result.stderr
    assert (
        "warning: OVERBRAINER_PROVIDERS__GONEPROVIDER__API_KEY: providers.goneprovider is not in "
        "overbrainer.toml: the variable is ignored (a stray line of .env, or a name that "
        "changed?)" in result.stderr
    )
    assert "sk-test-gone" not in result.stdout + result.stderr
    assert not any(line.startswith("providers.goneprovider") for line in result.stdout.splitlines())


def test_a_provider_made_from_the_environment_alone_still_works(run_cli):
    result = run_cli("config", "check", env={
        "OVERBRAINER_PROVIDERS__EXTRA__PROTOCOL": "anthropic",
        "OVERBRAINER_PROVIDERS__EXTRA__BASE_URL": "http://127.0.0.1:9/v1",
        BASE_URL: "http://127.0.0.1:9/v1",
    })
    assert result.exit_code == 0, result.stderr
    assert "providers.extra.protocol = anthropic" in result.stdout.splitlines()


@pytest.mark.parametrize(
    ("url", "allowed"),
    [("http://127.0.0.1:8080/v1", True), ("http://localhost:11434/v1", True),
     ("http://[::1]:8000/v1", True), ("https://api.example.invalid/v1", False),
     ("http://user:pw@127.0.0.1:8080/v1", False), ("http://127.0.0.1:8080/v1?key=x", False)],
)
def test_a_loopback_url_may_be_written_in_the_file(run_cli, write_config, minimal_config, url,
                                                  allowed):
    write_config(base=minimal_config.replace(
        '[providers.main]\nprotocol = "openai"\n',
        f'[providers.main]\nprotocol = "openai"\nbase_url = "{url}"\n',
    ))
    result = run_cli("config", "check")
    if allowed:
        assert result.exit_code == 0, result.stderr
        assert f"providers.main.base_url = {url}" in result.stdout.splitlines()
    else:
        assert result.exit_code == 1
        assert ("providers.main.base_url: must be set through env, not in overbrainer.toml"
                in result.stderr)
        assert "pw" not in result.stderr
