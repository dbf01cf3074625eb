"""The plugin template works as an installed third-party plugin would."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.trainer import group_alive


def test_the_template_is_listed(nice_installed, run_cli):
    result = run_cli("plugins", env={"OVERBRAINER_LOAD_PLUGINS": "local,nice"})
    assert (
        "nice  overbrainer-nice 0.1.0  kinds: nice  hooks: create_executor, register_targets"
        in result.stdout
    )


def test_a_run_on_the_template_target_trains_at_low_priority(nice_installed, trainer):
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
