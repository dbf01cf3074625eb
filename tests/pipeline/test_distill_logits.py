"""``distill = "logits"``, offline: the parent's top-k logprobs asked with each answer and
kept, with the child's token ids, in data/logprobs.bin; refusals before anything is paid."""

from __future__ import annotations

import json
from pathlib import Path

import numpy
import pytest
from tests.helpers.fake_provider import FakeProvider, openai_completion
from tests.helpers.kd_data import write_tokenizer
from tests.helpers.pipeline_data import PIPELINE_CONFIG, lines, write_project
from tests.helpers.project import Cli

from overbrainer.pipeline.logits_file import MAGIC, LogitsFile
from overbrainer.pipeline.vocab import load_vocabulary

TRAINING = """
[training]
target = "here"
base_model = "{child}"
adapter = "lora"
distill = "logits"

[training.kd]
top_k = {top_k}
{kd}

[targets.here]
kind = "local"
"""


def _project(tmp_path: Path, provider: FakeProvider, *, top_k: int = 5, kd: str = "",
             config: str = PIPELINE_CONFIG, drop: str = "") -> Path:
    child = write_tokenizer(tmp_path / "child", drop=drop)
    extra = TRAINING.format(child=child, top_k=top_k, kd=kd)
    return write_project(tmp_path / "project", provider.url, config + extra)


@pytest.fixture
def project_dir(tmp_path: Path, provider: FakeProvider) -> Path:
    return _project(tmp_path, provider)


def _kept(project_dir: Path) -> LogitsFile:
    return LogitsFile(project_dir / "data" / "logprobs.bin", "data/logprobs.bin")


def test_each_answer_keeps_its_top_k_with_the_childs_ids(run_cli, project_dir, provider):
    assert run_cli("subtopics").exit_code == 0
    assert run_cli("questions").exit_code == 0
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    parent = provider.chats("parent-model")
    assert parent and all(seen.body["logprobs"] is True for seen in parent)
    assert all(seen.body["top_logprobs"] == 5 for seen in parent)
    answers = lines(project_dir, "answers.jsonl")
    assert answers and all(a["meta"]["excluded"] is None for a in answers)
    kept = _kept(project_dir)
    index = kept.index()
    assert set(index) == {a["id"] for a in answers}
    vocab = load_vocabulary(str(project_dir.parent / "child"), "training.base_model")
    spelling = {i: text.replace("\u2581", " ") for text, i in vocab.tokens.items()}
    for answer in answers:
        record = kept.read(index[answer["id"]])
        assert record.vocab == vocab.fingerprint
        content = answer["messages"][-1]["content"]
        assert "".join(spelling[int(i)] for i in record.chosen) == content
        assert record.ids.shape == (len(content), 5)
        assert (record.ids[:, 0] == record.chosen).all()  # the fake's top-1 is its token
        assert numpy.allclose(record.logprobs[:, 0], -0.125)
        assert numpy.allclose(record.logprobs[:, 1], -1.0)


def test_text_distillation_asks_for_no_logprobs(run_cli, tmp_path, provider):
    project = write_project(tmp_path / "text", provider.url)

    cli = Cli(project)
    assert cli("subtopics").exit_code == 0
    assert cli("questions").exit_code == 0
    assert cli("answers").exit_code == 0
    assert all("logprobs" not in seen.body for seen in provider.chats("parent-model"))
    assert not (project / "data" / "logprobs.bin").exists()


def test_a_reply_without_logprobs_is_excluded_saying_why(run_cli, project_dir, provider):
    assert run_cli("subtopics").exit_code == 0
    assert run_cli("questions").exit_code == 0
    provider.max_logprobs = None  # a server that ignores logprobs
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    answers = lines(project_dir, "answers.jsonl")
    assert answers and all(a["meta"]["excluded"] == "no_logprobs" for a in answers)
    assert answers[0]["meta"]["logprobs_problem"] == "the reply carried no logprobs"
    assert not _kept(project_dir).index()


