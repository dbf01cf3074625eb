"""What the compare tests share: an eval question as split writes it, and a judge on the
loopback provider that prefers the child, the first answer, or neither."""

from __future__ import annotations

import pytest
from tests.helpers.fake_provider import FakeProvider, Seen, openai_completion

# `overbrainer` in a process of its own, where the console script is not installed.
BOOT = "import sys; from overbrainer.cli import main; sys.argv[0] = 'overbrainer'; main()"
# The judge's system prompt begins so: how the provider tells a judging request apart.
JUDGE_PROMPT = "You are judging two answers"


def eval_record(index: int, question: str | None = None) -> dict:
    """Line ``index`` of a run's data/eval.jsonl: the parent's answer with its reasoning."""
    return {
        "id": f"q{index:04d}",
        "topic": "ownership",
        "messages": [
            {"role": "user", "content": question or f"Question {index}: what is ownership?"},
            {
                "role": "assistant",
                "content": f"<think>reasoning {index}</think>Parent answer {index}.",
            },
        ],
        "meta": {"input_tokens": 100, "output_tokens": 300},
    }


def child_is_a(seen: Seen) -> bool:
    """Whether the judge was shown the child's answer first."""
    return seen.prompt.split("Answer A:\n", 1)[1].startswith("Child answer")


def use_provider(
    monkeypatch: pytest.MonkeyPatch, provider: FakeProvider, verdict: str = "child"
) -> None:
    """A judge that prefers the child (``child``), the first answer whatever it is (``A``)
    or neither (``tie``)."""
    monkeypatch.setenv("OVERBRAINER_PROVIDERS__MAIN__BASE_URL", provider.url)

    def reply(seen):
        chosen = ("A" if child_is_a(seen) else "B") if verdict == "child" else verdict
        return openai_completion(f'{{"verdict": "{chosen}", "reason": "It is clearer."}}')

    provider.on(lambda seen: JUDGE_PROMPT in seen.prompt, reply, times=None)
