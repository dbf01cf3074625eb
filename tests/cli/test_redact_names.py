"""Secret-named assignments are masked; ordinary words that contain "token" or "key" are not."""

import pytest

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
