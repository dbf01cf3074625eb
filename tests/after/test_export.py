"""overbrainer export on the local target with stand-ins for the runtime and llama.cpp."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from overbrainer.after.export import human_size, modelfile


def test_export_writes_the_gguf_the_modelfile_and_export_json(finished, run_cli):
    result = run_cli("export", finished.run_id)
    assert result.exit_code == 0, result.stderr
    gguf_dir = finished.run_dir / "output" / "gguf"
    gguf = gguf_dir / f"{finished.run_id}-Q4_K_M.gguf"
    assert gguf.read_bytes().startswith(b"GGUF converted auto from ../../output quantized 15")
    modelfile_text = (gguf_dir / f"{finished.run_id}-Q4_K_M.Modelfile").read_text()
    assert modelfile_text == f"FROM ./{gguf.name}\nPARAMETER num_ctx 384\n"
    [record_file] = finished.run_dir.glob("exports/export_*/export.json")
    record = json.loads(record_file.read_text())
    assert record["quantize"] == "Q4_K_M"
    assert record["llama_cpp"] == "llama-cpp-python==0.3.16"
    assert record["file"] == f"output/gguf/{gguf.name}"
    assert record["size"] == gguf.stat().st_size
    assert len(record["sha256"]) == 64
    lines = result.stdout.splitlines()
    assert lines[0].startswith("export: export_") and "to GGUF Q4_K_M on target `local`" in lines[0]
    assert lines[1] == (
        f"export: GGUF in runs/{finished.run_id}/output/gguf/{gguf.name} (Q4_K_M, "
        f"{human_size(gguf.stat().st_size)}), Modelfile beside it"
    )
    assert f"ollama create <name> -f {finished.run_id}-Q4_K_M.Modelfile`" in lines[2]
    assert (
        f"export: the model has no chat template; {finished.run_id}-Q4_K_M.Modelfile has no "
        "TEMPLATE, so Ollama uses the template it recognizes in the GGUF, or else the bare prompt"
    ) in result.stderr
    [converted] = finished.run_dir.glob("exports/export_*/converter.json")
    argv = json.loads(converted.read_text())["argv"]
    assert argv[argv.index("--model-name") + 1] == "Demo Project"  # general.name
    assert not list(finished.run_dir.glob("exports/*/export-work"))
    assert not list(finished.run_dir.glob("exports/*/gguf"))


def _trained_on(finished, *systems: str | None) -> None:
    """The run's copy of its training data: one example a system turn (None: no system)."""
    data = finished.run_dir / "data"
    data.mkdir(exist_ok=True)
    lines = []
    for n, system in enumerate(systems):
        turns = [{"role": "user", "content": f"q{n}"}, {"role": "assistant", "content": "a"}]
        if system is not None:
            turns.insert(0, {"role": "system", "content": system})
        lines.append(json.dumps({"messages": turns}) + "\n")
    (data / "train.jsonl").write_text("".join(lines))


def _modelfile(finished) -> str:
    gguf_dir = finished.run_dir / "output" / "gguf"
    return (gguf_dir / f"{finished.run_id}-Q4_K_M.Modelfile").read_text()


def test_the_modelfile_gives_the_system_prompt_the_child_was_trained_with(finished, run_cli):
    _trained_on(finished, "You are terse.\nAnswer in Rust.", "You are terse.\nAnswer in Rust.")
    result = run_cli("export", finished.run_id)
    assert result.exit_code == 0, result.stderr
    text = _modelfile(finished)
    assert 'SYSTEM """You are terse.\nAnswer in Rust."""\n' in text


@pytest.mark.parametrize("systems", [("one", "two"), ("one", None), (None, None)])
def test_no_system_line_when_the_examples_do_not_share_one(finished, run_cli, systems):
    _trained_on(finished, *systems)
    assert run_cli("export", finished.run_id).exit_code == 0
    text = _modelfile(finished)
    assert "SYSTEM" not in text


def test_a_system_prompt_the_modelfile_cannot_quote_is_left_out_with_a_warning(
    finished, run_cli
):
    _trained_on(finished, 'Say "hi"')
    result = run_cli("export", finished.run_id)
    assert result.exit_code == 0, result.stderr
    text = _modelfile(finished)
    assert "SYSTEM" not in text
    assert "the system prompt the run trained with cannot be written in" in result.stderr
    assert "give it as the system message of each request" in result.stderr


