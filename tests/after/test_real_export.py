"""export with the real Axolotl venv (peft, transformers) and the real llama.cpp toolchain:
the quickstart's tiny model with a LoRA adapter, merged, converted, quantized, then loaded
by llama.cpp, which generates a token.

Run with ``OVERBRAINER_AXOLOTL_VENV=... OVERBRAINER_LLAMA_CPP=<toolchain dir> uv run pytest
-m real tests/after`` (``.ci/run`` builds the toolchain under ~/.cache/overbrainer).
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from tests.helpers.chat_templates import TEMPLATES
from tests.helpers.compare import eval_record
from tests.helpers.fake_provider import openai_completion
from tests.helpers.real import MAKE_ADAPTER, REAL_TIMEOUT

pytestmark = pytest.mark.real

METADATA = """
import json, sys
from gguf import GGUFReader
reader = GGUFReader(sys.argv[1])
def text(key):
    field = reader.fields[key]
    return bytes(field.parts[field.data[0]]).decode()
print(json.dumps({"name": text("general.name"), "template": text("tokenizer.chat_template")}))
"""

GENERATE = """
import sys
from llama_cpp import Llama
model = Llama(sys.argv[1], n_ctx=256, verbose=False)
out = model.create_chat_completion([{"role": "user", "content": "hi"}], max_tokens=1)
print(out["usage"]["completion_tokens"])
"""


def test_export_then_llama_cpp_loads_the_gguf_and_generates_then_compare_serves_it(
    finished, run_cli, venv, tiny_model, toolchain, provider, monkeypatch
):
    monkeypatch.setenv("OVERBRAINER_LLAMA_CPP", str(toolchain))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    config = finished.dir / "overbrainer.toml"
    config.write_text(config.read_text().replace(str(finished.venv), str(venv)))
    output = finished.run_dir / "output"
    for path in output.iterdir():
        path.unlink()
    subprocess.run(
        [str(venv / "bin" / "python"), "-c", MAKE_ADAPTER, str(tiny_model), str(output)],
        check=True,
        timeout=REAL_TIMEOUT,
    )
    # A training template with transformers' {% generation %} tags, which llama.cpp's server
    # cannot read: the export removes them from what it converts.
    tokenizer_config = output / "tokenizer_config.json"
    config = json.loads(tokenizer_config.read_text())
    config["chat_template"] = (TEMPLATES / "chatml_reasoning.jinja").read_text()
    tokenizer_config.write_text(json.dumps(config))
    (finished.run_dir / "axolotl.yaml").write_text(
        f"base_model: {tiny_model}\nadapter: lora\nsequence_len: 384\n"
    )
    (finished.run_dir / "data").mkdir()
    (finished.run_dir / "data" / "eval.jsonl").write_text(
        "".join(json.dumps(eval_record(i)) + "\n" for i in range(3))
    )
    result = run_cli("export", finished.run_id, "--quantize", "auto", "--max-drift", "1000")
    assert result.exit_code == 0, result.stderr
    [record_file] = finished.run_dir.glob("exports/*/export.json")
    record = json.loads(record_file.read_text())
    # Verified: the GGUF under llama.cpp scored on the merged model's greedy answers
    # (transformers), the same token ids; the ladder's first type is within any drift.
    check = record["verify"]
    assert record["quantize"] == "Q4_K_M" and check["quantize"] == "Q4_K_M"
    assert check["prompts"] == 3 and check["tokens"] > 0
    assert 0.0 <= check["token_agreement"] <= 1.0
    assert 0.0 <= check["mean_logprob_drift"] < 1000
    assert f"export: verified on 3 eval prompts ({check['tokens']} tokens, greedy)" in (
        result.stdout
    )
    gguf = finished.run_dir / record["file"]
    assert gguf.read_bytes()[:4] == b"GGUF"
    generated = subprocess.run(
        [str(toolchain / "bin" / "python"), "-c", GENERATE, str(gguf)],
        check=True,
        capture_output=True,
        text=True,
        timeout=REAL_TIMEOUT,
    )
    assert generated.stdout.strip() == "1"
    metadata = subprocess.run(
        [str(toolchain / "bin" / "python"), "-c", METADATA, str(gguf)],
        check=True,
        capture_output=True,
        text=True,
        timeout=REAL_TIMEOUT,
        env={**os.environ, "PYTHONPATH": str(toolchain / "llama.cpp" / "gguf-py")},
    )
    seen = json.loads(metadata.stdout)
    assert seen["name"] == "Demo Project"
    assert "generation %}" not in seen["template"] and "<|im_start|>" in seen["template"]
    modelfile = gguf.with_suffix(".Modelfile").read_text()
    print(json.dumps(check))
    assert 'TEMPLATE """' in modelfile and 'PARAMETER stop "<|im_end|>"' in modelfile

    # The child served by llama.cpp's own server on loopback, judged by the loopback provider.
    monkeypatch.setenv("OVERBRAINER_PROVIDERS__MAIN__BASE_URL", provider.url)
    provider.on(
        lambda seen: "You are judging two answers" in seen.prompt,
        openai_completion('{"verdict": "tie", "reason": "Both are short."}'),
        times=None,
    )
    result = run_cli("compare", "--limit", "2")
    assert result.exit_code == 0, result.stderr
    [directory] = finished.run_dir.glob("compares/*")
    data = json.loads((directory / "compare.json").read_text())
    assert [q["verdict"] for q in data["questions"]] == ["tie", "tie"]
    assert all(len(q["orders"]) == 2 for q in data["questions"])  # both orders judged
    assert "compare: against its parent: win-or-tie 100.0% (95% interval " in result.stdout
    assert all(q["tokens"] >= 1 and q["seconds"] > 0 for q in data["questions"]), [
        {key: q.get(key) for key in ("id", "tokens", "seconds", "child")}
        for q in data["questions"]]
    assert data["hardware"]["build"] == "cpu"
    assert "llama" in (directory / "server.log").read_text().lower()
