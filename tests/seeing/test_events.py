"""The event bus carries one typed event per kind: each listener hears it as published, and a
listener that raises is dropped from that event with the debug line naming its kind."""

from __future__ import annotations

import typing

from loguru import logger

from overbrainer import events
from overbrainer.events import ItemCounted, ItemRetry, TrainEnd, publish, subscribe


def test_a_failing_listener_is_named_by_kind_and_the_others_still_hear():
    heard: list[events.Event] = []
    lines: list[str] = []

    def broken(event: events.Event) -> None:
        raise RuntimeError("boom")

    sink = logger.add(lines.append, level="DEBUG", format="{message}")
    stops = [subscribe(broken), subscribe(heard.append)]
    try:
        publish(TrainEnd("demo_20260922-143005"))
        publish(ItemRetry("answers", topic="t"))
    finally:
        for stop in stops:
            stop()
        logger.remove(sink)
    assert heard == [TrainEnd("demo_20260922-143005"), ItemRetry("answers", topic="t")]
    assert [line.strip() for line in lines] == [
        "an event listener failed on train_end: RuntimeError('boom')",
        "an event listener failed on item_retry: RuntimeError('boom')",
    ]


def test_each_kind_is_one_type_and_an_item_result_is_in_its_kind():
    kinds = typing.get_args(events.Event)
    assert len({kind.kind for kind in kinds}) == len(kinds)
    for kind in kinds:
        if issubclass(kind, ItemCounted):
            assert kind.kind == f"item_{kind.result}"
