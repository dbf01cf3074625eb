"""``overbrainer plan`` against the loopback provider: each stage's requests, tokens and
dollars, from a prior before a stage ran (or a pilot) and measured once part of it did."""

from __future__ import annotations

import json

import pytest
from tests.helpers.fake_provider import Reply, openai_completion
from tests.helpers.pipeline_data import LOCAL_TRAINING, PIPELINE_CONFIG, lines, seed_questions

ONE_SUBTOPIC = (
    PIPELINE_CONFIG.replace("concurrency = 4", "concurrency = 1")
    .replace("subtopics = 2\nquestions_per_subtopic = 3",
             "subtopics = 1\nquestions_per_subtopic = 20")
    .replace('[[topics]]\nname = "lifetimes"\nsubtopics = 1\nquestions_per_subtopic = 2\n', "")
)
"""One topic, one subtopic of 20 questions: all of them seeded."""


def plan(run_cli, *args):
    result = run_cli("plan", "--json", *args)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_an_empty_project_is_planned_from_its_settings(run_cli, project_dir, provider):
    found = plan(run_cli)
    stages = found["stages"]
    # 2 topics' subtopics; 3 subtopics x ceil(questions / batch of 2); one answer each.
    assert [stages[s]["requests"] for s in ("subtopics", "questions", "answers")] == [2, 5, 8]
    assert {stages[s]["basis"] for s in ("subtopics", "questions", "answers")} == {"prior"}
    # The prior: a few paragraphs (600 tokens) and the reasoning asked for (2000) an answer;
    # a list's items (3 subtopics of 12 tokens, 8 more a reply); max_tokens is the bound.
    assert stages["answers"]["tokens_out"] == 8 * 2600
    assert stages["answers"]["tokens_out_bound"] == 8 * 16384
    assert stages["subtopics"]["tokens_out"] == 3 * 12 + 2 * 8
    assert stages["split"] == {"requests": 0, "tokens_in": 0, "tokens_out": 0, "usd": 0.0,
                               "basis": "no requests", "tokens_in_bound": 0,
                               "tokens_out_bound": 0, "usd_bound": 0.0}
    gen, parent = (1e-6, 2e-6), (3e-6, 4e-6)  # the loopback /models prices
    for stage, (price_in, price_out) in (("questions", gen), ("answers", parent)):
        item = stages[stage]
        expected = item["tokens_in"] * price_in + item["tokens_out"] * price_out
        assert item["usd"] == pytest.approx(expected, abs=1e-6)
    assert found["total_usd"] == pytest.approx(sum(s["usd"] for s in stages.values()), abs=1e-5)
    assert found["training"] is None and found["spent_usd"] == 0
    assert provider.chats() == []  # nothing spent: only the prices asked
    assert [s.path for s in provider.requests] == ["models?detailed=true"]


def test_the_table_says_each_basis_and_the_total(run_cli, project_dir, provider):
    result = run_cli("plan", "--max-usd", "0.5")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == (
        "stage       requests    tokens in   tokens out        usd      up to  basis"
    )
    assert lines[1].startswith("subtopics          2 ") and lines[1].endswith("  prior")
    assert lines[3] == (
        "answers            8          256        20800    $0.0840    $0.5331  prior"
    )
    assert lines[4] == (
        "split              0            0            0    $0.0000    $0.0000  no requests"
    )
    assert lines[-1] == (
        "total      $0.0847 to spend (the stages up to $0.7629); spent so far $0.0000; "
        "budget $0.5000, $0.5000 left"
    )


def test_the_rest_of_a_half_done_stage_is_projected_from_its_measured_average(
    run_cli, project_dir, provider
):
    """Replies whose size follows the question's: the average of the first half predicts
    the second within 10%."""

    def sized(seen):
        n = len(seen.prompt)
        return Reply(openai_completion("A" * n, reasoning="R", usage=(40 + n, 5 * n)))

    texts = [f"question number {n} " + "x" * (n % 5) for n in range(20)]
    provider.on(lambda s: s.model == "parent-model" and s.prompt == texts[10],
                Reply({"error": {"message": "no"}}, status=401), times=1)
    provider.on(lambda s: s.model == "parent-model", sized, times=None)
    seed_questions(project_dir, {("ownership", "moves"): texts})
    (project_dir / "overbrainer.toml").write_text(ONE_SUBTOPIC)
    assert run_cli("answers").exit_code == 1  # ten answered, then stopped
    found = plan(run_cli)["stages"]["answers"]
    assert found["basis"] == "measured" and found["requests"] == 10
    spent_before = plan(run_cli)["spent_usd"]
    assert run_cli("answers").exit_code == 0
    history = (project_dir / ".overbrainer" / "history.jsonl").read_text().splitlines()
    actual = json.loads(history[-1])["cost"]
    assert actual > 0 and abs(found["usd"] / actual - 1) < 0.10
    assert plan(run_cli)["spent_usd"] == pytest.approx(spent_before + actual)