def test_a_torn_record_is_cut_off_and_the_answers_go_on(run_cli, project_dir, provider):
    assert run_cli("subtopics").exit_code == 0
    assert run_cli("questions").exit_code == 0
    assert run_cli("answers", "--topic", "lifetimes").exit_code == 0
    path = project_dir / "data" / "logprobs.bin"
    before = _kept(project_dir).index()
    with path.open("ab") as file:  # a kill -9 in the middle of a record
        file.write(MAGIC + b"\x01\x00\x00\x00" + b"\x10")
    assert set(_kept(project_dir).index()) == set(before)
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    index = _kept(project_dir).index()
    assert set(index) == {a["id"] for a in lines(project_dir, "answers.jsonl")}
    assert index[next(iter(before))] == before[next(iter(before))]  # the old ones kept
    for entry in index.values():
        _kept(project_dir).read(entry)


def test_a_damaged_record_names_the_file_and_offset(run_cli, project_dir, provider):
    assert run_cli("subtopics").exit_code == 0
    assert run_cli("questions").exit_code == 0
    assert run_cli("answers", "--topic", "lifetimes").exit_code == 0
    path = project_dir / "data" / "logprobs.bin"
    data = bytearray(path.read_bytes())
    data[30] ^= 0xFF  # inside the first record, not the last
    path.write_bytes(bytes(data))
    result = run_cli("answers")
    assert result.exit_code == 1
    assert "data/logprobs.bin is damaged at byte 0" in result.stderr
    assert "Traceback" not in result.stderr


def test_providers_check_probes_the_parents_logprobs(run_cli, project_dir, provider):
    result = run_cli("providers", "check")
    assert result.exit_code == 0, result.stderr
    probe = provider.chats("parent-model")[0].body
    assert (probe["logprobs"], probe["top_logprobs"]) == (True, 5)
    assert "logprobs" not in provider.chats("gen-model")[0].body
    assert (
        "parent: logprobs ok: 5 candidates per token, every one named by the child's "
        'vocabulary (training.distill = "logits")'
    ) in result.stdout


def test_a_parent_without_logprobs_is_refused_by_providers_check(run_cli, project_dir,
                                                                   provider):
    provider.max_logprobs = None
    result = run_cli("providers", "check")
    assert result.exit_code == 1
    assert ('problem: training.distill = "logits", but the probe\'s reply from '
            "main/parent-model carried no logprobs") in result.stderr
    assert "logprobs ok" not in result.stdout


def test_a_server_capped_below_top_k_is_refused_with_its_reason(run_cli, tmp_path, provider):
    project = _project(tmp_path, provider, top_k=30)

    result = Cli(project)("providers", "check")
    assert result.exit_code == 1
    assert "Requested sample logprobs of 30, which is greater than max allowed: 20" in (
        result.stdout
    )
    assert (
        "(asked for top_logprobs = 30, training.kd.top_k: lower it to what the server allows, "
        "or raise the server's limit)"
    ) in result.stdout


def test_a_server_giving_fewer_than_top_k_is_refused(run_cli, project_dir, provider):
    provider.on(
        lambda seen: seen.model == "parent-model",
        lambda seen: {**openai_completion("ok"), "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": "ok", "reasoning": "r"},
            "finish_reason": "stop",
            "logprobs": {"content": [{"token": "ok", "logprob": -0.1, "top_logprobs": [
                {"token": "ok", "logprob": -0.1}, {"token": "k", "logprob": -2}]}]}}]},
    )
    result = run_cli("providers", "check")
    assert result.exit_code == 1
    assert ("training.kd.top_k = 5, but main/parent-model returned 2 candidates per token: "
            "lower top_k to 2") in result.stderr


