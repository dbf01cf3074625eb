"""overbrainer push against a loopback Hub speaking huggingface_hub's endpoints."""

from __future__ import annotations

import json

from tests.helpers.fake_hub import FakeHub
from tests.helpers.push import READ_TOKEN, TOKEN, online


def test_push_sends_one_commit_with_the_card_and_the_gguf_at_the_root(pushable, hub, run_cli):
    result = run_cli("push", pushable.run_id)
    assert result.exit_code == 0, result.stderr
    repo = hub.repos["alice/Demo-Project"]
    assert repo.private is True
    assert len(hub.commits()) == 1
    assert sorted(repo.files) == sorted([
        "README.md", "Modelfile", f"{pushable.run_id}-Q4_K_M.gguf", "adapter_config.json",
        "config.json", "model.safetensors",
    ])  # fmt: skip
    card = repo.files["README.md"].decode()
    assert card.startswith("---\nbase_model: models/tiny\n")
    assert "ollama run hf.co/alice/Demo-Project:Q4_K_M" in card
    assert "Final training loss: 2.5000" in card and "Final eval loss: 2.2500" in card
    assert card.endswith("<!-- overbrainer:card -->\n")
    assert "api_key" not in card and "base_url" not in card and "[targets" not in card
    record = json.loads((pushable.run_dir / "hub" / "push.json").read_text())
    assert record["repo"] == "alice/Demo-Project"
    assert record["private"] is True
    assert record["commit"] == repo.sha
    assert record["url"] == f"{hub.url}/alice/Demo-Project"
    assert "README.md" in record["files"]
    assert result.stdout.startswith(f"push: {hub.url}/alice/Demo-Project (6 files, ")


def test_a_second_push_keeps_the_hand_edited_part_of_the_card(pushable, hub, run_cli):
    assert run_cli("push", pushable.run_id).exit_code == 0
    repo = hub.repos["alice/Demo-Project"]
    repo.files["README.md"] += b"\n## My notes\n\nWritten by hand.\n"
    (pushable.run_dir / "metrics.jsonl").write_text('{"event": "log", "loss": 1.0}\n')
    result = run_cli("push", pushable.run_id)
    assert result.exit_code == 0, result.stderr
    assert "repo alice/Demo-Project exists and stays private" in result.stderr
    card = repo.files["README.md"].decode()
    assert "Final training loss: 1.0000" in card
    assert card.endswith("<!-- overbrainer:card -->\n## My notes\n\nWritten by hand.\n")
    assert len(hub.commits()) == 2


def test_a_readme_of_someone_else_is_kept(pushable, hub, run_cli):
    assert run_cli("push", pushable.run_id).exit_code == 0
    repo = hub.repos["alice/Demo-Project"]
    repo.files["README.md"] = b"# My own card\n"
    result = run_cli("push", pushable.run_id)
    assert "kept the repo's own README.md (use --overwrite-card to replace it)" in result.stderr
    assert repo.files["README.md"] == b"# My own card\n"
    result = run_cli("push", pushable.run_id, "--overwrite-card")
    assert repo.files["README.md"].decode().endswith("<!-- overbrainer:card -->\n")


def test_a_private_run_is_refused_into_a_public_repo(pushable, hub, run_cli):
    assert run_cli("push", pushable.run_id, "--repo", "alice/open", "--public").exit_code == 0
    assert hub.repos["alice/open"].private is False
    result = run_cli("push", pushable.run_id, "--repo", "alice/open")
    assert result.exit_code == 1
    assert (
        f"error: run {pushable.run_id} is pushed private, and repo alice/open is public: "
        "refusing to make it public (use --public or [hub] private = false)"
    ) in result.stderr
    assert len(hub.commits()) == 1


def test_the_token_is_never_printed_nor_written(pushable, hub, run_cli):
    hub.status_override["/api/models/alice/Demo-Project/commit"] = 500
    result = run_cli("push", pushable.run_id)
    assert result.exit_code == 1
    assert "Hugging Face request failed" in result.stderr
    hub.status_override.clear()
    result = run_cli("push", pushable.run_id)
    assert result.exit_code == 0
    assert TOKEN not in result.stdout + result.stderr
    for path in pushable.dir.rglob("*"):
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), path
    assert {
        (r.path, r.headers.get("authorization")) for r in hub.requests if r.path.startswith("/api/")
    } <= {(r.path, f"Bearer {TOKEN}") for r in hub.requests}


