"""The URLs a batch reply names, and the pages of a provider's list: where the key may go,
and when the list can hold no more of a project's batches."""

from __future__ import annotations

import pytest

from overbrainer.providers.batch_api import CLOCK_SLACK, item_id, listed_past, question_of, resolved

BASE = "https://api.example.com/anthropic/v1"


@pytest.mark.parametrize(
    ("url", "followed"),
    [
        ("https://api.example.com/anthropic/v1/messages/batches/b1/results",
         "https://api.example.com/anthropic/v1/messages/batches/b1/results"),
        ("/anthropic/v1/messages/batches/b1/results",
         "https://api.example.com/anthropic/v1/messages/batches/b1/results"),
        ("messages/batches/b1/results",
         "https://api.example.com/anthropic/v1/messages/batches/b1/results"),
        ("https://files.example.com/b1/results", None),  # another host
        ("//evil.example/b1/results", None),  # scheme-relative: another host
        ("http://api.example.com/anthropic/v1/messages/batches/b1/results", None),  # plain http
        ("https://api.example.com:8443/b1/results", None),  # another port
    ],
)
def test_a_results_url_is_resolved_against_base_url_and_kept_on_its_origin(url, followed):
    assert resolved(url, BASE) == followed


def test_an_item_carries_its_batch_s_key_and_only_its_own_key_gives_back_the_question():
    custom_id = item_id("ob-0123456789abcdef", "q1")
    assert custom_id == "ob-0123456789abcdef-q1"
    assert question_of("ob-0123456789abcdef", custom_id) == "q1"
    assert question_of("ob-fedcba9876543210", custom_id) is None
    assert question_of("ob-0123456789abcdef", "q1") is None


def test_only_a_newest_first_page_that_reaches_older_batches_ends_the_search():
    since = 10_000.0
    old = since - CLOCK_SLACK - 1
    assert listed_past([since + 5, since, old], since)
    assert not listed_past([since + 5, since + 1], since)  # all newer: read on
    assert not listed_past([old, since + 5], since)  # oldest first: read on
    assert not listed_past([], since)