def test_a_child_with_another_vocabulary_is_refused_naming_both(run_cli, project_dir,
                                                                 provider):
    # The parent's tokenizer has whole words; the child's (one token a character) has not.
    words = ["ok", " then"]
    entries = [{"token": w, "logprob": -0.1, "bytes": list(w.encode()),
                "top_logprobs": [{"token": w, "logprob": -0.1}] * 5} for w in words]
    provider.on(
        lambda seen: seen.model == "parent-model",
        lambda seen: {**openai_completion("ok then"), "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": "ok then", "reasoning": "r"},
            "finish_reason": "stop", "logprobs": {"content": entries}}]},
    )
    result = run_cli("providers", "check")
    assert result.exit_code == 1
    assert ("problem: the parent's tokens are not the child's (main/parent-model against "
            f"training.base_model = '{project_dir.parent / 'child'}'): token 1 of the reply: "
            "the token 'ok' is no token of training.base_model") in result.stderr
    assert "make the child a model of the parent's family" in result.stderr


def test_a_parent_tokenizer_unlike_the_childs_is_refused_before_any_request(tmp_path,
                                                                            provider):
    parent = write_tokenizer(tmp_path / "parent", byte_level=True)
    project = _project(tmp_path, provider, kd=f'parent_tokenizer = "{parent}"')

    cli = Cli(project)
    result = cli("config", "check")
    assert result.exit_code == 1
    assert (f"the parent's tokenizer (training.kd.parent_tokenizer ({parent})) is not the "
            f"child's (training.base_model ({tmp_path / 'child'}))") in result.stderr
    assert cli("subtopics").exit_code == 0
    assert cli("questions").exit_code == 0
    asked = len(provider.chats())
    answers = cli("answers")
    assert answers.exit_code == 1
    assert "is not the child's" in answers.stderr
    assert len(provider.chats()) == asked  # nothing paid


def test_the_same_parent_tokenizer_passes(tmp_path, provider):
    parent = write_tokenizer(tmp_path / "parent")
    project = _project(tmp_path, provider, kd=f'parent_tokenizer = "{parent}"')

    result = Cli(project)("config", "check")
    assert result.exit_code == 0, result.stderr


def test_an_anthropic_parent_is_refused_with_the_reason(tmp_path, provider):
    config = PIPELINE_CONFIG.replace('protocol = "openai"', 'protocol = "anthropic"')
    project = _project(tmp_path, provider, config=config)

    result = Cli(project)("config", "check")
    assert result.exit_code == 1
    assert ("roles.parent is on providers.main, which speaks the anthropic protocol: it "
            "returns no logprobs") in result.stderr


def test_an_openai_reasoning_model_is_refused(tmp_path, provider):
    config = PIPELINE_CONFIG.replace('model = "parent-model"', 'model = "openai/o3-mini"')
    project = _project(tmp_path, provider, config=config)

    result = Cli(project)("config", "check")
    assert result.exit_code == 1
    assert "`openai/o3-mini` is an OpenAI reasoning model: OpenAI refuses logprobs" in (
        result.stderr
    )


def test_a_child_tokenizer_not_on_this_machine_says_how_to_get_it(tmp_path, provider):
    project = write_project(
        tmp_path / "project", provider.url,
        PIPELINE_CONFIG + TRAINING.format(child="nobody/absent-model", top_k=5, kd=""),
    )

    result = Cli(project)("config", "check", env={"HF_HUB_CACHE": str(tmp_path / "hub")})
    assert result.exit_code == 1
    assert ("training.base_model = 'nobody/absent-model': its tokenizer.json is not on this "
            "machine") in result.stderr
    assert "hf download nobody/absent-model tokenizer.json" in result.stderr



def test_run_refuses_logits_with_another_chat_template_before_anything_is_paid(
    run_cli, project_dir, provider
):
    config = project_dir / "overbrainer.toml"
    config.write_text(config.read_text().replace(
        'distill = "logits"', 'distill = "logits"\nchat_template_jinja = "{{ messages }}"'))
    result = run_cli("run")
    assert result.exit_code == 1
    assert (
        'training.distill = "logits" trains with the child\'s own chat template (its '
        "answer's tokens are checked against the parent's with it); "
        "training.chat_template_jinja asks for another"
    ) in result.stderr
    assert provider.chats() == []