def test_no_token_says_what_to_set(pushable, hub, run_cli, monkeypatch, tmp_path):
    monkeypatch.delenv("OVERBRAINER_HF_TOKEN")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "no-hf"))
    result = run_cli("push", pushable.run_id)
    assert (
        "error: OVERBRAINER_HF_TOKEN is not set: a Hugging Face token with write access is "
        "needed to push"
    ) in result.stderr


def test_a_refused_token_and_a_read_only_token(pushable, hub, run_cli, monkeypatch):
    monkeypatch.setenv("OVERBRAINER_HF_TOKEN", "hf_wrong")
    result = run_cli("push", pushable.run_id)
    assert (
        "Hugging Face refused the token: set OVERBRAINER_HF_TOKEN to a valid token with write "
        "access"
    ) in result.stderr
    monkeypatch.setenv("OVERBRAINER_HF_TOKEN", READ_TOKEN)
    hub.status_override["/api/repos/create"] = 403
    result = run_cli("push", pushable.run_id)
    assert (
        "the Hugging Face token needs write access to alice: set OVERBRAINER_HF_TOKEN to a "
        "token that has it"
    ) in result.stderr


def test_dry_run_sends_nothing_and_needs_no_token(pushable, hub, run_cli, monkeypatch):
    monkeypatch.delenv("OVERBRAINER_HF_TOKEN")
    result = run_cli("push", pushable.run_id, "--dry-run")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "push: <you>/Demo-Project, private when created; nothing is sent (--dry-run)"
    assert f"{pushable.run_id}-Q4_K_M.gguf  9 B" in lines
    assert lines[-1].startswith("push: 5 files, ")
    assert lines[-1].endswith(f"card written to runs/{pushable.run_id}/hub/README.md")
    assert (pushable.run_dir / "hub" / "README.md").is_file()
    assert hub.requests == []


def test_push_without_run_id_takes_the_latest_run_as_export_does(
    pushable, hub, run_cli, monkeypatch
):
    monkeypatch.delenv("OVERBRAINER_HF_TOKEN")
    result = run_cli("push", "--dry-run")
    assert result.exit_code == 0, result.stderr
    assert f"{pushable.run_id}-Q4_K_M.gguf  9 B" in result.stdout.splitlines()
    assert (pushable.run_dir / "hub" / "README.md").is_file()
    assert hub.requests == []


def test_a_bad_repo_and_an_http_hub_off_loopback(pushable, hub, run_cli, monkeypatch):
    result = run_cli("push", pushable.run_id, "--repo", "nope")
    assert "error: `nope` is not a Hugging Face repo: use NAMESPACE/NAME" in result.stderr
    monkeypatch.setenv("OVERBRAINER_HUB__BASE_URL", "http://example.com")
    result = run_cli("push", pushable.run_id)
    assert "hub.base_url must be https (http only on a loopback address)" in result.stderr


def test_a_stopped_run_with_only_a_checkpoint_is_not_pushed(pushable, hub, run_cli):
    output = pushable.run_dir / "output"
    for name in ("config.json", "adapter_config.json"):
        (output / name).unlink()
    (output / "checkpoint-4" / "adapter_config.json").write_text("{}")
    pushable.record(state="stopped", snapshot={"checkpoint": "output/checkpoint-4", "step": 4})
    result = run_cli("push", pushable.run_id)
    assert (
        f"run {pushable.run_id} has no model in output/ (only checkpoint output/checkpoint-4): "
        "export or resume it first"
    ) in result.stderr


def test_after_training_pushes_a_succeeded_run_once(trainer, run_cli, monkeypatch):
    online(monkeypatch)
    server = FakeHub({TOKEN: ("alice", "write")}).start()
    try:
        monkeypatch.setenv("OVERBRAINER_HUB__BASE_URL", server.url)
        trainer.configure(extra='\n[hub]\nafter_training = true\nrepo = "alice/child"\n')
        result = run_cli("train")
        assert "OVERBRAINER_HF_TOKEN is not" in result.stderr
        assert "push failed: OVERBRAINER_HF_TOKEN is not set" in result.stderr
        monkeypatch.setenv("OVERBRAINER_HF_TOKEN", TOKEN)
        result = run_cli("train")
        assert result.exit_code == 0, result.stderr
        run_id = trainer.run()["id"]
        assert f"push: {server.url}/alice/child (" in result.stdout
        assert (trainer.dir / "runs" / run_id / "hub" / "push.json").is_file()
        assert len(server.commits()) == 1
    finally:
        server.stop()