def test_f16_is_converted_without_quantizing(finished, run_cli):
    result = run_cli("export", finished.run_id, "--quantize", "F16")
    assert result.exit_code == 0, result.stderr
    gguf = finished.run_dir / "output" / "gguf" / f"{finished.run_id}-F16.gguf"
    assert gguf.read_bytes() == b"GGUF converted f16 from ../../output"


def test_each_type_keeps_its_own_modelfile(finished, run_cli):
    assert run_cli("export", finished.run_id).exit_code == 0
    assert run_cli("export", finished.run_id, "--quantize", "Q8_0").exit_code == 0
    names = sorted(p.name for p in (finished.run_dir / "output" / "gguf").glob("*.Modelfile"))
    assert names == [f"{finished.run_id}-Q4_K_M.Modelfile", f"{finished.run_id}-Q8_0.Modelfile"]
    text = (finished.run_dir / "output" / "gguf" / names[1]).read_text()
    assert text.startswith(f"FROM ./{finished.run_id}-Q8_0.gguf\n")


def test_the_modelfile_carries_the_training_chat_format_without_generation_tags(finished, run_cli):
    source = (Path(__file__).parent / "chat_templates" / "chatml_reasoning.jinja").read_text()
    assert "{%- generation %}" in source
    config = {"chat_template": source, "eos_token": "<|im_end|>", "bos_token": None}
    (finished.run_dir / "output" / "tokenizer_config.json").write_text(json.dumps(config))
    result = run_cli("export", finished.run_id)
    assert result.exit_code == 0, result.stderr
    assert "has no TEMPLATE" not in result.stderr
    gguf_dir = finished.run_dir / "output" / "gguf"
    text = (gguf_dir / f"{finished.run_id}-Q4_K_M.Modelfile").read_text()
    assert 'TEMPLATE """{{ range $i, $m := .Messages }}' in text
    assert "{{ if $m.Thinking }}<think>\n{{ $m.Thinking }}\n</think>\n\n{{ end }}" in text
    assert text.endswith(
        '<|im_start|>assistant\n"""\nPARAMETER stop "<|im_end|>"\nPARAMETER stop '
        '"<|im_start|>"\nPARAMETER num_ctx 384\n'
    )
    # The converter saw the template without the tags, the run's own file is unchanged.
    [converted] = finished.run_dir.glob("exports/export_*/converter.json")
    seen = json.loads(converted.read_text())["chat_template"]
    assert "generation %}" not in seen and "endgeneration" not in seen
    assert "{%- if true %}" in seen and "{%- endif %}" in seen
    kept = json.loads((finished.run_dir / "output" / "tokenizer_config.json").read_text())
    assert kept["chat_template"] == source


def test_an_untranslatable_chat_template_is_said_so(finished, run_cli):
    source = (Path(__file__).parent / "chat_templates" / "numbered.jinja").read_text()
    (finished.run_dir / "output" / "chat_template.jinja").write_text(source)
    result = run_cli("export", finished.run_id)
    assert result.exit_code == 0, result.stderr
    assert (
        f"export: the chat template of runs/{finished.run_id}/output/chat_template.jinja cannot "
        "be written for Ollama: "
    ) in result.stderr
    assert "has no TEMPLATE, so Ollama uses the template it recognizes in the GGUF" in (
        result.stderr
    )


@pytest.mark.parametrize(
    ("state", "message"),
    [
        ("running", "is running: only a succeeded or stopped run can be exported"),
        ("failed", "is failed: only a succeeded or stopped run can be exported"),
    ],
)
def test_only_succeeded_and_stopped_runs_are_exported(finished, run_cli, state, message):
    finished.record(state=state)
    result = run_cli("export", finished.run_id)
    assert result.exit_code == 1
    assert f"error: run {finished.run_id} {message}" in result.stderr


def test_a_run_without_a_model_is_refused(finished, run_cli):
    (finished.run_dir / "output" / "config.json").unlink()
    result = run_cli("export", finished.run_id)
    assert f"runs/{finished.run_id}/output holds no model: nothing to export" in result.stderr