def test_split_carries_the_logprobs_by_answer_id(run_cli, project_dir, provider):
    for stage in ("subtopics", "questions", "answers", "split"):
        assert run_cli(stage).exit_code == 0, stage
    index = _kept(project_dir).index()
    train, held_out = lines(project_dir, "train.jsonl"), lines(project_dir, "eval.jsonl")
    assert train and held_out
    for example in train + held_out:
        record = _kept(project_dir).read(index[example["id"]])
        assert len(record.chosen) == len(example["messages"][-1]["content"])


def test_an_answer_without_logprobs_is_left_out_of_split(run_cli, project_dir, provider):
    assert run_cli("subtopics").exit_code == 0
    assert run_cli("questions").exit_code == 0
    provider.on(lambda seen: seen.system == "system|lifetimes",
                lambda seen: openai_completion("Plain.", reasoning="r"), times=None)
    assert run_cli("answers").exit_code == 0
    result = run_cli("split")
    assert result.exit_code == 0, result.stderr
    kept = lines(project_dir, "train.jsonl") + lines(project_dir, "eval.jsonl")
    assert kept and all(example["topic"] == "ownership" for example in kept)
    assert result.stdout == "split: 5 train, 1 eval, 2 excluded (no_logprobs 2), 0 orphaned\n"


def test_each_sample_of_a_question_keeps_its_own_logprobs(tmp_path, provider):
    config = PIPELINE_CONFIG.replace("reasoning = true", "reasoning = true\nsamples = 2")
    project = _project(tmp_path, provider, config=config)
    cli = Cli(project)
    for stage in ("subtopics", "questions", "answers"):
        assert cli(stage).exit_code == 0, stage
    answers = lines(project, "answers.jsonl")
    assert any(a["meta"].get("sample") == 1 for a in answers)
    assert all(seen.body["top_logprobs"] == 5 for seen in provider.chats("parent-model"))
    index = _kept(project).index()
    assert set(index) == {a["id"] for a in answers}
    for answer in answers:
        assert len(_kept(project).read(index[answer["id"]]).chosen) == len(
            answer["messages"][-1]["content"]
        )


def test_plan_counts_the_logprobs_tokens_their_size_and_price(tmp_path, provider):
    # No price table for logprobs: assumed free, and the line says how to price them.
    project = _project(tmp_path, provider, top_k=5)
    run_cli = Cli(project)
    result = run_cli("plan", "--json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    tokens = data["stages"]["answers"]["tokens_out"]
    assert tokens > 0
    assert data["logprobs"] == {
        "tokens": tokens, "top_k": 5, "bytes": tokens * 11, "usd": 0.0, "priced": False}
    row = next(line for line in run_cli("plan").stdout.splitlines()
               if line.startswith("logprobs "))
    assert row.endswith(
        "$0.0000, assumed not billed beyond the answers' output tokens (set "
        "[providers.main.prices] logprobs, USD per million tokens, "
        "where a provider bills them)")
    assert f"{tokens} answer tokens x top 5: about " in row
    # A logprobs price in the table is counted, in the total too.
    config = project / "overbrainer.toml"
    config.write_text(config.read_text() + (
        '\n[providers.main.prices]\n"parent-model" = { input = 1.0, output = 2.0, '
        "logprobs = 3.0 }\n"))
    assert "providers.main.prices.parent-model = $1.0 in, $2.0 out, $3.0 logprobs per " \
        "million tokens" in run_cli("config", "check").stdout
    priced = json.loads(run_cli("plan", "--json").stdout)
    assert priced["logprobs"]["usd"] == pytest.approx(tokens * 3e-6, abs=1e-6)
    assert priced["logprobs"]["priced"] is True
    assert priced["total_usd"] == pytest.approx(
        data["total_usd"] - data["stages"]["answers"]["usd"]
        + priced["stages"]["answers"]["usd"] + tokens * 3e-6, abs=1e-5)


def test_plan_of_a_text_distillation_has_no_logprobs_row(tmp_path, provider):
    project = _project(tmp_path, provider)
    run_cli = Cli(project)
    config = project / "overbrainer.toml"
    config.write_text(config.read_text().replace('distill = "logits"', 'distill = "text"'))
    assert json.loads(run_cli("plan", "--json").stdout)["logprobs"] is None
    assert "logprobs " not in run_cli("plan").stdout
