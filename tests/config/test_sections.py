"""A plugin's own top-level settings table: ``register_settings`` and what the core does with it."""

from __future__ import annotations

import json

import pytest
from tests.helpers.project import LOCAL_PROVIDER, MINIMAL_CONFIG

from overbrainer.config.env import Environment
from overbrainer.config.load import load_settings
from overbrainer.plugins import load_plugins
from overbrainer.redact import redact
from overbrainer.watch.loop import changed_keys

VENDOR = """
    from pydantic import SecretStr

    from overbrainer.plugin import hookimpl
    from overbrainer.plugin.settings import HttpUrl, Section


    class VendorAccount(Section):
        token: SecretStr | None = None
        endpoint: HttpUrl | None = None
        retries: int = 3
        region: str | None = None


    @hookimpl
    def register_settings(register):
        register("vendor", VendorAccount, secrets=["token"], env_only=["endpoint"])
"""

TOKEN = "vt-0123456789abcdef"


def plugins_env(*names: str, **variables: str) -> dict[str, str]:
    return {"OVERBRAINER_LOAD_PLUGINS": ",".join(names), **LOCAL_PROVIDER, **variables}


def problems(result) -> list[str]:
    lines = result.stderr.splitlines()
    assert lines[0] == "error: invalid configuration:", result.stderr
    return [line.strip() for line in lines[1:]]


def test_the_table_is_printed_with_its_secret_masked(run_cli, site, write_config):
    site.install("vendor", VENDOR)
    write_config('\n[vendor]\nregion = "eu"\n')
    result = run_cli(
        "config",
        "check",
        env=plugins_env(
            "vendor",
            OVERBRAINER_VENDOR__TOKEN=TOKEN,
            OVERBRAINER_VENDOR__ENDPOINT="https://me:pw@api.vendor.example.invalid/v2",
            OVERBRAINER_VENDOR__RETRIES="5",
        ),
    )
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    shown = [line for line in lines if line.startswith("vendor.")]
    assert shown == [
        "vendor.token = ***",
        "vendor.endpoint = https://***@api.vendor.example.invalid/v2",
        "vendor.retries = 5",
        "vendor.region = eu",
    ]
    assert lines.index("vendor.token = ***") < lines.index("hf_token = (unset)")
    for secret in (TOKEN, "me:pw"):
        assert secret not in result.stdout + result.stderr


def test_the_json_check_masks_it_and_resolve_names_it(run_cli, site, write_config):
    site.install("vendor", VENDOR)
    write_config()
    result = run_cli(
        "config", "check", "--json", "--resolve",
        env=plugins_env("vendor", OVERBRAINER_VENDOR__TOKEN=TOKEN),
    )
    assert result.exit_code == 0, result.stderr
    shown = json.loads(result.stdout)
    assert shown["settings"]["vendor.token"] == "***"
    assert shown["settings"]["vendor.retries"] == "3"
    assert "vendor.endpoint" not in shown["settings"]  # unset: not shown
    assert shown["secrets"] == {"vendor.token": "resolved"}
    assert TOKEN not in result.stdout


def test_an_unset_secret_is_shown_unset(run_cli, site, write_config):
    site.install("vendor", VENDOR)
    write_config()
    result = run_cli("config", "check", env=plugins_env("vendor"))
    assert result.exit_code == 0, result.stderr
    assert "vendor.token = (unset)" in result.stdout.splitlines()


def test_bad_values_name_their_key_and_variable_never_the_value(run_cli, site, write_config):
    site.install("vendor", VENDOR)
    write_config('\n[vendor]\nretries = "many"\ncolour = "red"\n')
    result = run_cli(
        "config",
        "check",
        env=plugins_env("vendor", OVERBRAINER_VENDOR__ENDPOINT="api.vendor.example.invalid:99"),
    )
    assert result.exit_code == 1
    assert sorted(problems(result)) == [
        "vendor.colour: unknown field",
        "vendor.endpoint (from OVERBRAINER_VENDOR__ENDPOINT): must start with http:// or https://",
        "vendor.retries: expected an integer",
    ]
    assert "api.vendor" not in result.stderr


