"""`run` checks the base model can be loaded on the target before it pays for anything.

The project trains on the local target with the fake trainer; the Hub is the loopback fake
(`HF_ENDPOINT`), or the closed port every test starts with.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.helpers.fake_hub import FakeHub, Repo
from tests.helpers.project import CLOSED_HUB, cached_model
from tests.helpers.watching import CYCLE, save

from overbrainer.train import model_check

GATED = "meta-llama/Llama-3.2-1B"
TOKEN = "hf_probe_token_0123456789"


@pytest.fixture(autouse=True)
def online(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Hub these tests reach is a port on this machine (``HF_ENDPOINT``): CI's
    ``HF_HUB_OFFLINE`` would make every case the offline one."""
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    fake = FakeHub({TOKEN: ("someone", "read")}).start()
    monkeypatch.setenv("HF_ENDPOINT", fake.url)
    yield fake
    fake.stop()


def use_model(project_dir: Path, model: str) -> None:
    config = project_dir / "overbrainer.toml"
    save(config, re.sub(r'(?m)^base_model = ".*"$', f'base_model = "{model}"', config.read_text()))


def assert_nothing_paid(result, provider, project_dir: Path, message: str) -> None:
    assert result.exit_code == 1
    assert result.stderr.endswith(f"{message}; nothing was paid for yet\n"), result.stderr
    assert provider.chats() == []
    assert not (project_dir / "data" / "answers.jsonl").exists()
    assert not (project_dir / "runs").exists() or not any((project_dir / "runs").iterdir())


def test_a_model_neither_cached_nor_reachable_stops_run_before_any_request(
    run_cli, project_dir, provider, isolated_env
):
    use_model(project_dir, "Org/Unseen-0.5B")
    result = run_cli("run")
    cache = isolated_env / ".cache/huggingface/hub"
    assert_nothing_paid(
        result,
        provider,
        project_dir,
        "error: training.base_model `Org/Unseen-0.5B` cannot be loaded on target `local`: it "
        f"is not in the Hugging Face cache ({cache}) and {CLOSED_HUB} cannot be reached "
        "([Errno 111] Connection refused); download it there first, or set "
        "training.base_model to a local directory",
    )


def test_the_same_model_in_the_cache_trains(run_cli, project_dir, provider, isolated_env):
    use_model(project_dir, "Org/Unseen-0.5B")
    cached_model(isolated_env, "Org/Unseen-0.5B")
    result = run_cli("run")
    assert result.exit_code == 0, result.stderr
    assert provider.chats()
    assert "train: run " in result.stdout


def test_offline_and_not_cached_is_said_so(
    run_cli, project_dir, provider, isolated_env, monkeypatch
):
    use_model(project_dir, "Org/Unseen-0.5B")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    result = run_cli("run")
    cache = isolated_env / ".cache/huggingface/hub"
    assert_nothing_paid(
        result,
        provider,
        project_dir,
        "error: training.base_model `Org/Unseen-0.5B` cannot be loaded on target `local`: it "
        f"is not in the Hugging Face cache ({cache}) and HF_HUB_OFFLINE is set; download it "
        "there first, or set training.base_model to a local directory",
    )


def test_a_name_the_hub_does_not_know_is_a_404(run_cli, project_dir, provider, hub):
    use_model(project_dir, "Org/Typo-0.5B")
    result = run_cli("run")
    assert_nothing_paid(
        result,
        provider,
        project_dir,
        "error: training.base_model `Org/Typo-0.5B` cannot be loaded on target `local`: "
        f"{hub.url} has no such model (404); check its name",
    )
    assert [r.path for r in hub.requests] == ["/api/models/Org/Typo-0.5B"]


def test_a_gated_model_without_a_token_asks_for_one(run_cli, project_dir, provider, hub):
    use_model(project_dir, GATED)
    hub.status_override[f"/api/models/{GATED}"] = 401
    result = run_cli("run")
    assert_nothing_paid(
        result,
        provider,
        project_dir,
        f"error: training.base_model `{GATED}` cannot be loaded on target `local`: {hub.url} "
        "answered 401; it is gated or private: set OVERBRAINER_HF_TOKEN to a token with access",
    )
    assert "authorization" not in hub.requests[0].headers