def test_a_missing_axolotl_yaml_is_refused(finished, run_cli):
    (finished.run_dir / "axolotl.yaml").unlink()
    result = run_cli("export", finished.run_id)
    assert f"runs/{finished.run_id}/axolotl.yaml is missing: the export needs it" in result.stderr


def test_a_missing_converter_module_is_named(finished, run_cli):
    (finished.venv.parent / "stubs" / "transformers" / "__init__.py").unlink()
    (finished.venv.parent / "stubs" / "transformers").rmdir()
    result = run_cli("export", finished.run_id)
    assert result.exit_code == 1
    assert (
        "failed: llama.cpp's convert_hf_to_gguf.py needs the Python module transformers, "
        "missing from the job's environment"
    ) in result.stderr
    assert not (finished.run_dir / "output" / "gguf").exists() or not list(
        (finished.run_dir / "output" / "gguf").glob("*.gguf")
    )


def test_an_unsupported_tokenizer_says_what_to_do_and_where_the_log_is(finished, run_cli):
    (finished.run_dir / "output" / "unknown-tokenizer").write_text("")
    result = run_cli("export", finished.run_id)
    assert result.exit_code == 1
    [job] = finished.run_dir.glob("exports/export_*")
    assert (
        "failed: llama.cpp's converter does not know this model's tokenizer (it recognizes a "
        "byte-level BPE pre-tokenizer by its hash, and llama-cpp-python==0.3.16 has no hash "
        "for this one): train from a base model whose tokenizer llama.cpp supports (a "
        "byte-fallback BPE, as the quickstart's tiny model has, or a known family); the job's "
        f"log is runs/{finished.run_id}/exports/{job.name}/export.log"
    ) in result.stderr
    assert "pre-tokenizer was not recognized" in (job / "export.log").read_text()


def test_ollama_not_installed_says_how_to_create_the_model(finished, run_cli, monkeypatch):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    result = run_cli("export", finished.run_id, "--ollama", "demo:latest")
    assert result.exit_code == 0, result.stderr
    assert "ollama is not on PATH: create the model with `cd runs/" in result.stderr
    assert f"ollama create demo:latest -f {finished.run_id}-Q4_K_M.Modelfile`" in result.stderr


