"""Plugin discovery through real distributions: a module and a `.dist-info` on `sys.path`."""

from __future__ import annotations

import json

import pytest
from tests.helpers.project import LOCAL_PROVIDER

from overbrainer.plugins import load_plugins

ALIEN = """
    from typing import Literal

    from overbrainer import hookimpl
    from overbrainer.config.model import TargetBase
    from overbrainer.plugin import Executor


    class AlienTarget(TargetBase):
        kind: Literal["alien"]
        nodes: int = 1


    class AlienExecutor(Executor):
        def __init__(self, name):
            self.name = name

        def __repr__(self):
            return f"AlienExecutor({self.name!r})"

        def _unused(self, *args):
            raise NotImplementedError

        describe = claim = launch = poll = request_snapshot = cancel = collect = _unused
        read_log = _unused


    @hookimpl
    def register_targets(register):
        register("alien", AlienTarget)


    @hookimpl
    def create_executor(name, target, project, run):
        if target.kind != "alien":
            return None
        return AlienExecutor(name)
"""

BROKEN = """
    import overbrainer_module_that_does_not_exist  # noqa: F401
"""

TYPO = """
    from overbrainer import hookimpl


    @hookimpl
    def register_target(register):
        register("typo", object)
"""

NOT_A_MODEL = """
    from overbrainer import hookimpl


    @hookimpl
    def register_targets(register):
        register("strange", dict)
"""


def env(*names: str, **extra: str) -> dict[str, str]:
    return {"OVERBRAINER_LOAD_PLUGINS": ",".join(names), **extra}


def test_an_installed_distribution_is_discovered(site):
    site.install("alien", ALIEN, version="2.3.1")
    plugins = load_plugins(env("alien", "local"))
    assert sorted(plugins.kinds) == ["alien", "local"]
    assert plugins.owners["alien"] == "alien"
    [info] = [info for info in plugins.info() if info.name == "alien"]
    assert (info.distribution, info.version) == ("overbrainer-alien", "2.3.1")
    assert info.kinds == ["alien"]
    assert info.hooks == ["create_executor", "register_targets"]


def test_without_a_filter_every_installed_plugin_loads(site):
    site.install("alien", ALIEN)
    plugins = load_plugins({})
    assert {"alien", "local", "ssh", "runpod"} <= set(plugins.kinds)


def test_load_plugins_filters_by_entry_point_name(site):
    site.install("alien", ALIEN)
    assert sorted(load_plugins(env("alien")).kinds) == ["alien"]
    assert sorted(load_plugins(env(" ssh , local ")).kinds) == ["local", "ssh"]
    assert load_plugins(env()).kinds == {}


def test_a_broken_plugin_warns_and_the_others_still_load(run_cli, site):
    site.install("alien", ALIEN)
    site.install("broken", BROKEN)
    site.install("typo", TYPO)
    site.install("strange", NOT_A_MODEL)
    result = run_cli("plugins", env=env("alien", "broken", "typo", "strange", "local"))
    assert result.exit_code == 0, result.stderr
    names = [line.split()[0] for line in result.stdout.splitlines()]
    assert names == ["alien", "local"]
    warnings = sorted(result.stderr.splitlines())
    assert len(warnings) == 3
    assert warnings[0] == (
        "warning: plugin `broken` (overbrainer-broken) could not be loaded: "
        "ModuleNotFoundError: No module named 'overbrainer_module_that_does_not_exist'"
    )
    assert warnings[1] == (
        "warning: plugin `strange` (overbrainer-strange) could not be loaded: "
        "TypeError: target kind `strange` needs a pydantic model, not <class 'dict'>"
    )
    assert warnings[2].startswith(
        "warning: plugin `typo` (overbrainer-typo) could not be loaded: "
        "ValueError: unknown hook 'register_target' in plugin "
    )


def test_a_misspelled_hook_is_rejected_by_check_pending(site):
    site.install("typo", TYPO)
    plugins = load_plugins(env("typo", "local"))
    assert [info.name for info in plugins.info()] == ["local"]
    assert "typo" not in plugins.kinds
    assert plugins.pm.get_plugin("typo") is None
    caller = getattr(plugins.hook, "register_target", None)
    assert caller is None or caller.get_hookimpls() == []


def test_plugins_lists_versions_kinds_and_hooks(run_cli, site):
    site.install("alien", ALIEN, version="2.3.1")
    result = run_cli("plugins", env=env("alien", "local", "ssh"))
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    host = "executor: HostExecutor (open_shell, prepare, release, serve, wait)"
    assert result.stdout == (
        "alien  overbrainer-alien 2.3.1  kinds: alien  hooks: create_executor, register_targets\n"
        f"local  overbrainer-local 0.1.0  kinds: local  {host}  "
        "hooks: create_executor, register_targets\n"
        f"ssh  overbrainer-ssh 0.1.0  kinds: ssh  {host}  "
        "hooks: create_executor, register_targets\n"
    )


