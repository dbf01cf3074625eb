"""The two protocols against the loopback provider: bodies, replies, errors and retries."""

from __future__ import annotations

import asyncio
import socket
import time
from datetime import UTC, datetime

import pytest
from tests.helpers.fake_provider import FakeProvider, Reply, anthropic_message, openai_completion

from overbrainer.config.model import Role
from overbrainer.providers import retry
from overbrainer.providers.client import Client
from overbrainer.providers.errors import FatalProviderError, ProviderError
from overbrainer.providers.prices import Price, PriceBook, parse_model_info, parse_prices
from overbrainer.providers.registry import ProviderSet
from overbrainer.providers.retry import RetryPolicy, parse_retry_after

KEY = "sk-test-key-0123456789abcdef"
MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "why?"}]


@pytest.fixture(autouse=True)
def fast_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(retry, "BACKOFF_UNIT", 0.001)


def chat(provider: FakeProvider, role: Role, protocol: str = "openai", max_retries: int = 2,
         key: str | None = KEY, warnings: list | None = None):
    async def go():
        client = Client("main", protocol, provider.url + "/", key, concurrency=4,
                        timeout_secs=5, retry=RetryPolicy(max_retries))
        seen = warnings if warnings is not None else []
        try:
            return await client.chat(role, MESSAGES, lambda m, d: seen.append((m, d)))
        finally:
            await client.close()

    return asyncio.run(go())


def role(**values) -> Role:
    return Role(provider="main", model=values.pop("model", "m"), **values)


# -- request bodies --------------------------------------------------------------------------


def test_openai_body_headers_and_reasoning_effort(provider):
    chat(provider, role(reasoning=True, reasoning_effort="high", temperature=0.5, max_tokens=99))
    seen = provider.chats()[0]
    assert seen.path == "chat/completions"
    assert seen.headers["Authorization"] == f"Bearer {KEY}"
    assert seen.headers["Content-Type"] == "application/json"
    assert seen.body == {
        "model": "m",
        "messages": MESSAGES,
        "max_tokens": 99,
        "temperature": 0.5,
        "reasoning": {"effort": "high"},
    }


def test_openai_reasoning_without_effort_and_effort_none(provider):
    chat(provider, role(reasoning=True))
    chat(provider, role(reasoning_effort="none"))
    first, second = provider.chats()
    assert first.body["reasoning"] == {"enabled": True}
    assert second.body["reasoning_effort"] == "none"
    assert "reasoning" not in second.body


def test_no_key_sends_no_authorization(provider):
    chat(provider, role(), key=None)
    assert "Authorization" not in provider.chats()[0].headers


def test_anthropic_body_adaptive_thinking_with_effort(provider):
    chat(provider, role(reasoning=True, reasoning_effort="low"), protocol="anthropic")
    seen = provider.chats()[0]
    assert seen.path == "messages"
    assert seen.headers["x-api-key"] == KEY
    assert seen.headers["anthropic-version"] == "2023-06-01"
    assert seen.headers["Content-Type"] == "application/json"
    assert "Authorization" not in seen.headers
    assert seen.body == {
        "model": "m",
        "max_tokens": 16384,
        "messages": [{"role": "user", "content": "why?"}],
        "system": "be brief",
        "thinking": {"type": "adaptive"},
        "output_config": {"effort": "low"},
    }


def test_anthropic_body_thinking_budget(provider):
    thinking = role(reasoning=True, thinking_budget=2048, max_tokens=4096)
    chat(provider, thinking, protocol="anthropic")
    assert provider.chats()[0].body["thinking"] == {"type": "enabled", "budget_tokens": 2048}