def test_ollama_create_runs_when_installed(finished, run_cli, monkeypatch, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    ollama = bin_dir / "ollama"
    ollama.write_text('#!/bin/sh\necho "$@" > ollama.args\n')
    ollama.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    result = run_cli("export", finished.run_id, "--ollama", "demo")
    assert result.exit_code == 0, result.stderr
    assert "export: Ollama model demo created: `ollama run demo`" in result.stdout
    args = finished.run_dir / "output" / "gguf" / "ollama.args"
    assert args.read_text() == f"create demo -f {finished.run_id}-Q4_K_M.Modelfile\n"


def test_an_invalid_ollama_name_is_refused(finished, run_cli):
    result = run_cli("export", finished.run_id, "--ollama", "bad name")
    assert result.exit_code == 1
    assert "--ollama bad name: not a valid Ollama model name" in result.stderr


def test_modelfile_without_a_sequence_len():
    assert modelfile("x.gguf", None) == "FROM ./x.gguf\n"


def test_sizes_use_decimal_units():
    assert human_size(412_300_000) == "412.3 MB"
    assert human_size(1_200_000_000) == "1.2 GB"


def test_after_training_exports_at_the_end_of_train_and_a_failure_only_warns(
    trainer, run_cli, monkeypatch, tmp_path
):
    monkeypatch.setenv("OVERBRAINER_LLAMA_CPP", str(tmp_path / "no-toolchain"))
    trainer.configure(extra="\n[export]\nafter_training = true\n")
    result = run_cli("train")
    assert result.exit_code == 0, result.stderr
    run_id = trainer.run()["id"]
    assert trainer.run()["state"] == "succeeded"
    assert "export: export_" in result.stdout
    assert "the llama.cpp toolchain is not in" in result.stderr
    assert f"run it again with: overbrainer export {run_id}" in result.stderr


def test_a_stopped_run_exports_its_snapshot_with_a_warning(finished, run_cli):
    output = finished.run_dir / "output"
    (output / "config.json").unlink()
    (output / "checkpoint-3").mkdir()
    (output / "checkpoint-3" / "config.json").write_text("{}")
    finished.record(state="stopped", snapshot={"checkpoint": "output/checkpoint-3", "step": 3})
    result = run_cli("export", finished.run_id, "--quantize", "F16")
    assert result.exit_code == 0, result.stderr
    assert (
        f"run {finished.run_id} stopped at step 3: its export holds the partial model of that step"
    ) in result.stderr
    gguf = output / "gguf" / f"{finished.run_id}-F16.gguf"
    assert gguf.read_bytes() == b"GGUF converted f16 from ../../output/checkpoint-3"


@pytest.mark.parametrize("flag", ["--keep-machine", "--keep-pod"])
def test_keep_machine_is_refused_on_a_target_that_makes_no_machine(finished, run_cli, flag):
    result = run_cli("export", finished.run_id, flag)
    assert result.exit_code == 1
    assert result.stderr.endswith(
        "error: --keep-machine applies only to a target that makes a machine for the run "
        "(target `local` does not)\n"
    )
    assert not (finished.run_dir / "exports").exists()
    assert not (finished.run_dir / "output" / "gguf").exists()


def test_a_target_gone_from_the_configuration_is_named(finished, run_cli):
    finished.record(target="gone")
    result = run_cli("export", finished.run_id)
    assert (
        f"error: target `gone` of run {finished.run_id} is no longer in overbrainer.toml"
    ) in result.stderr


def test_ctrl_c_cancels_the_export_on_its_target(finished):
    (finished.toolchain / "slow").write_text("")
    boot = "import sys; from overbrainer.cli import main; sys.argv[0] = 'overbrainer'; main()"
    process = subprocess.Popen(
        [sys.executable, "-c", boot, "-C", str(finished.dir), "export", finished.run_id],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not list(finished.run_dir.glob("exports/*/converter.pid")):
            assert time.monotonic() < deadline, "the converter never started"
            time.sleep(0.05)
        [pid_file] = finished.run_dir.glob("exports/*/converter.pid")
        time.sleep(0.2)
        converter = int(pid_file.read_text())
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 130
    job = pid_file.parent.name
    assert f"error: interrupted: export {job} of run {finished.run_id} cancelled" in stderr
    deadline = time.monotonic() + 10
    while Path(f"/proc/{converter}").exists() and "Z" not in _state(converter):
        assert time.monotonic() < deadline, "the converter outlived the cancel"
        time.sleep(0.05)
    deadline = time.monotonic() + 10
    while (pid_file.parent / "export-work").exists():
        assert time.monotonic() < deadline, "export-work was left behind"
        time.sleep(0.05)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "Z"


def test_results_not_retrieved_are_named(finished, run_cli):
    shutil.rmtree(finished.run_dir / "output")
    result = run_cli("export", finished.run_id)
    assert (
        f"error: the results of run {finished.run_id} were not retrieved: retrieve them with "
        f"`overbrainer train attach {finished.run_id}`, then export"
    ) in result.stderr


ALIEN = """
    from typing import Literal

    from overbrainer.plugin import Executor, TargetBase, hookimpl


    class AlienTarget(TargetBase):
        kind: Literal["alien"]


    class AlienExecutor(Executor):
        # Declares no open_shell: a target that gives no shell.

        def _unused(self, *args):
            raise NotImplementedError

        describe = claim = launch = poll = request_snapshot = cancel = collect = _unused
        read_log = _unused


    @hookimpl
    def register_targets(register):
        register("alien", AlienTarget)


    @hookimpl
    def create_executor(name, target, project, run):
        return AlienExecutor() if target.kind == "alien" else None
"""


def test_a_target_without_a_shell_is_refused(finished, run_cli, site, monkeypatch):
    site.install("alien", ALIEN)
    monkeypatch.setenv("OVERBRAINER_LOAD_PLUGINS", "local,ssh,runpod,alien")
    config = finished.dir / "overbrainer.toml"
    config.write_text(config.read_text() + '\n[targets.far]\nkind = "alien"\n')
    finished.record(target="far")
    result = run_cli("export", finished.run_id)
    assert (
        f"error: target `far` of run {finished.run_id} cannot run commands after training "
        "(its plugin gives no shell)"
    ) in result.stderr


def test_a_container_runtime_is_refused(finished, run_cli):
    config = finished.dir / "overbrainer.toml"
    text = config.read_text().replace(
        f'venv = "{finished.venv}"', 'runtime = "docker"\nimage = "x"'
    )
    config.write_text(text)
    result = run_cli("export", finished.run_id)
    assert (
        "error: target `local` runs Axolotl in a container: export and compare need a native "
        "runtime (a venv) on it"
    ) in result.stderr


def test_the_hub_token_reaches_the_export_through_its_environment_only(
    finished, run_cli, monkeypatch, tmp_path
):
    """A gated base model is downloaded on the target during the merge: the export sees
    ``HF_TOKEN`` as training does, and no command line or file written holds it."""
    token = "hf_" + "e7" * 16
    monkeypatch.setenv("OVERBRAINER_HF_TOKEN", token)
    seen = tmp_path / "seen"
    python = finished.venv / "bin" / "python"
    real = python.read_text().splitlines()[-1]
    python.write_text(
        "#!/bin/sh\n"
        f'printf "%s" "$HF_TOKEN" > {seen}/env\n'
        f"grep -l -a {token} /proc/[0-9]*/cmdline > {seen}/argv 2>/dev/null\n"
        f"{real}\n"
    )
    seen.mkdir()
    result = run_cli("export", finished.run_id)
    assert result.exit_code == 0, result.stderr
    assert (seen / "env").read_text() == token
    assert (seen / "argv").read_text() == ""
    assert token not in result.stdout + result.stderr
    for path in finished.dir.rglob("*"):
        if path.is_file():
            assert token.encode() not in path.read_bytes(), path


def test_a_token_with_a_line_break_is_refused_before_the_export(finished, run_cli, monkeypatch):
    monkeypatch.setenv("OVERBRAINER_HF_TOKEN", "hf_abc\nrm -rf /")
    result = run_cli("export", finished.run_id)
    assert result.exit_code == 1
    assert "HF_TOKEN cannot be handed to the target: it holds a line break" in result.stderr
    assert "rm -rf" not in result.stderr
    assert not (finished.run_dir / "output" / "gguf").exists()


def with_eval(finished, count: int = 3) -> None:
    from tests.helpers.compare import eval_record

    (finished.run_dir / "data").mkdir(exist_ok=True)
    (finished.run_dir / "data" / "eval.jsonl").write_text(
        "".join(json.dumps(eval_record(i)) + "\n" for i in range(count))
    )


def export_record(finished) -> dict:
    [record_file] = finished.run_dir.glob("exports/export_*/export.json")
    return json.loads(record_file.read_text())


def test_the_gguf_is_verified_against_the_merged_model_on_eval_prompts(finished, run_cli):
    with_eval(finished, 10)
    result = run_cli("export", finished.run_id)
    assert result.exit_code == 0, result.stderr
    check = export_record(finished)["verify"]
    assert check["quantize"] == "Q4_K_M"
    assert check["prompts"] == 8 and check["tokens"] == 32  # the first 8, 4 tokens each
    assert check["token_agreement"] == 1.0
    assert check["mean_logprob_drift"] == pytest.approx(0.9909, abs=1e-4)
    assert (
        "export: verified on 8 eval prompts (32 tokens, greedy): token agreement 100.0%, mean "
        "log-prob drift 0.9909 nats a token (GGUF under llama.cpp against the merged model "
        "under transformers)"
    ) in result.stdout
    [job] = finished.run_dir.glob("exports/export_*")
    prompts = [json.loads(line) for line in (job / "verify_prompts.jsonl").read_text().splitlines()]
    assert [p["id"] for p in prompts] == [f"q{i:04d}" for i in range(8)]
    assert prompts[0]["messages"] == [{"role": "user", "content": "Question 0: what is ownership?"}]


def test_verify_takes_n_prompts_or_none(finished, run_cli):
    with_eval(finished)
    result = run_cli("export", finished.run_id, "--verify", "2")
    assert result.exit_code == 0, result.stderr
    assert export_record(finished)["verify"]["prompts"] == 2
    for path in finished.run_dir.glob("exports/*"):
        shutil.rmtree(path)
    result = run_cli("export", finished.run_id, "--verify", "0")
    assert result.exit_code == 0, result.stderr
    assert export_record(finished)["verify"] is None
    assert "verified on" not in result.stdout


def test_no_eval_data_exports_unverified_with_a_warning(finished, run_cli):
    result = run_cli("export", finished.run_id)
    assert result.exit_code == 0, result.stderr
    assert (
        "warning: export: data/eval.jsonl has no question with an answer: the GGUF is not verified"
    ) in result.stderr
    assert export_record(finished)["verify"] is None


def test_max_drift_fails_the_export_past_it(finished, run_cli):
    with_eval(finished)
    result = run_cli("export", finished.run_id, "--max-drift", "0.5")
    assert result.exit_code == 1
    assert (
        "failed: the Q4_K_M GGUF drifts from the merged model by 0.9909 nats a token on average "
        "(token agreement 100.0%), past --max-drift 0.5: export a larger type (Q8_0, F16) or "
        "allow more; the job's log is runs/"
    ) in result.stderr
    assert not list((finished.run_dir / "output" / "gguf").glob("*.gguf"))
    assert not list(finished.run_dir.glob("exports/*/gguf/*"))
    result = run_cli("export", finished.run_id, "--max-drift", "1.0")
    assert result.exit_code == 0, result.stderr


def test_quantize_auto_takes_the_smallest_type_within_the_drift(finished, run_cli):
    with_eval(finished)
    result = run_cli("export", finished.run_id, "--quantize", "auto", "--max-drift", "0.2")
    assert result.exit_code == 0, result.stderr
    assert (
        "to GGUF auto (the smallest of Q4_K_M, Q5_K_M, Q6_K, Q8_0 within --max-drift 0.2)"
    ) in result.stdout
    record = export_record(finished)
    assert record["quantize"] == "Q6_K"
    assert record["file"] == f"output/gguf/{finished.run_id}-Q6_K.gguf"
    assert [t["quantize"] for t in record["auto"]["tried"]] == ["Q4_K_M", "Q5_K_M", "Q6_K"]
    assert record["auto"]["max_drift"] == 0.2
    assert record["verify"]["mean_logprob_drift"] < 0.2
    gguf_dir = finished.run_dir / "output" / "gguf"
    assert sorted(p.name for p in gguf_dir.iterdir()) == [
        f"{finished.run_id}-Q6_K.Modelfile", f"{finished.run_id}-Q6_K.gguf",
    ]  # fmt: skip
    assert f"GGUF in runs/{finished.run_id}/output/gguf/{finished.run_id}-Q6_K.gguf (Q6_K, " in (
        result.stdout
    )


def test_quantize_auto_refusals(finished, run_cli):
    result = run_cli("export", finished.run_id, "--quantize", "auto")
    assert result.exit_code == 1
    assert (
        "error: --quantize auto needs --max-drift X: the most mean log-probability drift (nats "
        "a token) a type of the ladder may show"
    ) in result.stderr
    result = run_cli("export", finished.run_id, "--quantize", "auto", "--max-drift", "0.2")
    assert (
        "error: data/eval.jsonl has no question with an answer: --quantize auto and --max-drift "
        "verify the GGUF on eval prompts"
    ) in result.stderr
    with_eval(finished)
    result = run_cli("export", finished.run_id, "--max-drift", "0.2", "--verify", "0")
    assert (
        "error: --quantize auto and --max-drift verify the GGUF: --verify 0 cannot"
    ) in result.stderr
    result = run_cli("export", finished.run_id, "--quantize", "auto", "--max-drift", "0.01")
    assert result.exit_code == 1
    assert (
        "failed: no type of the ladder is within --max-drift 0.01 (mean log-prob drift: Q4_K_M 0.99"
    ) in result.stderr
    assert ", Q8_0 0.02" in result.stderr and "): export F16, or allow more drift" in result.stderr
    assert not list(finished.run_dir.glob("exports/*/gguf/*.part"))


def test_the_target_script_says_a_missing_model_directory_does_not_exist(tmp_path):
    import importlib.util

    from overbrainer.after import target

    spec = importlib.util.spec_from_file_location(
        "export_gguf", Path(target.__file__).parent / "export_gguf.py"
    )
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    gone = tmp_path / "models" / "tiny-llama"
    with pytest.raises(script.Failure, match=f"^{gone} does not exist$"):
        script.hf_model(str(gone), "axolotl.yaml")
    gone.mkdir(parents=True)
    with pytest.raises(script.Failure, match="holds neither an adapter nor a model"):
        script.hf_model(str(gone), "axolotl.yaml")