def test_the_prices_table_and_the_batch_price(run_cli, project_dir, provider):
    config = PIPELINE_CONFIG.replace("reasoning = true", "reasoning = true\nbatch = true") + (
        "\n[providers.main.prices]\n"
        '"parent-model" = { input = 30.0, output = 40.0 }\n'
        '"gen-model" = { input = 1.0, output = 2.0 }\n'
    )
    (project_dir / "overbrainer.toml").write_text(config)
    stages = plan(run_cli)["stages"]
    answers = stages["answers"]
    # Half the listed price (batch_discount 0.5); nothing asked of /models: the table has both.
    expected = (answers["tokens_in"] * 30e-6 + answers["tokens_out"] * 40e-6) * 0.5
    assert answers["usd"] == pytest.approx(expected, abs=1e-6)
    assert provider.requests == []


def test_a_model_without_a_price_leaves_the_total_unknown(run_cli, project_dir, provider):
    provider.prices.pop("parent-model")
    found = plan(run_cli)
    assert found["stages"]["answers"]["usd"] is None and found["total_usd"] is None
    table = run_cli("plan").stdout.splitlines()
    assert table[3].split()[4:] == ["no", "price", "no", "price", "prior"]
    assert table[-1] == (
        "total      cost unknown (no price: answers (main/parent-model)); spent so far $0.0000"
    )


def test_a_finished_project_plans_nothing_and_asks_nothing(run_cli, project_dir, provider):
    assert run_cli("run").exit_code == 0
    (project_dir / "overbrainer.toml").write_text(PIPELINE_CONFIG + LOCAL_TRAINING)
    asked = len(provider.requests)
    (project_dir / ".env").write_text(
        (project_dir / ".env").read_text() + "OVERBRAINER_PROVIDERS__MAIN__API_KEY=vault:kv/x#y\n"
    )
    found = plan(run_cli)
    assert len(provider.requests) == asked
    assert {s["basis"] for s in found["stages"].values()} == {"done", "no requests"}
    training = found["training"]
    assert training["target"] == "here" and training["epochs"] == 2
    assert training["tokens"] == 2 * training["tokens_per_epoch"] > 0
    assert training["tokens_from"] == "data/train.jsonl"
    assert (training["usd"], training["basis"], training["gpu_type"]) == (0.0, "no price", None)
    assert found["total_usd"] == 0.0
    # A local target has no price, but training has a time: a guess before any run there.
    assert training["hours"] > 0
    assert training["hours_basis"] == GUESS
    line = run_cli("plan").stdout.splitlines()[5]
    assert line.startswith("training   on `here`: ")
    assert line.endswith(
        " tokens (assumed: data/train.jsonl, characters / 4); under 1s of training "
        f"({GUESS}); $0.0000, no price"
    )


GUESS = (
    "a guess: the throughput table's A40 figure for a lora of a 0.6B model; a first run on "
    "`here` measures it"
)


def test_no_time_is_guessed_for_a_cpu_and_several_gpus_divide_it(run_cli, project_dir, provider):
    """The throughput table is a GPU's: on a CPU its figure would be hundreds of times too
    short, so none is given; over `gpus` GPUs the guess takes the scaling as linear."""
    config = project_dir / "overbrainer.toml"
    config.write_text(PIPELINE_CONFIG + LOCAL_TRAINING)
    one = plan(run_cli)["training"]["hours"]
    config.write_text(PIPELINE_CONFIG + LOCAL_TRAINING + "gpus = 2\n")
    two = plan(run_cli)["training"]
    assert two["hours"] == pytest.approx(one / 2)
    assert two["hours_basis"] == GUESS.replace("A40", "2 x A40")
    config.write_text(PIPELINE_CONFIG + LOCAL_TRAINING.replace('"gpu"', '"cpu"'))
    cpu = plan(run_cli)["training"]
    assert cpu["hours"] is None
    assert cpu["hours_basis"] == (
        "training time not guessed on a CPU; a first run on `here` measures it"
    )
    line = next(x for x in run_cli("plan").stdout.splitlines() if x.startswith("training "))
    assert line.endswith(
        "; training time not guessed on a CPU; a first run on `here` measures it; "
        "$0.0000, no price"
    )


def test_training_tokens_are_projected_from_the_answers_to_come(run_cli, project_dir, provider):
    (project_dir / "overbrainer.toml").write_text(PIPELINE_CONFIG + LOCAL_TRAINING)
    found = plan(run_cli)
    training = found["training"]
    # No answer yet: each as long as the answers stage's prior says, never max_tokens.
    out = found["stages"]["answers"]["tokens_out"] / found["stages"]["answers"]["requests"]
    assert training["tokens_from"] == (
        f"no answers yet: {out:.0f} tokens an answer, the answers stage's prior, not max_tokens"
    )
    # 8 answers, 90% to train, each a question and the prior's answer (characters / 4).
    assert training["tokens_per_epoch"] == pytest.approx(8 * 0.9 * (80 + out * 4) / 4, rel=0.01)
    assert training["tokens_per_epoch"] < 8 * 0.9 * 16384 / 4  # max_tokens: 16384