def test_a_table_that_is_not_a_table_is_refused(run_cli, site, write_config):
    site.install("vendor", VENDOR)
    write_config(base="vendor = 3\n" + MINIMAL_CONFIG)
    result = run_cli("config", "check", env=plugins_env("vendor"))
    assert result.exit_code == 1
    assert problems(result) == ["vendor: expected a table"]


def test_secret_and_env_only_keys_are_refused_in_the_file(run_cli, site, write_config):
    site.install("vendor", VENDOR)
    write_config(f'\n[vendor]\ntoken = "{TOKEN}"\nendpoint = "https://api.vendor.example.invalid"\n')
    result = run_cli("config", "check", env=plugins_env("vendor"))
    assert result.exit_code == 1
    assert sorted(problems(result)) == [
        "vendor.endpoint: must be set through env, not in overbrainer.toml",
        "vendor.token: must be set through env, not in overbrainer.toml",
    ]
    assert TOKEN not in result.stderr


def test_a_plugin_reads_its_table_and_its_secret_is_redacted_everywhere(
    project_dir, site, write_config
):
    site.install("vendor", VENDOR)
    write_config('\n[vendor]\nretries = 7\n')
    plugins = load_plugins({"OVERBRAINER_LOAD_PLUGINS": "vendor"})
    model = plugins.sections["vendor"].model
    env = Environment.load(project_dir, {"OVERBRAINER_VENDOR__TOKEN": TOKEN})
    settings = load_settings(project_dir, env, plugins.kinds, plugins.sections)
    account = settings.section("vendor", model)
    assert account.retries == 7
    assert account.token.get_secret_value() == TOKEN
    assert redact(f"request failed: token {TOKEN}!") == "request failed: token ***!"
    # Settings built without the table (a project made by hand) give the model's defaults.
    write_config()
    bare = load_settings(project_dir, Environment.load(project_dir, {}), plugins.kinds)
    assert bare.section("vendor", model).retries == 3
    with pytest.raises(TypeError, match="settings table `vendor` is a VendorAccount, not a "):
        settings.section("vendor", type("Other", (model.__base__,), {}))


def test_watch_sees_a_change_of_the_table(project_dir, site, write_config):
    site.install("vendor", VENDOR)
    plugins = load_plugins({"OVERBRAINER_LOAD_PLUGINS": "vendor"})
    env = Environment.load(project_dir, {})
    write_config('\n[vendor]\nretries = 1\n')
    old = load_settings(project_dir, env, plugins.kinds, plugins.sections)
    write_config('\n[vendor]\nretries = 2\n')
    new = load_settings(project_dir, env, plugins.kinds, plugins.sections)
    assert changed_keys(old, new) == ["vendor.retries"]


@pytest.mark.parametrize(
    ("registration", "why"),
    [
        ('register("training", VendorAccount)', "ValueError: settings table `training` is one "
         "of the core's own"),
        ('register("Vendor-X", VendorAccount)', "ValueError: settings table 'Vendor-X': a name "
         "of a-z, 0-9 and single _"),
        ('register("vendor", dict)', "TypeError: settings table `vendor` needs a pydantic "
         "model, not <class 'dict'>"),
        ('register("vendor", VendorAccount, secrets=["region"])', "TypeError: settings table "
         "`vendor`: secret `region` must be a SecretStr field"),
        ('register("vendor", VendorAccount, secrets="token")', "TypeError: settings table "
         "`vendor`: secrets and env_only are lists of keys"),
        ('register("vendor", VendorAccount, env_only=["nope"])', "ValueError: settings table "
         "`vendor` has no key `nope`"),
        ('register("vendor", Required)', "ValueError: settings table `vendor`: every key needs "
         "a default (a project may leave the table out)"),
    ],
)
def test_a_wrong_registration_is_reported_and_the_plugin_skipped(
    run_cli, site, write_config, registration, why
):
    source = VENDOR.replace(
        'register("vendor", VendorAccount, secrets=["token"], env_only=["endpoint"])',
        registration,
    ) + "\n\n    class Required(Section):\n        name: str\n"
    site.install("vendor", source)
    result = run_cli("plugins", env=plugins_env("vendor", "local"))
    assert result.exit_code == 0, result.stderr
    assert [line.split()[0] for line in result.stdout.splitlines()] == ["local"]
    assert result.stderr == (
        f"warning: plugin `vendor` (overbrainer-vendor) could not be loaded: {why}\n"
    )