def test_a_path_clash_in_the_repo_is_an_error(pushable, hub, run_cli):
    (pushable.run_dir / "output" / "gguf" / "config.json").write_text("{}")
    result = run_cli("push", pushable.run_id)
    assert result.exit_code == 1
    assert "gguf/config.json and config.json both go to config.json in the repo" in result.stderr
    assert hub.commits() == []


def test_an_unreachable_hub_is_a_clear_error(pushable, run_cli, monkeypatch):
    monkeypatch.setenv("OVERBRAINER_HUB__BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("OVERBRAINER_HF_TOKEN", TOKEN)
    result = run_cli("push", pushable.run_id)
    assert result.exit_code == 1
    assert "error: Hugging Face request failed: " in result.stderr
    assert TOKEN not in result.stderr


def test_hugging_face_offline_mode_is_honoured_and_said(pushable, hub, run_cli, monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    result = run_cli("push", pushable.run_id)
    assert result.exit_code == 1
    assert "offline mode is enabled" in result.stderr
    assert "HF_HUB_OFFLINE" in result.stderr
    assert hub.commits() == []
    assert TOKEN not in result.stderr


def test_push_reads_hf_token_then_the_token_file_of_hf_auth_login(
    pushable, hub, run_cli, monkeypatch, tmp_path
):
    monkeypatch.delenv("OVERBRAINER_HF_TOKEN")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    result = run_cli("push", pushable.run_id)
    assert result.exit_code == 0, result.stderr
    assert TOKEN not in result.stdout + result.stderr
    monkeypatch.delenv("HF_TOKEN")
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "token").write_text(TOKEN + "\n")
    result = run_cli("push", pushable.run_id)
    assert result.exit_code == 0, result.stderr
    assert len(hub.commits()) == 2
    (tmp_path / "hf" / "token").unlink()
    result = run_cli("push", pushable.run_id)
    assert result.exit_code == 1
    assert (
        "error: OVERBRAINER_HF_TOKEN is not set: a Hugging Face token with write access is "
        "needed to push (nor is HF_TOKEN, and `hf auth login` saved no token)"
    ) in result.stderr


def test_the_tools_token_goes_to_huggingface_or_this_machine_only(
    pushable, run_cli, monkeypatch, tmp_path
):
    """A project's .env may point hub.base_url elsewhere: the user's own token (HF_TOKEN,
    `hf auth login`'s file) is not sent there."""
    monkeypatch.delenv("OVERBRAINER_HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("OVERBRAINER_HUB__BASE_URL", "https://hub.example.org")
    result = run_cli("push", pushable.run_id)
    assert result.exit_code == 1
    assert result.stderr.endswith(
        "error: OVERBRAINER_HF_TOKEN is not set: a token for the hub at "
        "https://hub.example.org is needed to push (HF_TOKEN and `hf auth login`'s token are "
        "sent to huggingface.co only)\n"
    )
    assert TOKEN not in result.stderr


def test_a_projects_env_file_does_not_choose_the_token_file(
    pushable, hub, run_cli, monkeypatch, tmp_path
):
    monkeypatch.delenv("OVERBRAINER_HF_TOKEN")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "no-hf"))
    planted = tmp_path / "planted"
    planted.write_text(TOKEN + "\n")
    env_file = pushable.run_dir.parents[1] / ".env"
    env_file.write_text(f"HF_TOKEN_PATH={planted}\nHF_TOKEN={TOKEN}\n")
    result = run_cli("push", pushable.run_id)
    assert result.exit_code == 1
    assert "error: OVERBRAINER_HF_TOKEN is not set" in result.stderr
    assert hub.commits() == []


def write_compare(run_dir, name: str, summary: dict) -> None:
    directory = run_dir / "compares" / name
    directory.mkdir(parents=True)
    (directory / "compare.json").write_text(json.dumps({"summary": summary}))


def test_require_win_rate_checks_the_latest_compares_lower_bound(pushable, hub, run_cli):
    result = run_cli("push", pushable.run_id, "--require-win-rate", "0.5")
    assert result.exit_code == 1
    assert (
        f"error: run {pushable.run_id} has no compare: run `overbrainer compare --run "
        f"{pushable.run_id}` first (--require-win-rate 0.5 needs one)"
    ) in result.stderr
    good = {"win_or_tie": 0.9, "intervals": {"win_or_tie": [0.6, 0.98]}}
    write_compare(pushable.run_dir, "compare_20260101-000000", good)
    weak = {"win_or_tie": 0.625, "intervals": {"win_or_tie": [0.305, 0.863]}}
    write_compare(pushable.run_dir, "compare_20260102-000000", weak)
    result = run_cli("push", pushable.run_id, "--require-win-rate", "0.5")
    assert result.exit_code == 1
    assert (
        f"error: the newest compare of run {pushable.run_id} against its parent "
        "(compare_20260102-000000) has a win-or-tie rate of 62.5%, 95% interval 30.5%-86.3%: "
        "its lower bound is under --require-win-rate 0.5; nothing was pushed"
    ) in result.stderr
    assert hub.commits() == []
    result = run_cli("push", pushable.run_id, "--require-win-rate", "0.3")
    assert result.exit_code == 0, result.stderr
    assert len(hub.commits()) == 1