def test_training_tokens_come_from_the_answers_lengths_once_there_are_some(
    run_cli, project_dir, provider
):
    (project_dir / "overbrainer.toml").write_text(PIPELINE_CONFIG + LOCAL_TRAINING)
    assert run_cli("subtopics").exit_code == 0 and run_cli("questions").exit_code == 0
    assert run_cli("plan", "--pilot", "3").exit_code == 0
    answers = lines(project_dir, "answers.jsonl")
    chars = sum(
        len(m.get("content") or "") + len(m.get("reasoning_content") or "")
        for record in answers for m in record["messages"]
    )
    training = plan(run_cli)["training"]
    left = 8 - len(answers)
    assert training["tokens_from"] == (
        f"the lengths of {len(answers)} answers, {left} more at their average"
    )
    assert training["tokens_per_epoch"] == int(8 * 0.9 * chars / len(answers)) // 4
    line = run_cli("plan").stdout.splitlines()[5]
    assert f"(assumed: the lengths of {len(answers)} answers, {left} more at their average, " \
        "characters / 4)" in line


def test_training_time_on_a_local_target_is_measured_from_a_previous_run(
    run_cli, project_dir, provider
):
    assert run_cli("run").exit_code == 0
    (project_dir / "overbrainer.toml").write_text(PIPELINE_CONFIG + LOCAL_TRAINING)
    run_dir = project_dir / "runs" / "demo-20260101-000000"
    (run_dir / "data").mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({
        "id": run_dir.name, "target": "here", "created": "2026-01-01T00:00:00Z",
        "remote_dir": str(run_dir), "state": "succeeded",
    }))  # fmt: skip
    example = {"messages": [{"role": "user", "content": "x" * 3996},
                            {"role": "assistant", "content": "y" * 4000}]}
    (run_dir / "data" / "train.jsonl").write_text(json.dumps(example) + "\n")  # 2000 tokens
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(e) + "\n" for e in (
        {"event": "begin", "time": 1000.0, "max_steps": 4},
        {"event": "log", "time": 1004.0, "step": 2, "epoch": 1.0, "loss": 1.0},
        {"event": "log", "time": 1010.0, "step": 4, "epoch": 2.0, "loss": 0.9},
    )))  # fmt: skip  # 2 epochs of 2000 tokens in 10 s: 400 tokens/s
    training = plan(run_cli)["training"]
    assert training["hours_basis"] == f"measured on run {run_dir.name}: 400 tokens/s"
    assert training["hours"] == pytest.approx(training["tokens"] / 400 / 3600, abs=1e-6)
    line = run_cli("plan").stdout.splitlines()[5]
    assert f"of training (measured on run {run_dir.name}: 400 tokens/s); $0.0000, no price" \
        in line


def test_run_shows_the_plan_total_first(run_cli, project_dir, provider):
    result = run_cli("run", "--max-usd", "5")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[:2] == [
        "plan: $0.0847 to spend (the stages up to $0.7629); spent so far $0.0000; budget "
        "$5.0000, $5.0000 left (`overbrainer plan` shows how)",
        "plan: nothing measured yet, so it assumes subtopics 26 tokens out a request, "
        "questions 56 tokens out a request, answers 2600 tokens out a request (a prior); the "
        "budget reserves each request in flight at its max_tokens and holds whatever they "
        "take (`overbrainer plan --pilot 50` measures first)",
    ]


def test_the_throughput_override_is_checked_and_shown(run_cli, project_dir, provider):
    (project_dir / "overbrainer.toml").write_text(
        PIPELINE_CONFIG + '\n[plan]\nthroughput = { "NVIDIA A40" = 2500 }\n'
    )
    result = run_cli("config", "check")
    assert result.exit_code == 0, result.stderr
    assert "plan.throughput.NVIDIA A40 = 2500.0 tokens/s" in result.stdout
    (project_dir / "overbrainer.toml").write_text(
        PIPELINE_CONFIG + '\n[plan]\nthroughput = { "NVIDIA A40" = 0 }\n'
    )
    bad = run_cli("config", "check")
    assert bad.exit_code == 1
    assert "plan.throughput.NVIDIA A40" in bad.stderr


def test_a_plan_that_cannot_be_made_leaves_run_s_total_unknown(run_cli, project_dir, provider):
    (project_dir / "prompts" / "subtopics.txt").write_text("subtopics|{{ nope }}")
    result = run_cli("run")
    assert result.exit_code == 1
    assert result.stdout.splitlines()[0] == (
        "plan: cost unknown (invalid template subtopics.txt: undefined variable `nope`)"
    )
    assert provider.chats() == []


