"""``dataset import hf:ORG/NAME[:SPLIT]`` against a loopback Hub (``HF_ENDPOINT``)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from tests.helpers.fake_hub import FakeHub, Repo
from tests.helpers.pipeline_data import lines

from overbrainer.pipeline.hub_dataset import in_split

TOKEN = "hf_datasetTOKENvalue0123456789"


def jsonl(rows: list[dict]) -> bytes:
    return "".join(json.dumps(row) + "\n" for row in rows).encode()


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    """The Hub of these tests, on loopback: the offline mode CI sets is lifted (huggingface_hub
    reads it once, at import)."""
    import huggingface_hub.constants

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    server = FakeHub({TOKEN: ("alice", "read")}).start()
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    server.datasets["org/rust-qa"] = Repo(private=False, files={
        "README.md": b"# rust qa\n",
        "data/train-00000-of-00001.jsonl": jsonl([
            {"question": "What is ownership in Rust?", "answer": "One owner per value."},
            {"question": "What does the borrow checker verify?"},
        ]),
        "data/test-00000-of-00001.jsonl": jsonl([
            {"question": "Why can a String not be copied implicitly?", "answer": "It owns heap."},
        ]),
    })
    yield server
    server.stop()


def test_a_hub_dataset_s_split_is_imported(run_cli, project_dir, hub):
    result = run_cli("dataset", "import", "hf:org/rust-qa", "--topic", "ownership")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith(
        "dataset: imported 2 questions, 1 answer from hf:org/rust-qa:train (0 duplicates skipped)"
    )
    questions = lines(project_dir, "questions.jsonl")
    assert [q["text"] for q in questions] == [
        "What is ownership in Rust?", "What does the borrow checker verify?"
    ]
    assert {q["source"] for q in questions} == {"import:hf:org/rust-qa:train"}
    result = run_cli("dataset", "import", "hf:org/rust-qa:test", "--topic", "ownership")
    assert result.exit_code == 0, result.stderr
    assert "1 question, 1 answer from hf:org/rust-qa:test" in result.stdout
    assert not [r for r in hub.requests if "README" in r.path]  # only the split's files


def test_offline_the_hub_is_not_asked(run_cli, project_dir, hub, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    result = run_cli("dataset", "import", "hf:org/rust-qa", "--topic", "ownership")
    assert result.exit_code != 0
    assert "hf:org/rust-qa:train: HF_HUB_OFFLINE is set" in result.stderr
    assert "Traceback" not in result.stderr
    assert hub.requests == []


def test_what_cannot_be_imported_is_said(run_cli, project_dir, hub, monkeypatch):
    hub.datasets["org/parquet"] = Repo(private=False, files={
        "data/train-00000-of-00001.parquet": b"PAR1"
    })
    result = run_cli("dataset", "import", "hf:org/parquet", "--topic", "ownership")
    assert "no JSON Lines or CSV file in the dataset (its files are Parquet" in result.stderr
    result = run_cli("dataset", "import", "hf:org/rust-qa:validation", "--topic", "ownership")
    assert "no JSON Lines or CSV file of split 'validation'; its splits: test, train" in (
        result.stderr)
    result = run_cli("dataset", "import", "hf:org/missing", "--topic", "ownership")
    assert f"no dataset org/missing on {hub.url}" in result.stderr
    result = run_cli("dataset", "import", "hf:not a name", "--topic", "ownership")
    assert "a Hugging Face dataset is hf:ORG/NAME or hf:ORG/NAME:SPLIT" in result.stderr
    hub.datasets["org/bad"] = Repo(private=False, files={
        "train.jsonl": b'{"question": "fine question here"}\n{"answer": "none"}\n'
    })
    result = run_cli("dataset", "import", "hf:org/bad", "--topic", "ownership")
    assert "hf:org/bad/train.jsonl:2: no question" in result.stderr
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    result = run_cli("dataset", "import", "hf:org/rust-qa", "--topic", "ownership")
    assert "cannot reach the Hugging Face Hub at http://127.0.0.1:9" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (project_dir / "data").exists()


def test_a_private_dataset_is_read_with_hf_token(run_cli, project_dir, hub, monkeypatch):
    hub.datasets["alice/private"] = Repo(private=True, files={
        "questions.csv": b"question\nHow do lifetimes relate to scopes?\n"
    })
    result = run_cli("dataset", "import", "hf:alice/private", "--topic", "lifetimes")
    assert "no dataset alice/private" in result.stderr
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    result = run_cli("dataset", "import", "hf:alice/private", "--topic", "lifetimes")
    assert result.exit_code == 0, result.stderr
    assert "imported 1 question, 0 answers" in result.stdout
    assert TOKEN not in result.stdout + result.stderr


@pytest.mark.parametrize(("name", "split", "expected"), [
    ("train.jsonl", "train", True),
    ("data/train-00000-of-00002.jsonl", "train", True),
    ("train/part.csv", "train", True),
    ("training_notes.jsonl", "train", False),
    ("data/test.jsonl", "train", False),
])
def test_a_file_s_split_is_read_from_its_name(name, split, expected):
    assert in_split(name, split) is expected
