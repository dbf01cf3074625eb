"""Request bodies and replies go through orjson only where it reads and writes as the
standard library does."""

from __future__ import annotations

import json
import math
import random

import pytest

from overbrainer.providers.client import decode_reply, encode_body

EDGES = [
    b'{"a": 1}', b"1234567890123456789012", b"18446744073709551615", b"18446744073709551616",
    b"-9223372036854775809", b"1e400", b"-1e400", b'"\\ud800"', b'"\\udc00x"', b"NaN",
    b"Infinity", b'{"a":1,"a":2}', b"0.1", b"1E-7", b"5e-324", b'"\\u00e9"', '"é"'.encode(),
    '"é"'.encode("utf-16"), b"\xef\xbb\xbf{}", b"[1, 2.5, true, null]", b"  {}  ",
    b'{"content": "the number 12345678901234567890 in a string"}', b"", b"{", b"\xff",
]


def outcome(function, raw):
    try:
        value = function(raw)
    except ValueError:
        return "refused"
    return repr(value) if not (isinstance(value, float) and math.isnan(value)) else "nan"


@pytest.mark.parametrize("raw", EDGES)
def test_a_reply_is_read_as_the_standard_library_reads_it(raw: bytes):
    assert outcome(decode_reply, raw) == outcome(json.loads, raw)


def random_value(generator: random.Random, depth: int = 0) -> object:
    kind = generator.randrange(9 if depth < 3 else 6)
    if kind == 0:
        return generator.choice([0, -1, 2**63 - 1, 2**64, -(2**63) - 1, 10**19, 10**30])
    if kind == 1:
        return generator.choice([0.1, 1e-7, 1e300, -0.0, 5e-324, 123456.789, 1e16])
    if kind == 2:
        return "".join(chr(generator.choice([0x41, 0xE9, 0x20AC, 0x1F600, 0x0A, 0x22, 0x5C,
                                             0xD800, 0x7F, 0x09])) for _ in range(5))
    if kind == 3:
        return generator.choice([True, False, None])
    if kind in (4, 5):
        return str(generator.randrange(10 ** generator.randrange(1, 25)))
    if kind in (6, 7):
        return {f"k{n}": random_value(generator, depth + 1) for n in range(generator.randrange(4))}
    return [random_value(generator, depth + 1) for _ in range(generator.randrange(4))]


def test_bodies_and_replies_agree_with_the_standard_library_over_many_values():
    generator = random.Random(27)
    for _ in range(5000):
        value = {"messages": [random_value(generator)], "n": random_value(generator)}
        body = encode_body(value)
        assert json.loads(body) == json.loads(json.dumps(value))  # what the provider reads
        raw = json.dumps(value).encode("utf-8", "surrogatepass")
        assert outcome(decode_reply, raw) == outcome(json.loads, raw)
        compact = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        raw = compact.encode("utf-8", "surrogatepass")
        assert outcome(decode_reply, raw) == outcome(json.loads, raw)


def test_a_body_orjson_refuses_is_written_as_aiohttp_wrote_it():
    for body in (
        {"messages": [{"role": "user", "content": "half \ud800 of a pair"}]},
        {"seed": 2**64},
    ):
        assert encode_body(body) == json.dumps(body).encode()
