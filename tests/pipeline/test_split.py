"""The split: its quotas, its determinism, and what it leaves out."""

from __future__ import annotations

import json
import random

import pytest
from tests.helpers.pipeline_data import PIPELINE_CONFIG, answer, lines, seed_questions

from overbrainer.pipeline.split import allocate, eval_size, ranked


@pytest.mark.parametrize(
    ("n", "ratio", "size"),
    [(0, 0.1, 0), (1, 0.5, 0), (2, 0.1, 1), (2, 0.9, 1), (30, 0.1, 3), (105, 0.1, 11),
     (25, 0.1, 3), (10, 0.99, 9)],
)
def test_eval_size(n, ratio, size):
    assert eval_size(n, ratio) == size


def test_largest_remainder_over_groups():
    assert allocate(3, {"a": 20, "b": 10}, 42) == {"a": 2, "b": 1}
    assert allocate(0, {"a": 1}, 42) == {"a": 0}
    shares = allocate(2, {"a": 1, "b": 1, "c": 1}, 42)
    assert sorted(shares.values()) == [0, 1, 1]
    assert allocate(2, {"a": 1, "b": 1, "c": 1}, 42) == shares  # ties broken the same way


def test_ranks_that_tie_are_ordered_by_id():
    answers = {answer_id: answer_id.upper() for answer_id in ("c", "a", "d", "b")}
    ranks = {"a": 2, "b": 1, "c": 2, "d": 0}
    assert ranked(answers, ranks.__getitem__) == ["D", "B", "A", "C"]
    assert ranked(answers, {"a": 3, "b": 1, "c": 2, "d": 0}.__getitem__) == ["D", "B", "C", "A"]


def write_answers(project_dir, records):
    with (project_dir / "data" / "answers.jsonl").open("w") as file:
        file.writelines(json.dumps(r) + "\n" for r in records)


def test_twenty_and_ten_examples_give_two_and_one(run_cli, project_dir):
    questions = seed_questions(project_dir, {
        ("ownership", "moves"): [f"m{i}" for i in range(20)],
        ("lifetimes", "elision"): [f"e{i}" for i in range(10)],
    })
    write_answers(project_dir, [answer(q) for q in questions])
    result = run_cli("split")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "split: 27 train, 3 eval, 0 excluded, 0 orphaned\n"
    topics = [r["topic"] for r in lines(project_dir, "eval.jsonl")]
    assert sorted(topics) == ["lifetimes", "ownership", "ownership"]


def test_105_examples_give_11_eval(run_cli, project_dir):
    questions = seed_questions(project_dir, {("ownership", "moves"): [f"m{i}" for i in range(105)]})
    write_answers(project_dir, [answer(q) for q in questions])
    assert run_cli("split").stdout == "split: 94 train, 11 eval, 0 excluded, 0 orphaned\n"


def test_the_split_does_not_depend_on_the_order_of_answers(run_cli, project_dir):
    questions = seed_questions(project_dir, {
        ("ownership", "moves"): [f"m{i}" for i in range(13)],
        ("ownership", "borrows"): [f"b{i}" for i in range(7)],
        ("lifetimes", "elision"): [f"e{i}" for i in range(9)],
    })
    records = [answer(q) for q in questions]
    outputs = set()
    for shuffle_seed in range(4):
        random.Random(shuffle_seed).shuffle(records)
        write_answers(project_dir, records)
        assert run_cli("split").exit_code == 0
        outputs.add(tuple((project_dir / "data" / n).read_text() for n in ("train.jsonl",
                                                                           "eval.jsonl")))
    assert len(outputs) == 1
    _, evaluation = next(iter(outputs))
    assert len(evaluation.splitlines()) == 3
    # a different seed picks differently
    config = PIPELINE_CONFIG.replace("concurrency = 4", "concurrency = 4\nseed = 7")
    (project_dir / "overbrainer.toml").write_text(config)
    run_cli("split")
    assert (project_dir / "data" / "eval.jsonl").read_text() != evaluation


def test_records_are_copies_of_the_answers(run_cli, project_dir):
    questions = seed_questions(project_dir, {("ownership", "moves"): ["a", "b", "c"]})
    records = [answer(q) for q in questions]
    write_answers(project_dir, records)
    run_cli("split")
    assert sorted(lines(project_dir, "train.jsonl") + lines(project_dir, "eval.jsonl"),
                  key=lambda r: r["id"]) == sorted(records, key=lambda r: r["id"])