def test_a_table_two_plugins_register_keeps_the_first(site):
    site.install("vendor", VENDOR)
    site.install("vendor2", VENDOR)
    plugins = load_plugins({"OVERBRAINER_LOAD_PLUGINS": "vendor,vendor2"})
    assert plugins.section_owners == {"vendor": "vendor"}
    plugins.unregister("vendor")
    assert plugins.sections == {}


@pytest.fixture
def runpod_not_installed(monkeypatch):
    """overbrainer-runpod as if it were not installed (it is, in the tests' venv)."""
    from importlib import metadata

    real = metadata.distribution

    def distribution(name):
        if name == "overbrainer-runpod":
            raise metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(metadata, "distribution", distribution)


def test_an_own_plugin_s_table_without_the_plugin_names_what_to_install(
    run_cli, write_config, runpod_not_installed
):
    write_config("\n[runpod]\n")
    result = run_cli("config", "check", env=plugins_env("local"))
    assert result.exit_code == 1
    assert problems(result) == [
        "runpod: no installed plugin provides the [runpod] table: install overbrainer-runpod "
        "(pip install 'overbrainer[runpod]')"
    ]


def test_its_variables_without_the_plugin_are_ignored_with_a_warning(
    run_cli, write_config, monkeypatch, runpod_not_installed
):
    from overbrainer.config import load

    monkeypatch.setattr(load, "_warned", set())  # once a process: this test's process
    write_config()
    result = run_cli(
        "config", "check", env=plugins_env("local", OVERBRAINER_RUNPOD__API_KEY="rpa_" + "x" * 20)
    )
    assert result.exit_code == 0, result.stderr
    assert result.stderr == (
        "warning: OVERBRAINER_RUNPOD__API_KEY: no installed plugin provides the [runpod] "
        "table: install overbrainer-runpod: the variable is ignored\n"
    )
    assert "runpod." not in result.stdout


def test_an_installed_plugin_left_unloaded_leaves_its_table_unread(
    run_cli, write_config, monkeypatch
):
    """A project that loads only some plugins still loads with the others' tables in it."""
    from overbrainer.config import load

    monkeypatch.setattr(load, "_warned", set())
    write_config("\n[runpod]\n")
    result = run_cli(
        "config", "check", env=plugins_env("local", OVERBRAINER_RUNPOD__API_KEY="rpa_" + "x" * 20)
    )
    assert result.exit_code == 0, result.stderr
    assert result.stderr == (
        "warning: [runpod] is not read: its plugin overbrainer-runpod is installed but not "
        "loaded (OVERBRAINER_LOAD_PLUGINS, or a load error `overbrainer plugins` shows)\n"
    )
    assert "runpod." not in result.stdout
    assert "rpa_" not in result.stdout + result.stderr


def test_any_other_unknown_table_is_an_unknown_field(run_cli, write_config):
    write_config("\n[vendor]\nretries = 1\n")
    result = run_cli("config", "check", env=plugins_env("local"))
    assert result.exit_code == 1
    assert problems(result) == ["vendor: unknown field"]
