"""`overbrainer providers check`: one cheap request per role against the loopback provider."""

from __future__ import annotations

import re

from fake_provider import Reply


def test_each_role_is_tried_once_with_few_tokens(run_cli, provider):
    result = run_cli("providers", "check")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert re.fullmatch(
        r"generator  main/gen-model  ok in [\d.]+ s; \$1\.00 in, \$2\.00 out per million "
        r"tokens; reasoning: raw", lines[0]
    ), lines[0]
    assert re.fullmatch(
        r"parent     main/parent-model  ok in [\d.]+ s; \$3\.00 in, \$4\.00 out per million "
        r"tokens; reasoning: raw", lines[1]
    ), lines[1]
    assert lines[2] == "providers check: tokens 20 in, 40 out; $0.000160"
    chats = provider.chats()
    assert [c.model for c in chats] == ["gen-model", "parent-model"]
    assert all(c.body["max_tokens"] == 512 for c in chats)


def test_a_refused_key_fails_its_role_only_and_says_what_to_check(run_cli, provider):
    provider.on(lambda seen: seen.model == "parent-model",
                Reply({"error": {"message": "bad key"}}, status=401))
    result = run_cli("providers", "check")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert " ok in " in lines[0]
    assert re.fullmatch(
        r"parent     main/parent-model  failed after [\d.]+ s: providers\.main: the key was "
        r"refused \(401\): check OVERBRAINER_PROVIDERS__MAIN__API_KEY", lines[1]
    ), lines[1]
    assert result.stderr.endswith(
        "error: no reply for parent: fix the provider, then check again\n"
    )


def test_a_model_without_a_price_says_how_to_give_one(run_cli, provider):
    provider.prices.clear()
    result = run_cli("providers", "check")
    assert result.exit_code == 0, result.stderr
    assert ("no price (the provider lists none: set [providers.main.prices])"
            in result.stdout.splitlines()[0])
    assert result.stdout.splitlines()[-1].endswith("+ unknown")


def test_a_wrong_path_names_the_url_asked(run_cli, project_dir, provider):
    env = project_dir / ".env"
    env.write_text(env.read_text().replace("/v1\n", "/\n"))
    provider.on(lambda seen: True, Reply({"error": {"message": "not found"}}, status=404),
                times=None)
    result = run_cli("providers", "check")
    assert result.exit_code == 1
    assert f"HTTP 404 for http://127.0.0.1:{provider.port}/chat/completions" in result.stdout


def test_a_rate_limit_is_said_not_waited_out(run_cli, provider):
    provider.on(lambda seen: seen.model == "gen-model",
                Reply({"error": {"message": "slow down"}}, status=429,
                      headers={"retry-after": "30"}))
    result = run_cli("providers", "check")
    assert result.exit_code == 1
    assert ("failed after" in result.stdout
            and "HTTP 429: slow down (rate-limited: the provider asks for 30.0 s)" in result.stdout)