def test_excluded_and_orphaned_answers_are_left_out(run_cli, project_dir):
    questions = seed_questions(project_dir, {("ownership", "moves"): [f"m{i}" for i in range(6)]})
    records = [answer(q) for q in questions[:2]]
    records += [answer(questions[2], "truncated"), answer(questions[3], "truncated"),
                answer(questions[4], "no_raw_reasoning")]
    gone_topic = dict(answer(questions[5]), topic="removed")
    gone_question = dict(answer(questions[5]), id="0" * 32)
    write_answers(project_dir, [*records, gone_topic, gone_question])
    result = run_cli("split")
    assert result.stdout == (
        "split: 1 train, 1 eval, 3 excluded (truncated 2, no_raw_reasoning 1), 2 orphaned\n"
    )
    history = (project_dir / ".overbrainer" / "history.jsonl").read_text().splitlines()
    entry = json.loads(history[-1])
    assert entry["split"] == {"train": 1, "eval": 1, "orphaned": 2}
    assert (entry["stage"], entry["status"], entry["excluded"]) == ("split", "ok", 3)


def test_a_single_example_goes_to_train(run_cli, project_dir):
    [question] = seed_questions(project_dir, {("ownership", "moves"): ["only"]})
    write_answers(project_dir, [answer(question)])
    assert run_cli("split").stdout == "split: 1 train, 0 eval, 0 excluded, 0 orphaned\n"
    assert (project_dir / "data" / "eval.jsonl").read_text() == ""


def test_topic_splits_only_that_topic_again(run_cli, project_dir):
    questions = seed_questions(project_dir, {
        ("ownership", "moves"): [f"m{i}" for i in range(10)],
        ("lifetimes", "elision"): [f"e{i}" for i in range(10)],
    })
    write_answers(project_dir, [answer(q) for q in questions[:10]])
    run_cli("split")
    ownership = {n: lines(project_dir, n) for n in ("train.jsonl", "eval.jsonl")}
    write_answers(project_dir, [answer(q) for q in questions])
    result = run_cli("split", "--topic", "lifetimes")
    assert result.stdout == "split: 9 train, 1 eval, 0 excluded, 0 orphaned\n"
    for name, before in ownership.items():
        found = lines(project_dir, name)
        assert [r for r in found if r["topic"] == "ownership"] == before
        assert any(r["topic"] == "lifetimes" for r in found)


def test_split_reads_no_template(run_cli, project_dir):
    [question] = seed_questions(project_dir, {("ownership", "moves"): ["only"]})
    write_answers(project_dir, [answer(question)])
    (project_dir / "prompts" / "questions.txt").write_text("{{ broken")
    assert run_cli("split").exit_code == 0


MALFORMED = [
    [],
    ["x", 3],
    [{"role": "user"}],
    [{"role": "user", "content": "q"}],
    [{"role": "assistant", "content": "a"}],
    [{"role": "user", "content": "q"}, {"role": "assistant", "content": 7}],
    [{"role": "user", "content": "q"}, {"role": "tool", "content": "a"}],
    [{"role": "user", "content": "q"}, {"role": "system", "content": "s"},
     {"role": "assistant", "content": "a"}],
    [{"role": "user", "content": "q"}, {"role": "user", "content": "q"},
     {"role": "assistant", "content": "a"}],
    [{"role": "user", "content": "q", "reasoning_content": "r"},
     {"role": "assistant", "content": "a"}],
    [{"role": "user", "content": "q"},
     {"role": "assistant", "content": "a", "reasoning_content": 1}],
    [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "weight": 0}],
]


def test_malformed_conversations_are_excluded_with_a_reason(run_cli, project_dir):
    questions = seed_questions(
        project_dir, {("ownership", "moves"): [f"m{i}" for i in range(len(MALFORMED) + 2)]}
    )
    good = [answer(q) for q in questions[:2]]
    good[1]["messages"].insert(0, {"role": "system", "content": "s"})
    bad = [dict(answer(q), messages=m) for q, m in zip(questions[2:], MALFORMED, strict=True)]
    write_answers(project_dir, [*good, *bad])
    result = run_cli("split")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == (
        f"split: 1 train, 1 eval, {len(MALFORMED)} excluded (malformed {len(MALFORMED)}), "
        "0 orphaned\n"
    )
    kept = lines(project_dir, "train.jsonl") + lines(project_dir, "eval.jsonl")
    assert sorted(r["id"] for r in kept) == sorted(r["id"] for r in good)
    warnings = result.stderr.splitlines()
    first = bad[0]["id"]
    assert f"warning: split: answer {first}: malformed conversation (no messages)" in warnings
    assert (
        f"warning: split: answer {bad[3]['id']}: malformed conversation "
        "(no assistant turn at the end)"
    ) in warnings


