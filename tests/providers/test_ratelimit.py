"""Rate limits: the providers' headers, the shared limiter, and a stage against a loopback
provider that admits so many requests a second and refuses the rest with a 429."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from tests.helpers.fake_provider import FakeProvider, Reply, go_duration

from overbrainer.config.model import Role
from overbrainer.providers import retry
from overbrainer.providers.client import Client
from overbrainer.providers.errors import FatalProviderError
from overbrainer.providers.limiter import Cost, Limiter
from overbrainer.providers.ratelimit import (
    Bucket,
    RateInfo,
    parse_duration,
    parse_instant,
    parse_rate_headers,
)
from overbrainer.providers.retry import RetryPolicy

NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture(autouse=True)
def fast_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(retry, "BACKOFF_UNIT", 0.001)


@pytest.fixture
def warnings_said() -> Iterator[list[str]]:
    """The warnings logged during the test, as their text."""
    from loguru import logger

    said: list[str] = []
    sink = logger.add(said.append, format="{message}", level="WARNING")
    yield said
    logger.remove(sink)


# -- the headers -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1s", 1.0), ("6m0s", 360.0), ("40ms", 0.04), ("1h2m3.5s", 3723.5), ("0.5", 0.5),
     ("250us", 0.00025), ("2m", 120.0)],
)
def test_openai_resets_are_go_durations(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "soon", "5 s", "1x", "s", "-1", "1s garbage"])
def test_an_unreadable_reset_is_no_reset(text):
    assert parse_duration(text) is None


def test_the_fakes_durations_read_back():
    for seconds in (0.017, 0.9, 1.5, 59.25, 360.0):
        assert parse_duration(go_duration(seconds)) == pytest.approx(seconds, abs=0.001)


def test_anthropic_resets_are_rfc3339_instants():
    assert parse_instant("2026-01-01T00:00:02.500Z", NOW) == 2.5
    assert parse_instant("2026-01-01T01:00:00+01:00", NOW) == 0.0
    assert parse_instant("2025-12-31T23:59:00Z", NOW) == 0.0  # past: no wait
    assert parse_instant("tomorrow", NOW) is None


def test_openai_headers():
    info = parse_rate_headers({
        "X-RateLimit-Limit-Requests": "3600",
        "x-ratelimit-remaining-requests": "3000",
        "x-ratelimit-reset-requests": "10s",
        "x-ratelimit-limit-tokens": "150000",
        "x-ratelimit-remaining-tokens": "149000",
        "x-ratelimit-reset-tokens": "400ms",
    }, NOW)
    assert info.buckets == {
        "requests": Bucket(3600, 3000, 10.0),
        "tokens": Bucket(150000, 149000, 0.4),
    }
    assert info.buckets["requests"].refill_per_s == 60.0
    assert info.retry_after is None


def test_anthropic_headers_of_every_bucket():
    headers = {"retry-after": "3"}
    for name in ("requests", "tokens", "input-tokens", "output-tokens"):
        headers |= {
            f"anthropic-ratelimit-{name}-limit": "100",
            f"anthropic-ratelimit-{name}-remaining": "40",
            f"anthropic-ratelimit-{name}-reset": "2026-01-01T00:00:06Z",
        }
    info = parse_rate_headers(headers, NOW)
    assert set(info.buckets) == {"requests", "tokens", "input-tokens", "output-tokens"}
    assert all(bucket.refill_per_s == 10.0 for bucket in info.buckets.values())
    assert info.retry_after == 3.0


def test_retry_after_ms_wins_over_retry_after_and_a_date_is_read():
    assert parse_rate_headers({"retry-after-ms": "250", "retry-after": "1"}).retry_after == 0.25
    date = {"Retry-After": "Thu, 01 Jan 2026 00:00:30 GMT"}
    assert parse_rate_headers(date, NOW).retry_after == 30.0


@pytest.mark.parametrize("told", [
    {"X-RATELIMIT-LIMIT-REQUESTS": "60", "X-RateLimit-Remaining-Requests": "0",
     "x-ratelimit-reset-requests": "1s"},
    {"Anthropic-RateLimit-Requests-Limit": "60", "ANTHROPIC-RATELIMIT-REQUESTS-REMAINING": "0",
     "anthropic-ratelimit-requests-reset": "2026-01-01T00:00:01Z"},
])
def test_the_names_of_either_dialect_are_read_in_any_case(told):
    headers = {"Content-Type": "application/json", "Age": "1", "": "x", **told}
    assert parse_rate_headers(headers, NOW).buckets == {"requests": Bucket(60, 0, 1.0)}


@pytest.mark.parametrize("name", ["Retry-After", "RETRY-AFTER-MS"])
def test_a_wait_is_read_in_any_case(name):
    headers = {"Content-Type": "application/json", "": "x", name: "5"}
    assert parse_rate_headers(headers, NOW).retry_after == (5.0 if "MS" not in name else 0.005)


def test_a_reply_that_tells_of_no_limit_is_no_info():
    headers = {"Content-Type": "application/json", "Authorization-Info": "x", "Age": "1",
               "Ratelimit": "60", "X-Request-Id": "1", "": "x", "retry_after": "3"}
    assert parse_rate_headers(headers, NOW) == RateInfo()


def test_a_garbled_limit_is_ignored_and_named():
    info = parse_rate_headers({
        "x-ratelimit-limit-tokens": "many",
        "x-ratelimit-remaining-tokens": "1",
        "x-ratelimit-reset-tokens": "1s",
        "x-ratelimit-limit-requests": "60",  # no remaining: not a limit told
        "retry-after-ms": "-5",
    })
    assert info.buckets == {}
    assert info.retry_after is None
    assert info.ignored == ("x-ratelimit-limit-tokens = 'many'", "retry-after-ms = '-5'")


def test_a_limit_without_a_reset_is_kept_with_its_refill_unknown():
    info = parse_rate_headers({"x-ratelimit-limit-requests": "3",
                               "x-ratelimit-remaining-requests": "2",
                               "x-ratelimit-limit-tokens": "1000",
                               "x-ratelimit-remaining-tokens": "410"}, NOW)
    assert info.buckets == {"requests": Bucket(3, 2, None), "tokens": Bucket(1000, 410, None)}
    assert info.buckets["requests"].refill_per_s is None
    assert info.ignored == ()


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "-1", "1e12", "1e9", "soon",
                                   "Thu, 01 Jan 2099 00:00:00 GMT", ""])
@pytest.mark.parametrize("name", ["retry-after", "retry-after-ms", "llm_provider-retry-after"])
def test_a_wait_that_is_not_a_finite_plausible_number_is_ignored(name, value):
    info = parse_rate_headers({name: value}, NOW)
    assert info.retry_after is None
    if value:
        assert info.ignored == (f"{name} = {value!r}",)


@pytest.mark.parametrize("reset", ["nan", "inf", "-1s", "1e12", "25h", "99999999h", "x",
                                   "2099-01-01T00:00:00Z", "NaN"])
def test_a_reset_that_is_not_plausible_leaves_a_limit_without_a_reset(reset):
    dialect = "anthropic" if reset.startswith("2099") else "openai"
    names = {"openai": ("x-ratelimit-limit-requests", "x-ratelimit-remaining-requests",
                        "x-ratelimit-reset-requests"),
             "anthropic": ("anthropic-ratelimit-requests-limit",
                           "anthropic-ratelimit-requests-remaining",
                           "anthropic-ratelimit-requests-reset")}[dialect]
    info = parse_rate_headers(dict(zip(names, ["60", "0", reset], strict=True)), NOW)
    assert info.buckets == {"requests": Bucket(60, 0, None)}
    assert info.ignored == (f"{names[2]} = {reset!r}",)


def test_a_vendors_retry_after_is_read_when_no_standard_one_is_sent():
    assert parse_rate_headers({"llm_provider-retry-after": "60"}, NOW).retry_after == 60
    assert parse_rate_headers({"X-Upstream-Retry-After-Ms": "250"}, NOW).retry_after == 0.25
    both = {"retry-after": "2", "llm_provider-retry-after": "60"}
    assert parse_rate_headers(both, NOW).retry_after == 2  # the server's own wins
    two = {"a-retry-after": "3", "b-retry-after": "9"}
    assert parse_rate_headers(two, NOW).retry_after == 9
    assert parse_rate_headers({"x-retry-after-policy": "60"}, NOW) == RateInfo()


def test_a_full_bucket_tells_no_rate():
    assert Bucket(60, 60, 0.0).refill_per_s is None


# -- the limiter -----------------------------------------------------------------------------


def test_a_429_halves_the_window_once_a_round_and_clean_replies_climb_back():
    async def go():
        limiter = Limiter(16)
        numbers = [await limiter.acquire() for _ in range(16)]
        refused = RateInfo({}, 0.0)
        for number in numbers[:4]:  # a burst of refusals of one round: one cut
            limiter.refuse(number, refused)
        assert limiter.window == 8
        assert limiter.refused == 4
        for number in numbers[4:]:
            limiter.release(number, RateInfo())
        assert 8 < limiter.window < 10  # additive: about one per window of clean replies
        later = await limiter.acquire()  # sent after the cut: its refusal cuts again
        limiter.refuse(later, refused)
        assert limiter.window < 5
        return limiter

    limiter = asyncio.run(go())
    assert limiter.in_flight == 0


def test_the_window_holds_requests_back_first_come_first_served():
    async def go():
        limiter = Limiter(2)
        first, second = await limiter.acquire(), await limiter.acquire()
        order: list[int] = []

        async def waiting(tag: int) -> None:
            number = await limiter.acquire()
            order.append(tag)
            limiter.release(number, None)

        tasks = [asyncio.create_task(waiting(tag)) for tag in range(5)]
        await asyncio.sleep(0.01)
        assert order == []  # both slots are taken
        limiter.release(first, None)
        limiter.release(second, None)
        await asyncio.gather(*tasks)
        return order

    assert asyncio.run(go()) == [0, 1, 2, 3, 4]


def test_a_pause_holds_every_request_and_a_cancelled_waiter_gives_its_place():
    async def go():
        limiter = Limiter(8)
        number = await limiter.acquire()
        assert limiter.refuse(number, RateInfo({}, 0.2)).seconds == 0.2
        cancelled = asyncio.create_task(limiter.acquire())
        await asyncio.sleep(0.01)
        cancelled.cancel()
        started = time.monotonic()
        again = await limiter.acquire()
        waited = time.monotonic() - started
        limiter.release(again, None)
        return waited, limiter

    waited, limiter = asyncio.run(go())
    assert waited >= 0.15
    assert limiter.in_flight == 0


def test_requests_are_spaced_at_the_refill_rate_when_the_limit_is_near():
    async def go():
        limiter = Limiter(4)
        near = RateInfo({"requests": Bucket(20, 2, 0.9)})  # 20 a second, 2 left
        number = await limiter.acquire()
        limiter.release(number, near)
        started = time.monotonic()
        for _ in range(6):
            limiter.release(await limiter.acquire(), None)
        return time.monotonic() - started, limiter

    elapsed, limiter = asyncio.run(go())
    assert limiter.interval == pytest.approx(1 / (20 * 0.95))
    assert elapsed >= 5 * limiter.interval
    assert limiter.pace() is not None


def test_a_token_limit_spaces_requests_by_what_one_costs():
    async def go():
        limiter = Limiter(4)
        near = RateInfo({"tokens": Bucket(1000, 50, 0.95)})  # 1000 tokens a second
        number = await limiter.acquire(Cost(60, 40))  # a prompt of 60, max_tokens 40
        limiter.release(number, near)
        return limiter

    limiter = asyncio.run(go())
    assert limiter.interval == pytest.approx(100 / (1000 * 0.95))


def test_plenty_left_sends_freely():
    async def go():
        limiter = Limiter(4)
        number = await limiter.acquire()
        limiter.release(number, RateInfo({"requests": Bucket(1000, 990, 0.5)}))
        return limiter

    limiter = asyncio.run(go())
    assert limiter.interval == 0
    assert limiter.pace() is None


# -- the client ------------------------------------------------------------------------------


def chat(provider: FakeProvider, *, max_retries: int = 0, max_wait_s: float = 600,
         limited: list | None = None):
    async def go():
        client = Client("main", "openai", provider.url, "sk-x", concurrency=4, timeout_secs=5,
                        retry=RetryPolicy(max_retries), max_wait_s=max_wait_s)
        seen = limited if limited is not None else []
        try:
            return await client.chat(
                Role(provider="main", model=f"m-{provider.port}"),
                [{"role": "user", "content": "why?"}],
                lambda message, delay: pytest.fail(f"retried: {message}"),
                lambda refusal: seen.append((refusal.message, refusal.pause.seconds)),
            )
        finally:
            await client.close()

    return asyncio.run(go())


def test_a_429_is_waited_out_without_using_a_retry(provider):
    provider.on(None, Reply({"error": {"message": "slow down"}}, status=429,
                            headers={"retry-after-ms": "150"}), times=3)
    limited: list = []
    started = time.monotonic()
    completion = chat(provider, max_retries=0, limited=limited)
    assert completion.content.startswith("The answer to")
    assert limited == [("HTTP 429: slow down", 0.15)] * 3
    assert time.monotonic() - started >= 0.45
    assert len(provider.chats()) == 4


def test_a_429_that_never_ends_stops_the_stage_after_max_wait_s(provider):
    provider.on(None, Reply({"error": {"message": "slow down"}}, status=429,
                            headers={"retry-after-ms": "100"}), times=None)
    with pytest.raises(FatalProviderError) as caught:
        chat(provider, max_wait_s=0.35)
    message = caught.value.message
    assert message.startswith("providers.main: HTTP 429: slow down: still rate-limited after ")
    assert message.endswith(" s of waiting, and the provider asks for 0.1 s more, past "
                            "pipeline.max_wait_s = 0.35; run again later")
    assert 3 <= len(provider.chats()) <= 5


def test_an_account_out_of_credit_is_fatal_not_waited_out(provider):
    provider.on(None, Reply({"error": {"message": "You exceeded your current quota",
                                       "type": "insufficient_quota",
                                       "code": "insufficient_quota"}}, status=429), times=None)
    with pytest.raises(FatalProviderError) as caught:
        chat(provider)
    assert caught.value.message == (
        "providers.main: HTTP 429: You exceeded your current quota (the account is out of "
        "credit: no wait helps)"
    )
    assert len(provider.chats()) == 1


def test_a_retry_after_of_zero_is_a_backoff(provider):
    provider.on(None, Reply({"error": {"message": "now"}}, status=429,
                            headers={"retry-after-ms": "0"}), times=2)
    limited: list = []
    chat(provider, limited=limited)
    assert [pause > 0 for _, pause in limited] == [True, True]
    assert limited[1][1] > limited[0][1]


def test_a_wait_asked_past_max_wait_s_stops_at_once_and_is_never_cut_short(provider):
    provider.on(None, Reply({"error": {"message": "slow down"}}, status=429,
                            headers={"retry-after": "3600"}), times=None)
    started = time.monotonic()
    with pytest.raises(FatalProviderError) as caught:
        chat(provider, max_wait_s=600)
    assert time.monotonic() - started < 5
    assert len(provider.chats()) == 1  # not sent again after 600 s: the provider said 3600
    assert caught.value.message == (
        "providers.main: HTTP 429: slow down: still rate-limited after 0.0 s of waiting, and "
        "the provider asks for 3600 s more, past pipeline.max_wait_s = 600; run again later"
    )


def test_a_waiter_cancelled_as_its_slot_is_granted_gives_it_back():
    from overbrainer.providers.client import Halt

    async def go():
        limiter = Limiter(1)
        held = await limiter.acquire()
        halt = Halt()
        waiting = asyncio.create_task(halt.slot(limiter, Cost()))
        await asyncio.sleep(0.01)
        limiter.release(held, None)  # granted to the waiter in this turn...
        waiting.cancel()  # ...which is cancelled before it runs
        with pytest.raises(asyncio.CancelledError):
            await waiting
        await asyncio.sleep(0)
        return limiter

    assert asyncio.run(go()).in_flight == 0


def test_a_fatal_error_wakes_the_requests_waiting_for_a_slot():
    from overbrainer.providers.client import Halt

    async def go():
        limiter = Limiter(1)
        await limiter.acquire()
        halt = Halt()
        waiting = asyncio.create_task(halt.slot(limiter, Cost()))
        await asyncio.sleep(0.01)
        halt.stop(FatalProviderError("providers.main: the key was refused (401)"))
        with pytest.raises(FatalProviderError):
            await waiting
        return limiter

    assert asyncio.run(go()).in_flight == 1  # only the slot still held


def test_a_429_without_a_wait_backs_off_and_goes_on(provider):
    provider.on(None, Reply({"error": {"message": "busy"}}, status=429), times=2)
    limited: list = []
    chat(provider, limited=limited)
    assert [message for message, _ in limited] == ["HTTP 429: busy"] * 2
    assert limited[1][1] > limited[0][1]  # doubled


# -- limits without a reset, costs, our own backoff, the pace shown ------------------------


def test_a_limit_without_a_reset_holds_back_as_remaining_nears_zero():
    async def go():
        limiter = Limiter(16)
        first = await limiter.acquire()
        limiter.release(first, RateInfo({"requests": Bucket(10, 3, None)}))
        sent = []
        while (number := limiter.try_acquire()) is not None:
            sent.append(number)
        return len(sent), limiter

    sent, limiter = asyncio.run(go())
    assert sent == 3  # what the reply said was left, and no more before the next word
    assert limiter.pace() is not None


def test_a_limit_without_a_reset_learns_its_refill_from_what_is_admitted():
    async def go():
        limiter = Limiter(4)
        remaining = 5.0
        for _ in range(12):  # 12 admitted over ~1.2 s while what is left falls by 5:
            number = await limiter.acquire()  # it refills about 7 a second
            await asyncio.sleep(0.1)
            remaining = max(remaining - 0.5, 0.0)
            limiter.release(number, RateInfo({"requests": Bucket(60, remaining, None)}))
        return limiter

    limiter = asyncio.run(go())
    refill = limiter._refill["requests"]
    assert 4 < refill < 10
    assert str(limiter.pace()) == "60/min"  # 60 at ~7 a second fills in ~9 s: nearest, a minute


def test_a_limit_without_a_reset_refilled_only_in_time_is_waited_for_not_probed():
    async def go():
        limiter = Limiter(4)
        limiter._refill["requests"] = 10.0  # learnt: 10 a second
        number = await limiter.acquire()
        limiter.release(number, RateInfo({"requests": Bucket(60, 0, None)}))
        started = time.monotonic()
        number = await limiter.acquire()
        limiter.release(number, None)
        return time.monotonic() - started

    assert 0.07 <= asyncio.run(go()) < 0.5


def test_token_limits_are_charged_at_the_prompt_plus_max_tokens():
    from overbrainer.providers.client import request_cost

    openai = request_cost({"model": "m", "max_tokens": 500, "messages": [
        {"role": "system", "content": "s" * 40}, {"role": "user", "content": "u" * 400}]})
    assert openai == Cost(110, 500)
    anthropic = request_cost({"model": "m", "max_tokens": 64, "system": "x" * 8, "messages": [
        {"role": "user", "content": [{"type": "text", "text": "y" * 12}]}]})
    assert anthropic == Cost(5, 64)
    assert (anthropic.of("tokens"), anthropic.of("input-tokens"), anthropic.of("output-tokens"),
            anthropic.of("requests")) == (69, 5, 64, 1)

    async def go(name):
        limiter = Limiter(4)
        number = await limiter.acquire(Cost(100, 900))
        limiter.release(number, RateInfo({name: Bucket(10_000, 500, 1.0)}))  # 9500 a second
        return limiter.interval

    assert asyncio.run(go("tokens")) == pytest.approx(1000 / (9500 * 0.95))
    assert asyncio.run(go("input-tokens")) == pytest.approx(100 / (9500 * 0.95))
    assert asyncio.run(go("output-tokens")) == pytest.approx(900 / (9500 * 0.95))


def test_a_limit_told_below_max_tokens_is_one_no_wait_passes():
    limiter = Limiter(4)
    info = RateInfo({"tokens": Bucket(1000, 0, None)})
    assert limiter.too_large(info, Cost(10, 4096)) == ("tokens", Bucket(1000, 0, None))
    assert limiter.too_large(info, Cost(10, 500)) is None


def test_our_backoff_grows_across_rounds_and_successes():
    async def go():
        limiter = Limiter(64)  # each round halves the window: room for 3 still
        pauses = []
        for _ in range(4):
            refused = [await limiter.acquire() for _ in range(3)]
            round_pauses = {limiter.refuse(number, RateInfo()).seconds for number in refused}
            assert len(round_pauses) == 1  # a round of refusals shares one backoff
            pauses.append(round_pauses.pop())
            limiter.paused_until = 0.0
            limiter.release(await limiter.acquire(), RateInfo())  # a success between
        return pauses, limiter

    pauses, limiter = asyncio.run(go())
    assert pauses == sorted(pauses) and len(set(pauses)) == 4
    assert pauses[1] == 2 * pauses[0]
    limiter._refused_at -= 61  # a calm minute: it starts over

    async def again():
        return limiter.refuse(await limiter.acquire(), RateInfo()).seconds

    assert asyncio.run(again()) == pauses[0]


def test_a_pause_says_whether_the_provider_asked_for_it():
    async def go(info):
        limiter = Limiter(4)
        return limiter.refuse(await limiter.acquire(), info)

    assert asyncio.run(go(RateInfo({}, 2.0))).asked
    assert asyncio.run(go(RateInfo({"requests": Bucket(60, 0, 1.0)}))).asked
    assert not asyncio.run(go(RateInfo())).asked
    assert not asyncio.run(go(RateInfo({"requests": Bucket(60, 0, None)}))).asked


def test_pacing_from_headers_is_bounded_by_max_wait_s():
    async def go():
        limiter = Limiter(4, max_wait_s=2.0)
        number = await limiter.acquire()
        # 60 a day, none left: one request every 24 minutes, by the headers.
        limiter.release(number, RateInfo({"requests": Bucket(60, 0, 86_000.0)}))
        return limiter

    limiter = asyncio.run(go())
    assert limiter.interval == 2.0


@pytest.mark.parametrize(("bucket", "name", "shown"), [
    (Bucket(4, 0, 15.0), "requests", "4/min"),  # 4 refill in 15 s: a minute's limit
    (Bucket(60, 3, 0.95), "requests", "60/s"),
    (Bucket(30000, 0, 60.0), "tokens", "30000 tokens/min"),
    (Bucket(1000, 40, 2100.0), "output-tokens", "1000 output tokens/h"),
    (Bucket(60, 0, 86_000.0), "requests", "60/day"),
])
def test_the_pace_shown_is_the_providers_limit_in_its_unit(bucket, name, shown):
    async def go():
        limiter = Limiter(4)
        number = await limiter.acquire(Cost(10, 10))
        limiter.release(number, RateInfo({name: bucket}))
        limiter.release(await limiter.acquire(Cost(10, 10)), None)  # spaced: the pace is set
        return limiter.pace()

    assert str(asyncio.run(go())) == shown


def test_a_reply_with_an_absurd_reset_does_not_hold_the_next_request_back(provider):
    provider.on(None, lambda seen: Reply(headers={
        "x-ratelimit-limit-requests": "60", "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "1e12"}), times=None)

    async def go():
        client = Client("main", "openai", provider.url, "sk-x", concurrency=4, timeout_secs=5,
                        retry=RetryPolicy(0))
        role = Role(provider="main", model="m")
        try:
            for _ in range(3):
                await asyncio.wait_for(client.chat(role, [{"role": "user", "content": "q"}],
                                                   lambda m, d: None), 10)
        finally:
            await client.close()

    asyncio.run(go())
    assert len(provider.chats()) == 3


@pytest.mark.parametrize("value", ["nan", "inf", "-3", "1e12", "garbage"])
def test_an_implausible_retry_after_is_ignored_with_one_warning(provider, value, warnings_said):
    provider.on(None, Reply({"error": {"message": "busy"}}, status=429,
                            headers={"retry-after": value}), times=3)
    limited: list = []
    chat(provider, limited=limited)
    assert [0 < pause < 1 for _, pause in limited] == [True] * 3  # our backoff, not NaN or 600
    assert [m.strip() for m in warnings_said] == [
        f"providers.main: the header retry-after = {value!r} is not a finite, plausible "
        "number: ignored (said once)"
    ]
