"""Fixtures of the after tests: a finished run ready to compare (an exported GGUF, eval
questions) or to push, and the loopback Hub it is pushed to."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from tests.helpers.compare import eval_record
from tests.helpers.fake_hub import FakeHub
from tests.helpers.push import READ_TOKEN, TOKEN, online
from tests.helpers.stand_ins import Finished


@pytest.fixture
def comparable(finished: Finished, monkeypatch: pytest.MonkeyPatch) -> Finished:
    """A finished run with its GGUF exported and eight eval questions."""
    run_dir = finished.run_dir
    gguf = run_dir / "output" / "gguf" / f"{finished.run_id}-Q4_K_M.gguf"
    gguf.parent.mkdir(parents=True)
    gguf.write_bytes(b"GGUF child")
    export_dir = run_dir / "exports" / "export_20260101-000100"
    export_dir.mkdir(parents=True)
    (export_dir / "export.json").write_text(json.dumps({
        "quantize": "Q4_K_M", "llama_cpp": "llama-cpp-python==0.3.16",
        "file": f"output/gguf/{gguf.name}", "sha256": "ab" * 32, "size": 10,
        "created": "2026-01-01T00:01:00Z",
    }))  # fmt: skip
    (run_dir / "data").mkdir()
    records = [eval_record(i) for i in range(8)]
    (run_dir / "data" / "eval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return finished


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    online(monkeypatch)
    server = FakeHub({TOKEN: ("alice", "write"), READ_TOKEN: ("alice", "read")}).start()
    monkeypatch.setenv("OVERBRAINER_HUB__BASE_URL", server.url)
    monkeypatch.setenv("OVERBRAINER_HF_TOKEN", TOKEN)
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    yield server
    server.stop()


@pytest.fixture
def pushable(finished: Finished) -> Finished:
    """A finished run with something to push: an adapter, a GGUF, what push leaves out."""
    output = finished.run_dir / "output"
    (output / "adapter_config.json").write_text("{}")
    (output / "checkpoint-4").mkdir()
    (output / "checkpoint-4" / "optimizer.pt").write_bytes(b"big")
    (output / "debug.log").write_text("log")
    (output / ".hidden").write_text("x")
    (output / "gguf").mkdir()
    (output / "gguf" / f"{finished.run_id}-Q4_K_M.gguf").write_bytes(b"GGUF data")
    (output / "gguf" / "Modelfile").write_text("FROM ./x.gguf\n")
    (finished.run_dir / "metrics.jsonl").write_text(
        '{"event": "log", "step": 1, "loss": 2.5}\n{"event": "eval", "eval_loss": 2.25}\n'
    )
    return finished