def test_an_answer_that_is_blank_is_excluded_as_empty(run_cli, project_dir):
    questions = seed_questions(project_dir, {("ownership", "moves"): ["m0", "m1"]})
    blank = answer(questions[1])
    blank["messages"][-1]["content"] = " \n"
    write_answers(project_dir, [answer(questions[0]), blank])
    result = run_cli("split")
    assert result.stdout == "split: 1 train, 0 eval, 1 excluded (empty 1), 0 orphaned\n"


def test_kill_9_between_the_two_files_never_pairs_a_new_train_with_an_old_eval(
    run_cli, project_dir
):
    """Each file is replaced atomically, one after the other: a real `kill -9` (by pid, of
    the `overbrainer split` process) as the new train file lands pairs it with the old eval
    file, and `train` refuses that pair until a split runs again (which removes the killed
    one's temporary files). Wherever a kill lands, what `train` accepts is a true pair."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    from overbrainer.errors import UserError
    from overbrainer.train.prepare import check_train_data

    config = project_dir / "overbrainer.toml"
    config.write_text(PIPELINE_CONFIG.replace("[pipeline]\n", "[pipeline]\neval_ratio = 0.3\n"))
    questions = seed_questions(project_dir, {("ownership", "moves"): [
        f"question {i} " + "x" * 200 for i in range(20000)
    ]})
    write_answers(project_dir, [answer(q) for q in questions])
    assert run_cli("split").exit_code == 0
    data = project_dir / "data"
    before = os.stat(data / "train.jsonl").st_ino
    config.write_text(PIPELINE_CONFIG.replace("[pipeline]\n", "[pipeline]\neval_ratio = 0.1\n"))
    cli = str(Path(sys.executable).parent / "overbrainer")
    process = subprocess.Popen([cli, "-C", str(project_dir), "split"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while os.stat(data / "train.jsonl").st_ino == before:  # the new train file is in
        assert process.poll() is None and time.monotonic() < deadline
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    def ids(name):
        return {r["id"] for r in lines(project_dir, name)}

    train_ids, eval_ids = ids("train.jsonl"), ids("eval.jsonl")
    # Killed between the two renames (as the wait aims at), the old eval and the new train
    # share examples and `train` refuses them; killed a moment later, the pair is a true one
    # (or still marked as being written): never a mixed pair accepted.
    if train_ids & eval_ids:
        with pytest.raises(UserError, match="are not a pair: a split was interrupted"):
            check_train_data(data, project_dir)

    (data / ".train.jsonl.k1ll3d").write_bytes(b"x" * 1000)  # as a killed write leaves one
    again = run_cli("split")
    assert again.exit_code == 0, again.stderr
    assert not list(data.glob(".*.jsonl.*"))  # stale temporary files removed
    assert "temporary file(s) an interrupted split left" in again.stderr
    assert not ids("train.jsonl") & ids("eval.jsonl")
    assert len(ids("train.jsonl") | ids("eval.jsonl")) == 20000
    assert check_train_data(data, project_dir) is True


def test_a_pair_edited_after_the_split_is_named_and_how_to_train_on_it_said(
    run_cli, project_dir
):
    """Not "interrupted": the split ended, and a file changed since (by hand, by a tool)."""
    from overbrainer.errors import UserError
    from overbrainer.train.prepare import check_train_data

    questions = seed_questions(project_dir, {("ownership", "moves"): ["q1", "q2", "q3"]})
    write_answers(project_dir, [answer(q) for q in questions])
    assert run_cli("split").exit_code == 0
    data = project_dir / "data"
    with (data / "eval.jsonl").open("a") as file:
        file.write(json.dumps(answer(questions[0])) + "\n")
    with pytest.raises(UserError) as refused:
        check_train_data(data, project_dir)
    assert str(refused.value) == (
        "data/eval.jsonl is not the file `overbrainer split` wrote with the other "
        "(data/split.json records another): run `overbrainer split` again, or, to train on "
        "the files as they are, remove data/split.json"
    )
    (data / "split.json").unlink()
    assert check_train_data(data, project_dir) is True


@pytest.mark.parametrize("filler", [b"x", b"\r"])
def test_a_line_past_the_bound_is_an_error_naming_its_file_and_line(run_cli, project_dir, filler):
    """Gigabytes with no newline (or only carriage returns) are one line: refused at 64
    MiB with the file and line, never read whole (it was taken for a torn last line)."""
    from overbrainer.lines import MAX_LINE

    questions = seed_questions(project_dir, {("ownership", "moves"): ["q1", "q2"]})
    write_answers(project_dir, [answer(questions[0])])
    with (project_dir / "data" / "answers.jsonl").open("ab") as file:
        file.write(filler * (MAX_LINE + 1))
    result = run_cli("split")
    assert result.exit_code == 1
    assert result.stderr == (
        "error: data/answers.jsonl:2: a line longer than 64 MiB (no line end: not a file of "
        "lines, or a damaged one): not read\n"
    )
    assert not (project_dir / "data" / "train.jsonl").exists()


def test_a_full_disk_between_the_two_files_says_what_is_on_disk_and_train_refuses_it(
    tmpfs_of, provider
):
    """The new train file fits, the new eval file does not: the message says which is
    which and how to go on (it said only "the file is as it was"), `train` refuses the pair,
    and a split with room again makes a true one."""
    import os

    from tests.helpers.pipeline_data import write_project
    from tests.helpers.project import Cli

    from overbrainer.errors import UserError
    from overbrainer.train.prepare import check_train_data

    project_dir = write_project(tmpfs_of("8m") / "project", provider.url)
    config = project_dir / "overbrainer.toml"
    config.write_text(PIPELINE_CONFIG.replace("[pipeline]\n", "[pipeline]\neval_ratio = 0.5\n"))
    questions = seed_questions(project_dir, {("ownership", "moves"): [
        f"question {i} " + "x" * 400 for i in range(2000)
    ]})
    write_answers(project_dir, [answer(q) for q in questions])
    assert Cli(project_dir)("split").exit_code == 0
    data = project_dir / "data"
    pair = sum((data / name).stat().st_size for name in ("train.jsonl", "eval.jsonl"))
    # Train becomes a tenth of the pair (room for it), eval nine tenths: once the old train
    # is gone, less room than that is left.
    config.write_text(PIPELINE_CONFIG.replace("[pipeline]\n", "[pipeline]\neval_ratio = 0.9\n"))
    free = os.statvfs(data).f_bavail * os.statvfs(data).f_frsize
    (project_dir.parent / "filler").write_bytes(b"\0" * (free - int(pair * 0.3)))
    result = Cli(project_dir)("split")
    assert result.exit_code == 1
    assert result.stderr == (
        "error: split stopped: the disk is full (data/eval.jsonl could not be written); "
        "data/train.jsonl is new and data/eval.jsonl as it was: a pair `train` refuses; free "
        "some "
        "space, then run `overbrainer split` again\n"
    )
    assert not list(data.glob(".*.jsonl.*"))
    with pytest.raises(UserError, match="are not a pair: a split was interrupted"):
        check_train_data(data, project_dir)
    (project_dir.parent / "filler").unlink()
    assert Cli(project_dir)("split").exit_code == 0
    assert check_train_data(data, project_dir) is True


@pytest.mark.parametrize("name", ["train.jsonl", "eval.jsonl", "split.json"])
def test_a_directory_in_the_place_of_a_file_split_writes_is_named(run_cli, project_dir, name):
    """It was an IsADirectoryError traceback from the rename."""
    questions = seed_questions(project_dir, {("ownership", "moves"): ["q1", "q2", "q3"]})
    write_answers(project_dir, [answer(q) for q in questions])
    (project_dir / "data" / name).mkdir()
    result = run_cli("split")
    assert result.exit_code == 1
    assert result.stderr == f"error: cannot write data/{name}: Is a directory\n"
    assert not list((project_dir / "data").glob(".*.*.*"))  # no temporary file left
