"""The streaming ``split`` writes the same bytes as the one it replaced
(tests/pipeline/reference_split.py) and gives the same counts and warnings, on generated
answers holding every odd line a file may have."""

from __future__ import annotations

import json
import random

import pytest
from loguru import logger
from tests.helpers.answers_data import write_dataset
from tests.pipeline import reference_split

from overbrainer.config.env import Environment
from overbrainer.config.load import load_settings
from overbrainer.pipeline import split
from overbrainer.pipeline.jsonl import dumps, encode, loads
from overbrainer.pipeline.records import DataFiles


def settings_of(project):
    return load_settings(project, Environment.load(project, {}), {})


def warnings_of(action):
    seen: list[str] = []
    sink = logger.add(seen.append, format="{message}", level="WARNING")
    try:
        return action(), seen
    finally:
        logger.remove(sink)


@pytest.mark.parametrize(("answers", "seed"), [(600, 1), (2000, 2), (400, 3)])
def test_the_same_bytes_counts_and_warnings_as_before(tmp_path, answers, seed):
    project = tmp_path / "project"
    write_dataset(project, answers, seed=seed, words=8)
    settings = settings_of(project)
    data = DataFiles(project)
    out = tmp_path / "before"
    out.mkdir()
    results = []
    for topics in (settings.topics, settings.topics[:1]):
        before, said_before = warnings_of(
            lambda topics=topics: reference_split.run(data, settings, topics, out)
        )
        after, said_after = warnings_of(lambda topics=topics: split.run(data, settings, topics))
        assert after == before
        assert said_after == said_before
        for name in ("train.jsonl", "eval.jsonl"):
            assert (data.path(name)).read_bytes() == (out / name).read_bytes()
        results.append(after)
    whole = results[0]
    assert whole.train and whole.eval and whole.orphaned and whole.excluded


def test_nothing_to_split_writes_nothing(tmp_path):
    project = tmp_path / "project"
    write_dataset(project, 0, odd=False)
    result = split.run(DataFiles(project), settings_of(project), settings_of(project).topics)
    assert not result.written
    assert not DataFiles(project).path("train.jsonl").exists()


def test_an_invalid_record_is_an_error_naming_its_line(tmp_path):
    from overbrainer.errors import UserError

    project = tmp_path / "project"
    write_dataset(project, 20, odd=False)
    path = DataFiles(project).path("answers.jsonl")
    lines = path.read_bytes().split(b"\n")
    lines.insert(5, b'{"id": 1}')
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(UserError, match=r"^data/answers.jsonl:6: invalid record$"):
        split.run(DataFiles(project), settings_of(project), settings_of(project).topics)


def test_the_fast_codec_reads_and_writes_what_the_standard_library_does():
    rng = random.Random(5)
    texts = ["", "é", "\u2028", "\x00\x1f\x7f", "🦀", "\\u00e9", '"quoted"', "a/b"]
    for _ in range(3000):
        value = rng.choice([
            float(f"{rng.randint(1, 10**17)}e{rng.randint(-340, 290)}"),
            -rng.random() * 10 ** rng.randint(-12, 3),
            rng.randint(-(2**70), 2**70),
            rng.choice(texts) + str(rng.random()),
            None, True, [1.5, "x"], {"k": 1e-7},
        ])
        record = {"v": value, "t": rng.choice(texts)}
        line = dumps(record).encode()
        parsed, fast = loads(line)
        assert parsed == record or value != value
        assert encode(parsed, fast) == line
    for raw in (b'{"a":NaN}', b'{"a":1e400}', b'\xef\xbb\xbf{"a":1}'):
        parsed, fast = loads(raw)
        assert parsed == json.loads(raw) or raw == b'{"a":NaN}'
        assert encode(parsed, fast) == dumps(json.loads(raw)).encode()
    # A lone surrogate cannot be written as UTF-8, as before.
    parsed, fast = loads(b'{"a":"\\ud800"}')
    with pytest.raises(UnicodeEncodeError):
        encode(parsed, fast)