# -- replies --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "content", "reasoning", "kind"),
    [
        ({"content": "A", "reasoning": "R"}, "A", "R", "raw"),
        ({"content": "A", "reasoning_content": "R"}, "A", "R", "raw"),
        ({"content": "A", "reasoning_details": [{"type": "reasoning.text", "text": "R"}]},
         "A", "R", "raw"),
        ({"content": "A", "reasoning": "S",
          "reasoning_details": [{"type": "reasoning.summary", "summary": "S"},
                                {"type": "reasoning.encrypted", "data": "xyz"}]},
         "A", "S", "summary"),
        ({"content": "A", "reasoning_details": [{"type": "reasoning.encrypted", "data": "xyz"}]},
         "A", None, "redacted"),
        ({"content": "<think>\nR\n</think>\n\nA"}, "A", "R", "raw"),
        ({"content": "<think>R cut short"}, "", "R cut short", "raw"),
        ({"content": "A"}, "A", None, "none"),
    ],
)
def test_openai_reasoning_extraction(provider, message, content, reasoning, kind):
    body = openai_completion(None)
    body["choices"][0]["message"] = {"role": "assistant", **message}
    provider.on(None, Reply(body))
    completion = chat(provider, role())
    assert (completion.content, completion.reasoning, completion.reasoning_kind) == (
        content, reasoning, kind
    )


@pytest.mark.parametrize(
    ("finish", "extra", "expected"),
    [
        ("stop", {}, "stop"),
        ("length", {}, "length"),
        ("content_filter", {}, "content_filter"),
        ("tool_calls", {}, "other"),
        (None, {}, "other"),
        ("stop", {"refusal": "I can't help with that"}, "refusal"),
    ],
)
def test_openai_finish_reasons(provider, finish, extra, expected):
    provider.on(None, Reply(openai_completion("x", finish=finish, usage=(3, 4), **extra)))
    completion = chat(provider, role())
    assert completion.finish_reason == expected
    assert (completion.input_tokens, completion.output_tokens) == (3, 4)


@pytest.mark.parametrize(
    ("blocks", "stop", "content", "kind", "finish"),
    [
        ([{"type": "thinking", "thinking": "T", "signature": "s"}, {"type": "text", "text": "A"},
          {"type": "text", "text": "B"}], "end_turn", "AB", "summary", "stop"),
        # Unsigned: an open-weights model's own thinking, served in this dialect.
        ([{"type": "thinking", "thinking": "T"}, {"type": "text", "text": "A"}],
         "end_turn", "A", "raw", "stop"),
        ([{"type": "text", "text": "<think>T</think>A"}], "end_turn", "A", "raw", "stop"),
        ([{"type": "redacted_thinking", "data": "x"}, {"type": "text", "text": "A"}],
         "stop_sequence", "A", "redacted", "stop"),
        ([{"type": "text", "text": "A"}], "max_tokens", "A", "none", "length"),
        ([{"type": "text", "text": ""}], "refusal", "", "none", "refusal"),
        ([{"type": "text", "text": "A"}], "tool_use", "A", "none", "other"),
    ],
)
def test_anthropic_replies(provider, blocks, stop, content, kind, finish):
    provider.on(None, Reply(anthropic_message(blocks, stop=stop, usage=(5, 6))))
    completion = chat(provider, role(), protocol="anthropic")
    assert (completion.content, completion.reasoning_kind, completion.finish_reason) == (
        content, kind, finish
    )
    assert (completion.input_tokens, completion.output_tokens) == (5, 6)


# -- errors and retries ---------------------------------------------------------------------


def test_401_is_fatal_and_drops_the_provider_text(provider):
    provider.on(None, Reply({"error": {"message": f"bad key {KEY}"}}, status=401))
    with pytest.raises(FatalProviderError) as caught:
        chat(provider, role())
    assert caught.value.message == (
        "providers.main: the key was refused (401): check OVERBRAINER_PROVIDERS__MAIN__API_KEY"
    )
    assert len(provider.chats()) == 1


def test_403_is_fatal_and_drops_the_provider_text(provider):
    provider.on(None, Reply({"error": {"message": f"key {KEY} may not"}}, status=403))
    with pytest.raises(FatalProviderError) as caught:
        chat(provider, role())
    assert caught.value.message == (
        "providers.main: permission denied (403): check that "
        "OVERBRAINER_PROVIDERS__MAIN__API_KEY may use this model"
    )


