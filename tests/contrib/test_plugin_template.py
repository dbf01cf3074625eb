"""The plugin template works as an installed third-party plugin would."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
from tests.train.conftest import group_alive, trainer  # noqa: F401 - the fixture

TEMPLATE = Path(__file__).parents[2] / "contrib" / "plugin-template"


@pytest.fixture
def nice_installed(tmp_path, monkeypatch):
    """The template on sys.path with a .dist-info declaring its entry point."""
    info = tmp_path / "site" / "overbrainer_nice-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: overbrainer-nice\nVersion: 0.1.0\n"
    )
    (info / "entry_points.txt").write_text("[overbrainer]\nnice = overbrainer_nice\n")
    monkeypatch.syspath_prepend(str(TEMPLATE))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    importlib.invalidate_caches()
    yield f"{TEMPLATE}:{tmp_path / 'site'}"
    sys.modules.pop("overbrainer_nice", None)


def test_the_template_is_listed(nice_installed, run_cli):
    result = run_cli("plugins", env={"OVERBRAINER_LOAD_PLUGINS": "local,nice"})
    assert (
        "nice  overbrainer-nice 0.1.0  kinds: nice  hooks: create_executor, register_targets"
        in result.stdout
    )


def test_a_run_on_the_template_target_trains_at_low_priority(nice_installed, trainer):  # noqa: F811
    config = trainer.dir / "overbrainer.toml"
    config.write_text(
        config.read_text().replace('target = "local"', 'target = "background"')
        + f'\n[targets.background]\nkind = "nice"\nniceness = 15\nvenv = "{trainer.venv}"\n'
        + 'pass_env = ["FAKE_AXOLOTL_*"]\n'
    )
    process = trainer.spawn(
        "train",
        env={
            "OVERBRAINER_LOAD_PLUGINS": "local,nice",
            "FAKE_AXOLOTL_HANG": "1",
            "PYTHONPATH": nice_installed,
        },
    )
    run = trainer.wait_running()
    pid = run["job"]["pid"]
    nice = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])
    assert nice == 15
    process.kill()
    process.wait()
    assert group_alive(pid)
