"""export and compare on an ``ssh`` target (a real sshd on 127.0.0.1): the inputs go up when
the target lacks them, the GGUF comes home verified, the child's answers come home; the base
model's GGUF is made there, comes home to be kept, and goes up again only when needed."""

from __future__ import annotations

import json

import pytest
from tests.helpers.compare import JUDGE_PROMPT, eval_record
from tests.helpers.fake_provider import openai_completion

SSH_TARGET = """
[training]
target = "gpu"
base_model = "models/tiny"
adapter = "lora"

[targets.gpu]
kind = "ssh"
venv = "{venv}"
"""


@pytest.fixture
def remote_run(finished, sshd, ssh_target_env):
    ssh_target_env("gpu")
    config = finished.dir / "overbrainer.toml"
    config.write_text(
        config.read_text().split("\n[training]")[0] + SSH_TARGET.format(venv=finished.venv)
    )
    remote = sshd.home / "overbrainer" / finished.run_id
    finished.record(target="gpu", remote_dir=str(remote))
    base = sshd.home / "models" / "tiny"  # the base model as training saw it, on the target
    base.mkdir(parents=True)
    (base / "config.json").write_text("{}")
    (finished.run_dir / "axolotl.yaml").write_text(f"base_model: {base}\nsequence_len: 384\n")
    (finished.run_dir / "data").mkdir()
    (finished.run_dir / "data" / "eval.jsonl").write_text(
        "".join(json.dumps(eval_record(i)) + "\n" for i in range(3))
    )
    return finished, remote


def test_export_then_compare_over_ssh(remote_run, run_cli, provider, monkeypatch):
    finished, remote = remote_run
    result = run_cli("export", finished.run_id, "--quantize", "Q8_0")
    assert result.exit_code == 0, result.stderr
    assert (remote / "output" / "config.json").is_file()  # uploaded: the target had no run
    assert not (remote / "output" / "gguf").exists()
    gguf = finished.run_dir / "output" / "gguf" / f"{finished.run_id}-Q8_0.gguf"
    assert gguf.read_bytes() == b"GGUF converted auto from ../../output quantized 7"
    [record] = finished.run_dir.glob("exports/*/export.json")
    assert (record.parent / "export.log").read_text().startswith("converting")

    monkeypatch.setenv("OVERBRAINER_PROVIDERS__MAIN__BASE_URL", provider.url)
    provider.on(
        lambda seen: JUDGE_PROMPT in seen.prompt,
        openai_completion('{"verdict": "B", "reason": "B says more."}'),
        times=None,
    )
    result = run_cli("compare", "--limit", "3")
    assert result.exit_code == 0, result.stderr
    [directory] = finished.run_dir.glob("compares/*")
    assert (remote / "output" / "gguf" / gguf.name).is_file()  # sent up for the server
    data = json.loads((directory / "compare.json").read_text())
    assert [q["child"] for q in data["questions"]] == [
        f"Child answer to: Question {i}: what is ownership?" for i in range(3)
    ]
    assert "serving" in (directory / "server.log").read_text()
    assert data["hardware"]["build"] == "cpu"
    # The base model: its GGUF made on the target, brought home and kept; its answers too.
    assert [entry["name"] for entry in data["against"]] == ["base", "parent"]
    assert [q["against"]["base"]["answer"] for q in data["questions"]] == [
        f"Base answer to: Question {i}: what is ownership?" for i in range(3)
    ]
    [kept] = (finished.dir / ".overbrainer" / "bases").glob("tiny-*/base-Q8_0.gguf")
    assert kept.read_bytes().startswith(b"GGUF converted auto from ")
    job = remote / "compares" / directory.name
    assert not list(job.glob("*.gguf")) and not (job / "export-result.json").exists()
    # A second compare asks the base only the new question: the kept GGUF goes up for it.
    (finished.run_dir / "data" / "eval.jsonl").write_text(
        "".join(json.dumps(eval_record(i)) + "\n" for i in range(4))
    )
    result = run_cli("compare")
    assert result.exit_code == 0, result.stderr
    assert "making a GGUF" not in result.stderr
    assert "uploading base-Q8_0.gguf to the target" in result.stderr
    assert (
        "the base model answered 1 question; 3 answers kept from earlier compares reused"
    ) in result.stderr
    newest = max(finished.run_dir.glob("compares/*"))
    data = json.loads((newest / "compare.json").read_text())
    assert [q["against"]["base"]["answer"] for q in data["questions"]] == [
        f"Base answer to: Question {i}: what is ownership?" for i in range(4)
    ]
    assert not list((remote / "compares" / newest.name).glob("*.gguf"))
