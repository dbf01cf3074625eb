"""The executor template works through the CLI as an installed third-party plugin."""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from pathlib import Path

TEMPLATE = Path(__file__).parents[2] / "contrib" / "executor-template"


def _template_tests() -> type:
    """The template's own contract tests, collected here too (they import its package)."""
    sys.path.insert(0, str(TEMPLATE))
    spec = importlib.util.spec_from_file_location(
        "executor_template_contract", TEMPLATE / "tests" / "test_contract.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.TestSpoolExecutor


TestSpoolExecutor = _template_tests()


def test_the_template_trains_and_is_read_through_the_cli(
    spool_installed,
    trainer,
    run_cli,
    tmp_path,
    monkeypatch,
):
    monkeypatch.setenv("OVERBRAINER_LOAD_PLUGINS", "local,spool")
    config = trainer.dir / "overbrainer.toml"
    config.write_text(
        config.read_text().replace('target = "local"', 'target = "queue"')
        + f'\n[targets.queue]\nkind = "spool"\ndirectory = "{tmp_path / "spool"}"\n'
        + f'python = "{trainer.venv}/bin/python"\n'
    )
    assert "spool  overbrainer-spool 0.1.0  kinds: spool" in run_cli("plugins").stdout
    result = run_cli("train")
    assert result.exit_code == 0, result.stderr
    run = trainer.run()
    assert run["state"] == "succeeded"
    assert run["job"]["data"] == {"pid": run["job"]["data"]["pid"], "directory": run["remote_dir"]}
    home = trainer.dir / "runs" / run["id"]
    assert (home / "output" / "adapter_model.safetensors").read_bytes() == b"fake adapter weights"
    assert result.stdout.splitlines()[1] == f"train: adapter in runs/{run['id']}/output"
    logs = run_cli("runs", "logs", run["id"])
    assert "fake axolotl: training completed" in logs.stdout
    assert json.loads((home / "metrics.jsonl").read_text().splitlines()[0])["event"] == "stage"


def test_a_traced_hook_call_shows_the_executor_without_the_environment(tmp_path, capsys):
    import overbrainer_spool  # on sys.path through the template's contract tests above
    from overbrainer.plugins import trace
    from overbrainer.project import Project
    from overbrainer.testing.jobs import contract_settings, manager_with

    plugins = manager_with(overbrainer_spool.plugin)
    target = plugins.kinds["spool"].model_validate({"kind": "spool", "directory": str(tmp_path)})
    secret = "plain-words-no-redactor-knows-7f3a"
    env = {"PATH": "/usr/bin:/bin", "MY_SERVICE_PASSWORD": secret}
    project = Project(tmp_path, contract_settings("queue", target), env)
    trace(plugins.pm)
    hooks = plugins.hook
    executor = hooks.create_executor(name="queue", target=target, project=project, run=None)
    hooks.describe_target(executor=executor)
    printed = capsys.readouterr().err
    assert "trace: describe_target(executor=SpoolExecutor(name='queue', target=" in printed
    assert secret not in printed
    assert "MY_SERVICE_PASSWORD" not in printed


def test_the_plugin_guide_shows_the_whole_template_and_it_is_short():
    source = (TEMPLATE / "overbrainer_spool" / "__init__.py").read_text()
    guide = (TEMPLATE.parents[1] / "docs" / "plugins.md").read_text()
    assert f"```python\n{source}```" in guide
    executor = source.split("# isort: on\n", 1)[1]  # what follows the imports
    assert len(executor.splitlines()) < 150