def test_require_win_rate_reads_a_compare_of_an_earlier_version(pushable, hub, run_cli):
    old = {"questions": 10, "unparsed": 0, "wins": 9, "ties": 1, "win_or_tie": 1.0}
    write_compare(pushable.run_dir, "compare_20260101-000000", old)
    assert run_cli("push", pushable.run_id, "--require-win-rate", "0.7", "--dry-run").exit_code == 0
    result = run_cli("push", pushable.run_id, "--require-win-rate", "0.8", "--dry-run")
    assert "95% interval 72.2%-100.0%: its lower bound is under" in result.stderr
    none = {"questions": 2, "unparsed": 2, "wins": 0, "ties": 0, "win_or_tie": None}
    write_compare(pushable.run_dir, "compare_20260102-000000", none)
    result = run_cli("push", pushable.run_id, "--require-win-rate", "0.1", "--dry-run")
    assert (
        f"error: the newest compare of run {pushable.run_id} against its parent "
        "(compare_20260102-000000) judged no question: --require-win-rate 0.1 cannot be checked"
    ) in result.stderr
    result = run_cli("push", pushable.run_id, "--require-win-rate", "1.5")
    assert result.exit_code == 2 and "1.5 is not in the range 0<=x<=1" in result.stderr


def test_a_local_base_model_is_named_as_such_never_by_its_path(pushable, hub, run_cli, tmp_path):
    base = tmp_path / "secret-dir" / "my-base"
    base.mkdir(parents=True)
    (pushable.run_dir / "axolotl.yaml").write_text(f"base_model: {base}\nsequence_len: 384\n")
    result = run_cli("push", pushable.run_id, "--dry-run")
    assert result.exit_code == 0, result.stderr
    card = (pushable.run_dir / "hub" / "README.md").read_text()
    assert "secret-dir" not in card
    assert "base_model:" not in card.split("---")[1]
    assert "into a local model (`my-base`) with [overbrainer]" in card


def test_the_card_gives_the_latest_compares_rate_with_its_interval(pushable, run_cli):
    summary = {"questions": 12, "win_or_tie": 0.75, "intervals": {"win_or_tie": [0.468, 0.911]}}
    write_compare(pushable.run_dir, "compare_20260101-000000", summary)
    assert run_cli("push", pushable.run_id, "--dry-run").exit_code == 0
    card = (pushable.run_dir / "hub" / "README.md").read_text()
    assert (
        "- Compared with the parent: win-or-tie rate 75% (95% interval 47%-91%, each question "
        "judged in both orders) over 12 questions (judged)"
    ) in card


def test_a_projects_env_file_does_not_send_the_shells_token_to_its_host(
    pushable, hub, run_cli, monkeypatch
):
    """OVERBRAINER_HF_TOKEN from the shell, hub.base_url from the project's .env: refused
    before anything is sent; the same host set in the shell is the user's own choice."""
    monkeypatch.delenv("OVERBRAINER_HUB__BASE_URL")
    env_file = pushable.run_dir.parents[1] / ".env"
    env_file.write_text("OVERBRAINER_HUB__BASE_URL=https://hub.example.invalid\n")
    result = run_cli("push", pushable.run_id)
    assert result.exit_code == 1
    assert result.stderr.endswith(
        "error: OVERBRAINER_HF_TOKEN comes from your shell, and hub.base_url "
        "(https://hub.example.invalid) from the project's files: the shell's token goes only "
        "to huggingface.co or this machine; set OVERBRAINER_HUB__BASE_URL in the shell too if "
        "that hub is yours\n"
    )
    assert TOKEN not in result.stderr + result.stdout
    # The project's own token, in its .env, goes where its .env says.
    monkeypatch.delenv("OVERBRAINER_HF_TOKEN")
    env_file.write_text(f"OVERBRAINER_HUB__BASE_URL={hub.url}\nOVERBRAINER_HF_TOKEN={TOKEN}\n")
    assert run_cli("push", pushable.run_id).exit_code == 0