def test_402_is_fatal(provider):
    provider.on(None, Reply({"error": {"message": "no credit"}}, status=402))
    with pytest.raises(FatalProviderError) as caught:
        chat(provider, role())
    assert caught.value.message == "HTTP 402: no credit"
    assert len(provider.chats()) == 1


@pytest.mark.parametrize("models_found", [False, True])
def test_404_is_fatal_and_names_the_url_asked_masked(provider, models_found):
    """The /v1 hint only where the base path is the likely cause: the models list is not
    found there either; else the server simply has no such endpoint."""
    provider.on(None, Reply({"error": {"message": "no such route"}}, status=404))
    if not models_found:
        provider.on(lambda seen: seen.path.startswith("models"),
                    Reply({"error": {"message": "no"}}, status=404), times=None)

    async def go():
        url = provider.url.replace("http://", "http://user:hunter2@")  # basic auth, no key
        client = Client("main", "openai", url, None, concurrency=1,
                        timeout_secs=5, retry=RetryPolicy(0))
        try:
            return await client.chat(role(), MESSAGES, lambda m, d: None)
        finally:
            await client.close()

    with pytest.raises(FatalProviderError) as caught:
        asyncio.run(go())
    message = caught.value.message
    assert message.startswith("HTTP 404 for http://***@127.0.0.1:")
    assert "hunter2" not in message
    if models_found:
        assert message.endswith(
            "/v1/chat/completions: no such route (providers.main answers at its base_url, but "
            "has no `chat/completions`: the server does not offer that API)"
        )
    else:
        assert message.endswith(
            "/v1/chat/completions: no such route (does base_url end where the API starts, "
            "such as /v1?)"
        )
    assert len(provider.chats()) == 1


@pytest.mark.parametrize(("status", "text"), [
    (404, "The model `m` does not exist or you do not have access to it."),  # OpenAI, vLLM
    (400, "Invalid model name passed in model=m. Call `/v1/models` to view available models"),
    (404, "model 'm' not found"),  # Ollama
])
def test_a_model_the_provider_does_not_have_stops_at_the_first_reply(provider, status, text):
    provider.on(None, Reply({"error": {"message": text}}, status=status), times=None)
    with pytest.raises(FatalProviderError) as caught:
        chat(provider, role())
    assert caught.value.message.startswith(
        f"providers.main has no model `{role().model}` (HTTP {status}: "
    )
    assert caught.value.message.endswith("check the model's name in overbrainer.toml")


def test_other_client_errors_fail_the_item_cut_to_300_characters(provider):
    provider.on(None, Reply({"error": {"message": "x" * 1000}}, status=400))
    with pytest.raises(ProviderError) as caught:
        chat(provider, role())
    assert caught.value.message == ("HTTP 400: " + "x" * 1000)[:300]
    assert len(provider.chats()) == 1


def test_a_status_without_text_names_the_status(provider):
    provider.on(None, Reply("", status=422))
    with pytest.raises(ProviderError, match=r"^HTTP 422: Unprocessable"):
        chat(provider, role())


@pytest.mark.parametrize(
    "fault",
    [
        Reply({"error": {"message": "busy"}}, status=500),
        Reply("timeout", status=408),
        Reply(drop=True),
    ],
    ids=["500", "408", "dropped connection"],
)
def test_transient_failures_are_retried(provider, fault):
    provider.on(None, fault, times=2)
    warnings: list = []
    completion = chat(provider, role(), max_retries=2, warnings=warnings)
    assert completion.content.startswith("The answer to")
    assert len(provider.chats()) == 3
    assert len(warnings) == 2
    assert all(0.0005 <= delay <= 0.06 for _, delay in warnings)


def test_retries_stop_after_one_plus_max_retries_attempts(provider):
    provider.on(None, Reply({"error": {"message": "down"}}, status=503), times=None)
    with pytest.raises(ProviderError) as caught:
        chat(provider, role(), max_retries=3)
    assert caught.value.message == "HTTP 503: down"
    assert len(provider.chats()) == 4