def test_plugins_json(run_cli, site):
    site.install("alien", ALIEN, version="2.3.1")
    result = run_cli("plugins", "--json", env=env("alien", "runpod"))
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == [
        {
            "name": "alien",
            "distribution": "overbrainer-alien",
            "version": "2.3.1",
            "kinds": ["alien"],
            "hooks": ["create_executor", "register_targets"],
            "executors": {},
        },
        {
            "name": "runpod",
            "distribution": "overbrainer-runpod",
            "version": "0.1.0",
            "kinds": ["runpod"],
            "hooks": [
                "create_executor", "estimate_price", "register_commands", "register_settings",
                "register_targets", "show_machine_log",
            ],
            "executors": {"RunpodExecutor": ["open_shell", "prepare", "release", "serve"]},
        },
    ]


def test_plugins_with_none_loaded(run_cli):
    result = run_cli("plugins", env=env())
    assert result.stdout == "no plugins installed: install overbrainer-local, -ssh or -runpod\n"
    assert json.loads(run_cli("plugins", "--json", env=env()).stdout) == []


def test_a_target_of_an_installed_kind_is_validated_by_its_model(run_cli, site, write_config):
    write_config('\n[targets.cluster]\nkind = "alien"\nnodes = 4\n')
    result = run_cli("config", "check", env=env("local"))
    assert result.exit_code == 1
    assert result.stderr == (
        "error: invalid configuration:\n"
        "  targets.cluster: no installed plugin provides target kind `alien`: install the "
        "package that does (`overbrainer plugins` lists what is installed)\n"
    )
    site.install("alien", ALIEN)
    result = run_cli("config", "check", env=env("alien", **LOCAL_PROVIDER))
    assert result.exit_code == 0, result.stderr
    assert "targets.cluster.nodes = 4" in result.stdout.splitlines()
    write_config('\n[targets.cluster]\nkind = "alien"\nnodes = "many"\n')
    result = run_cli("config", "check", env=env("alien"))
    assert (
        result.stderr
        == "error: invalid configuration:\n  targets.cluster.nodes: expected an integer\n"
    )


def test_trace_prints_every_hook_call(site, capsys):
    site.install("alien", ALIEN)
    plugins = load_plugins(env("alien", OVERBRAINER_TRACE_PLUGINS="1"))
    target = plugins.kinds["alien"](kind="alien")
    made = plugins.hook.create_executor(name="cluster", target=target, project=None, run=None)
    assert repr(made) == "AlienExecutor('cluster')"
    assert capsys.readouterr().err == (
        "trace: create_executor(name='cluster', target=AlienTarget(kind='alien', nodes=1), "
        "project=None, run=None) -> [alien]\n"
        "trace: create_executor returned AlienExecutor('cluster')\n"
    )


def test_trace_is_off_by_default_and_with_zero(site, capsys):
    site.install("alien", ALIEN)
    for value in (None, "0", ""):
        extra = {} if value is None else {"OVERBRAINER_TRACE_PLUGINS": value}
        plugins = load_plugins(env("alien", **extra))
        plugins.hook.create_executor(
            name="x", target=plugins.kinds["alien"](kind="alien"), project=None, run=None
        )
    assert capsys.readouterr().err == ""


def test_trace_masks_secrets_even_in_long_arguments(site, capsys):
    site.install("alien", ALIEN)
    plugins = load_plugins(env("alien", OVERBRAINER_TRACE_PLUGINS="1"))
    # The secret straddles the point where a long argument is cut short.
    name = "n" * 139 + " sk-" + "A" * 30
    plugins.hook.create_executor(
        name=name, target=plugins.kinds["alien"](kind="alien"), project=None, run=None
    )
    err = capsys.readouterr().err
    assert "AAAA" not in err
    assert "***" in err


@pytest.mark.parametrize("kind", ["local", "ssh", "runpod"])
def test_our_kinds_name_their_package_when_missing(run_cli, write_config, kind):
    write_config(f'\n[targets.t]\nkind = "{kind}"\n')
    result = run_cli("config", "check", env=env())
    assert result.stderr == (
        "error: invalid configuration:\n"
        f"  targets.t: no installed plugin provides target kind `{kind}`: install "
        f"overbrainer-{kind} (pip install 'overbrainer[{kind}]')\n"
    )
