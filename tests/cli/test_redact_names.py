"""Secret-named assignments are masked; ordinary words that contain "token" or "key" are not."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overbrainer.redact import redact


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("HF_TOKEN=abc123", "HF_TOKEN=***"),
        ("MYAPIKEY=abc", "MYAPIKEY=***"),
        ("api_key=xyz", "api_key=***"),
        ("--hub_token=xyz", "--hub_token=***"),
        ('password="two words"', "password=***"),
        ("Collecting tokenizers==0.23.1", "Collecting tokenizers==0.23.1"),
        ("max_tokens=16384", "max_tokens=16384"),
        ("keyboard=us", "keyboard=us"),
    ],
)
def test_assignments(text, shown):
    assert redact(text) == shown


def _redact_every_pattern(text: str) -> str:
    """``redact`` as it was before its screens: every pattern searched in every text."""
    from overbrainer import redact as module

    for value in sorted(module._known, key=len, reverse=True):
        text = text.replace(value, module.MASK)
    for pattern, replacement in module._PATTERNS:
        text = pattern.sub(replacement, text)
    return text


SECRETISH = [
    "sk-", "pk-", "rk-", "hf_", "rpa_", "Bearer ", "BEARER\t", "bearer", "API_KEY=", "token=",
    "my_secret_key=", "PASSWORD='a b'", "-----BEGIN RSA PRIVATE KEY-----",
    "-----END RSA PRIVATE KEY-----", "abcdefghijklmnopqrstuvwxyz0123", "=", " ", "\n", "_", "k",
]  # fmt: skip


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(SECRETISH) | st.text(max_size=6), max_size=12))
def test_the_screened_redaction_masks_what_every_pattern_would(parts):
    text = "".join(parts)
    assert redact(text) == _redact_every_pattern(text)


def test_the_quick_screen_lets_through_every_text_a_pattern_needs():
    from overbrainer import redact as module

    assert len(module._NEEDS) == len(module._PATTERNS)
    for needed in module._NEEDS:
        assert module._may_match(needed)
        assert module._may_match(f"a {needed} b")
    assert module._may_match("BEARER x") and module._may_match("BeArEr")
    assert not module._may_match("The answer to: why does a move invalidate its source?")