def test_retry_after_is_honoured(provider):
    provider.on(None, Reply({"error": {"message": "later"}}, status=503,
                            headers={"Retry-After": "1"}))
    warnings: list = []
    started = time.monotonic()
    chat(provider, role(), warnings=warnings)
    assert time.monotonic() - started >= 1.0
    assert warnings == [("HTTP 503: later", 1.0)]


def test_malformed_json_fails_the_item_without_retry(provider):
    provider.on(None, Reply("{not json"))
    with pytest.raises(ProviderError, match="not valid JSON"):
        chat(provider, role())
    assert len(provider.chats()) == 1


def test_a_reply_without_choices_fails_the_item(provider):
    provider.on(None, Reply({"choices": []}))
    with pytest.raises(ProviderError, match="not a chat completion"):
        chat(provider, role())


def test_unreachable_provider_is_a_transport_error():
    server = FakeProvider().start()
    server.stop()
    with pytest.raises(ProviderError, match="cannot connect to provider `main`"):
        chat(server, role(), max_retries=1)


def test_a_provider_name_resolves_as_the_system_resolves_it(provider, monkeypatch):
    # A name only this machine's resolver knows (/etc/hosts, nsswitch.conf, a VPN's DNS):
    # it reaches the loopback provider only if the client asks the system, as curl does.
    name = "provider.overbrainer.test"
    real = socket.getaddrinfo

    def system(host, *args, **kwargs):
        return real("127.0.0.1" if host == name else host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", system)

    async def go():
        url = provider.url.replace("127.0.0.1", name)
        client = Client("main", "openai", url + "/", KEY, concurrency=1, timeout_secs=5,
                        retry=RetryPolicy(0))
        try:
            return await client.chat(role(), MESSAGES, lambda m, d: None)
        finally:
            await client.close()

    asyncio.run(go())
    assert provider.chats()[0].headers["Host"].startswith(f"{name}:")


def test_backoff_doubles_up_to_a_minute_with_jitter():
    policy = RetryPolicy(5, unit=1.0)
    for attempt, ceiling in [(1, 2), (2, 4), (5, 32), (6, 60), (10, 60)]:
        delay = policy.delay(attempt, None)
        assert ceiling / 2 <= delay <= ceiling
    assert policy.delay(1, 5000) == 600
    assert policy.attempts == 6


def test_retry_after_reads_seconds_and_dates():
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert parse_retry_after("7", now) == 7
    assert parse_retry_after("Thu, 01 Jan 2026 00:00:30 GMT", now) == 30
    assert parse_retry_after("soon", now) is None
    assert parse_retry_after(None) is None


# -- embeddings -----------------------------------------------------------------------------


def embed(provider: FakeProvider, texts: list[str]):
    async def go():
        client = Client("main", "openai", provider.url, None, concurrency=2, timeout_secs=5,
                        retry=RetryPolicy(0))
        try:
            return await client.embed("emb", texts, lambda m, d: None)
        finally:
            await client.close()

    return asyncio.run(go())


def test_embeddings_come_back_in_input_order_in_chunks_of_256(provider):
    provider.embedding = lambda text: [float(text.removeprefix("t"))]
    texts = [f"t{i}" for i in range(300)]
    vectors, tokens = embed(provider, texts)
    assert vectors == [[float(i)] for i in range(300)]
    assert tokens == 600
    sizes = [len(s.body["input"]) for s in provider.requests if s.path == "embeddings"]
    assert sizes == [256, 44]


def test_embeddings_count_is_checked(provider):
    provider.on(lambda s: s.path == "embeddings",
                Reply({"data": [{"index": 0, "embedding": [1.0]}]}))
    with pytest.raises(ProviderError, match="returned 1 embeddings for 2 inputs"):
        embed(provider, ["a", "b"])


# -- prices ---------------------------------------------------------------------------------


def test_prices_strings_per_token_numbers_only_per_million():
    prices = parse_prices({"data": [
        {"id": "a", "pricing": {"prompt": "0.000001", "completion": "0.000002"}},
        {"id": "b", "pricing": {"prompt": 3, "completion": 15, "unit": "per_million_tokens"}},
        {"id": "c", "pricing": {"prompt": 3, "completion": 15}},
        {"id": "d", "pricing": {"prompt": "-1", "completion": "-1"}},
        {"id": "e"},
    ]})
    assert prices == {"a": Price(1e-6, 2e-6), "b": Price(3e-6, 15e-6)}


@pytest.mark.parametrize("listed", ["1e308", "1_000", "inf", "nan", "0x10", "1e-6 ", "0.02"])
def test_a_listed_price_that_is_not_a_plausible_decimal_is_no_price(listed):
    """``float`` reads ``1_000`` as 1000 dollars a token and ``1e308`` costs $inf: neither,
    nor anything above $0.01 a token, is taken for a price."""
    prices = parse_prices({"data": [
        {"id": "m", "pricing": {"prompt": listed, "completion": "0.000001"}},
    ]})
    if listed == "1e-6 ":
        assert prices == {"m": Price(1e-6, 1e-6)}  # a plain decimal, spaces around
    else:
        assert prices == {}


def test_a_listed_number_past_a_float_s_range_is_no_price():
    """JSON's integers have no bound: 10**400 was an OverflowError traceback."""
    huge = 10**400
    listed = parse_prices({"data": [{"id": "m", "pricing": {
        "prompt": huge, "completion": 1, "unit": "per_million_tokens"}}]})  # fmt: skip
    info = parse_model_info({"data": [{"model_name": "m", "model_info": {
        "input_cost_per_token": huge, "output_cost_per_token": 0}}]})  # fmt: skip
    assert (listed, info) == ({}, {})


def test_prices_are_asked_once_per_provider_per_command(provider):
    book = PriceBook()
    from overbrainer.config.model import Settings

    settings = Settings.model_validate({
        "project": {"name": "p"},
        "providers": {"main": {"protocol": "openai", "base_url": provider.url}},
        "roles": {"generator": {"provider": "main", "model": "gen-model"},
                  "parent": {"provider": "main", "model": "parent-model"}},
    })

    async def stage():
        providers = ProviderSet(settings, {}, book)
        try:
            providers.client("main")
            providers.client("main")
            await providers.settle_prices()
            return providers.price("main", "gen-model"), providers.price("main", "unknown")
        finally:
            await providers.aclose()

    assert asyncio.run(stage()) == (Price(1e-6, 2e-6), None)
    asyncio.run(stage())
    assert [s.path for s in provider.requests] == ["models?detailed=true"]


def test_litellm_prices_come_from_its_model_info(provider):
    provider.prices.clear()  # its models list names no price
    provider.on(
        lambda seen: seen.method == "GET" and seen.path == "model/info",
        Reply({"data": [
            {"model_name": "m", "model_info": {"input_cost_per_token": 2e-6,
                                               "output_cost_per_token": 8e-6}},
            {"model_name": "bad", "model_info": {"input_cost_per_token": "1e308",
                                                 "output_cost_per_token": 1}},
        ]}),
    )

    async def go():
        client = Client("main", "openai", provider.url, None, concurrency=1, timeout_secs=5,
                        retry=RetryPolicy(0))
        try:
            return await client.fetch_prices()
        finally:
            await client.close()

    assert asyncio.run(go()) == {"m": Price(2e-6, 8e-6)}


def test_a_price_lookup_refused_by_a_429_waits_as_asked(provider):
    provider.on(lambda seen: seen.method == "GET" and seen.path.startswith("models"),
                Reply({"error": {"message": "slow down"}}, status=429,
                      headers={"Retry-After": "1"}))

    async def go():
        client = Client("main", "openai", provider.url, None, concurrency=1, timeout_secs=5,
                        retry=RetryPolicy(0))
        try:
            return await client.fetch_prices()
        finally:
            await client.close()

    prices = asyncio.run(go())
    assert prices is not None and prices["parent-model"] == Price(3e-6, 4e-6)
    asked = [s.path for s in provider.requests if s.method == "GET"]
    assert asked == ["models?detailed=true", "models?detailed=true"]
