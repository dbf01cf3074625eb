"""The garbage collector held during start-up and given back for the command's work."""

from __future__ import annotations

import gc
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.helpers.fake_provider import FakeProvider, Reply, Seen
from tests.helpers.pipeline_data import write_project

from overbrainer import collector
from overbrainer.cli import main


@pytest.fixture(autouse=True)
def collector_restored(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts with the collector on and nothing held, and leaves it so."""
    monkeypatch.setattr(collector, "_held", False)
    previous = signal.getsignal(signal.SIGTERM)
    gc.enable()
    yield
    gc.unfreeze()
    gc.enable()
    signal.signal(signal.SIGTERM, previous)


def test_release_freezes_start_up_and_turns_the_collector_back_on():
    collector.hold()
    assert not gc.isenabled()
    made = [[n] for n in range(1000)]  # objects of start-up
    collector.release()
    assert gc.isenabled()
    assert gc.get_freeze_count() >= len(made)
    frozen = gc.get_freeze_count()
    collector.release()  # once only
    assert gc.get_freeze_count() == frozen


def test_a_collector_turned_off_by_the_caller_stays_off():
    gc.disable()
    collector.hold()
    collector.release()
    assert not gc.isenabled()
    assert gc.get_freeze_count() == 0


def run_main(monkeypatch: pytest.MonkeyPatch, *args: str) -> None:
    monkeypatch.setattr("sys.argv", ["overbrainer", *args])
    with pytest.raises(SystemExit) as exited:
        main()
    assert exited.value.code in (0, None)


def test_answers_turns_the_collector_back_on_for_its_requests(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, provider: FakeProvider
):
    project = write_project(tmp_path / "project", provider.url)
    run_main(monkeypatch, "-C", str(project), "subtopics")
    run_main(monkeypatch, "-C", str(project), "questions")
    gc.unfreeze()
    monkeypatch.setattr(collector, "_held", False)
    on_at_request: list[bool] = []  # the provider's thread sees the process's collector

    def note(seen: Seen) -> bool:
        on_at_request.append(gc.isenabled())
        return False

    provider.on(note, Reply(), times=None)
    run_main(monkeypatch, "-C", str(project), "answers")
    answered = (project / "data" / "answers.jsonl").read_text().count("\n")
    assert answered > 0
    assert on_at_request and all(on_at_request)
    assert gc.isenabled()
    assert gc.get_freeze_count() > 0


def test_another_command_gets_the_collector_back_before_it_runs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, provider: FakeProvider
):
    project = write_project(tmp_path / "project", provider.url)
    run_main(monkeypatch, "-C", str(project), "history")
    assert gc.isenabled()
    assert gc.get_freeze_count() > 0