def test_a_token_without_access_is_told_apart(run_cli, project_dir, provider, hub, monkeypatch):
    use_model(project_dir, GATED)
    hub.status_override[f"/api/models/{GATED}"] = 403
    monkeypatch.setenv("OVERBRAINER_HF_TOKEN", "hf_no_access_0123456789")
    result = run_cli("run")
    assert_nothing_paid(
        result,
        provider,
        project_dir,
        f"error: training.base_model `{GATED}` cannot be loaded on target `local`: {hub.url} "
        "answered 403; the token (OVERBRAINER_HF_TOKEN) has no access to it: accept its "
        "licence on the Hub, or use a token that has",
    )


def test_a_model_the_hub_has_trains_and_the_token_went_only_to_the_hub(
    run_cli, project_dir, provider, hub, monkeypatch
):
    hub.repos[GATED] = Repo(private=True)
    use_model(project_dir, GATED)
    monkeypatch.setenv("OVERBRAINER_HF_TOKEN", TOKEN)
    result = run_cli("run")
    assert result.exit_code == 0, result.stderr
    [asked] = hub.requests
    assert asked.path == f"/api/models/{GATED}"
    assert asked.headers["authorization"] == f"Bearer {TOKEN}"
    assert TOKEN not in result.stdout + result.stderr


def test_a_local_directory_must_hold_a_config(run_cli, project_dir, provider, tmp_path):
    model = tmp_path / "my-model"
    model.mkdir()
    use_model(project_dir, str(model))
    result = run_cli("run")
    assert_nothing_paid(
        result,
        provider,
        project_dir,
        f"error: training.base_model `{model}` cannot be loaded on target `local`: the "
        "directory has no config.json there",
    )
    use_model(project_dir, str(tmp_path / "nowhere"))
    result = run_cli("run")
    assert result.stderr.endswith("the directory does not exist there; nothing was paid for yet\n")
    (model / "config.json").write_text("{}")
    use_model(project_dir, str(model))
    assert run_cli("run").exit_code == 0


def test_the_token_is_never_on_a_command_line(tmp_path):
    """The probe's script names the model and its timeout; the token goes on stdin."""
    script = model_check.probe_script("/no/venv/bin/python", GATED)
    assert TOKEN not in script
    seen = tmp_path / "argv"
    shim = tmp_path / "python"
    shim.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {seen}\nexec {sys.executable} "$@"\n')
    shim.chmod(0o755)
    done = subprocess.run(
        ["sh", "-c", model_check.probe_script(str(shim), GATED)],
        input=f"{TOKEN}\n".encode(),
        capture_output=True,
        env={**os.environ, "HF_ENDPOINT": CLOSED_HUB},
        check=True,
    )
    assert model_check.parse(done.stdout.decode()).where == "unreachable"
    assert TOKEN not in seen.read_text()
    assert GATED in seen.read_text()


def test_a_missing_venv_python_falls_back_to_python3(tmp_path, isolated_env):
    cached_model(isolated_env, GATED)
    done = subprocess.run(
        ["sh", "-c", model_check.probe_script(str(tmp_path / "absent/bin/python"), GATED)],
        input=b"\n",
        capture_output=True,
        env={**os.environ},
        check=True,
    )
    found = model_check.parse(done.stdout.decode())
    assert (found.where, found.ok) == ("cache", True)


def test_watch_probes_a_base_model_once_not_every_cycle(project_dir, provider, hub, watch):
    hub.repos[GATED] = Repo(private=True)
    hub.repos["Org/Other-0.5B"] = Repo(private=False)
    use_model(project_dir, GATED)
    watching = watch(OVERBRAINER_HF_TOKEN=TOKEN)
    watching.line(CYCLE.format(n=1), timeout=60)
    assert [r.path for r in hub.requests] == [f"/api/models/{GATED}"]
    watching.edit('adapter = "lora"', 'adapter = "lora"\nsaves_per_epoch = 2')
    watching.line(CYCLE.format(n=2), timeout=60)
    assert len(hub.requests) == 1  # the same model on the same target: found already
    use_model(project_dir, "Org/Other-0.5B")
    watching.line(CYCLE.format(n=3), timeout=60)
    assert [r.path for r in hub.requests][1:] == ["/api/models/Org/Other-0.5B"]