def test_the_export_and_a_compare(run_cli, project_dir, provider):
    (project_dir / "overbrainer.toml").write_text(
        PIPELINE_CONFIG + LOCAL_TRAINING + "\n[export]\nafter_training = true\n"
    )
    # The local target has no Axolotl here: `run` would stop before its stages; run them.
    for stage in ("subtopics", "questions", "answers", "split"):
        assert run_cli(stage).exit_code == 0, stage
    found = plan(run_cli)
    assert found["export"] == {"requests": 0, "tokens_in": 0, "tokens_out": 0, "gpu_hours": 0,
                               "usd": 0.0, "basis": "no price", "in_total": True}
    compare = found["compare"]
    # One eval example, judged in both orders against the base model and the parent.
    assert compare["requests"] == 4 and not compare["in_total"]
    assert compare["basis"] == "assumed (overbrainer compare, not part of run)"
    lines = run_cli("plan").stdout.splitlines()
    assert lines[6] == "export     $0.0000, no price"
    assert lines[7].startswith("compare    4 judge requests, $")
    assert lines[7].endswith(", assumed (overbrainer compare, not part of run)")


def test_a_pilot_pays_for_a_few_answers_then_plans_from_them(run_cli, project_dir, provider):
    texts = [f"question number {n}" for n in range(40)]
    seed_questions(project_dir, {("ownership", "moves"): texts})
    (project_dir / "overbrainer.toml").write_text(ONE_SUBTOPIC)
    before = plan(run_cli)["stages"]["answers"]
    assert before["basis"] == "prior" and before["requests"] == 40
    result = run_cli("plan", "--json", "--pilot", "5")
    assert result.exit_code == 0, result.stderr
    assert "pilot: answers: 5 done, 0 skipped" in result.stderr
    after = json.loads(result.stdout)["stages"]["answers"]
    assert after["basis"] == "measured" and after["requests"] == 35
    asked = [seen.prompt for seen in provider.chats("parent-model")]
    assert len(asked) == 5 and len(set(asked)) == 5
    assert asked != texts[:5]  # spread over the questions left, not the first five
    assert len(lines(project_dir, "answers.jsonl")) == 5  # paid for, so kept
    # The rest then costs what the pilot measured: within 15%.
    assert run_cli("answers").exit_code == 0
    history = (project_dir / ".overbrainer" / "history.jsonl").read_text().splitlines()
    actual = json.loads(history[-1])["cost"]
    assert abs(after["usd"] / actual - 1) < 0.15


def test_a_pilot_needs_questions_and_keeps_the_budget(run_cli, project_dir, provider):
    empty = run_cli("plan", "--pilot", "3")
    assert empty.exit_code == 2
    assert "--pilot answers questions, and there is none without an answer" in empty.stderr
    seed_questions(project_dir, {("ownership", "moves"): [f"q{n}" for n in range(10)]})
    (project_dir / "overbrainer.toml").write_text(ONE_SUBTOPIC)
    poor = run_cli("plan", "--pilot", "3", "--max-usd", "0.00001")
    assert poor.exit_code == 1
    assert "budget: answers stopped before a request" in poor.stderr
    assert provider.chats() == []


def test_plan_json_is_strict_json_whatever_a_provider_lists(run_cli, project_dir, provider):
    provider.prices["parent-model"] = ("1e308", "1e308")  # $inf once multiplied
    result = run_cli("plan", "--json")
    assert result.exit_code == 0, result.stderr
    assert "Infinity" not in result.stdout and "NaN" not in result.stdout
    found = json.loads(result.stdout, parse_constant=pytest.fail)
    assert found["stages"]["answers"]["usd"] is None  # no price, never $inf
    assert found["total_usd"] is None


def test_training_counts_one_answer_a_question_when_the_judge_selects(run_cli, project_dir):
    """samples = 4 with select = "judge" trains the one answer the judge keeps: a quarter of
    what every answer would train (select = "all")."""
    many = PIPELINE_CONFIG.replace('reasoning = true\n', 'reasoning = true\nsamples = 4\n', 1)
    config = project_dir / "overbrainer.toml"
    config.write_text(many + LOCAL_TRAINING)
    every = plan(run_cli)["training"]
    config.write_text(many.replace("[pipeline]\n", '[pipeline]\nselect = "judge"\n', 1)
                      + LOCAL_TRAINING)  # fmt: skip
    judged = plan(run_cli)["training"]
    assert judged["tokens_per_epoch"] == pytest.approx(every["tokens_per_epoch"] / 4, rel=0.01)
    assert judged["tokens_from"].endswith(", one in 4 kept (select = judge)")
