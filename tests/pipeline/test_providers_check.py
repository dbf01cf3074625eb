"""`overbrainer providers check`: one cheap request per role against the loopback provider."""

from __future__ import annotations

import re

from tests.helpers.fake_provider import Reply, openai_completion


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


def test_a_rate_limit_is_waited_out_as_every_command_does(run_cli, project_dir, provider):
    provider.on(lambda seen: seen.model == "gen-model",
                Reply({"error": {"message": "slow down"}}, status=429,
                      headers={"retry-after": "1"}))
    result = run_cli("providers", "check")
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert len(provider.chats("gen-model")) == 2  # refused once, then answered
    assert "generator  main/gen-model  ok in" in result.stdout


def test_a_rate_limit_past_max_wait_s_fails_the_role(run_cli, project_dir, provider):
    config = (project_dir / "overbrainer.toml").read_text()
    (project_dir / "overbrainer.toml").write_text(
        config.replace("[pipeline]\n", "[pipeline]\nmax_wait_s = 1\n")
    )
    provider.on(lambda seen: seen.model == "gen-model",
                Reply({"error": {"message": "slow down"}}, status=429,
                      headers={"retry-after": "30"}), times=None)
    result = run_cli("providers", "check")
    assert result.exit_code == 1
    assert "failed after" in result.stdout and "still rate-limited" in result.stdout


def test_it_runs_config_check_s_checks_too(run_cli, project_dir, provider):
    config = (project_dir / "overbrainer.toml").read_text()
    (project_dir / "overbrainer.toml").write_text(
        config.replace('protocol = "openai"', 'protocol = "anthropic"').replace(
            'model = "parent-model"', 'model = "claude-sonnet-4-5"'
        )
    )
    check = run_cli("config", "check")
    result = run_cli("providers", "check")
    assert check.exit_code == result.exit_code == 1
    problem = "problem: roles.parent: reasoning = true, but providers.main speaks"
    assert problem in check.stderr and problem in result.stderr
    assert result.stderr.endswith(
        "error: 1 problem(s): the configuration cannot run as it is\n"
    )


def test_a_parent_whose_probe_shows_no_raw_reasoning_is_flagged(run_cli, provider):
    provider.on(lambda seen: seen.model == "parent-model",
                Reply(openai_completion("ok")))  # no reasoning at all
    result = run_cli("providers", "check")
    assert result.exit_code == 1
    assert "parent     main/parent-model  ok in" in result.stdout
    assert (
        "problem: roles.parent: reasoning = true, but the probe's reply from "
        "main/parent-model carried no raw reasoning (reasoning: none): every answer would "
        "be paid for, then excluded (no_raw_reasoning)"
    ) in result.stderr


def test_a_projects_env_file_does_not_send_the_shells_key_to_its_host(
    run_cli, project_dir, provider, monkeypatch
):
    """The key from the shell, the URL from the project's .env: refused before anything is
    sent; on this machine (a local server) or with the URL in the shell too, it goes."""
    monkeypatch.setenv("OVERBRAINER_PROVIDERS__MAIN__API_KEY", "sk-shell-0123456789")
    env = project_dir / ".env"
    env.write_text("OVERBRAINER_PROVIDERS__MAIN__BASE_URL=https://llm.example.invalid/v1\n")
    result = run_cli("providers", "check")
    assert result.exit_code == 1
    assert (
        "providers.main: OVERBRAINER_PROVIDERS__MAIN__API_KEY comes from your shell, and "
        "OVERBRAINER_PROVIDERS__MAIN__BASE_URL from the project's .env: your shell's token is "
        "not sent to a host the project names" in result.stdout
    )
    assert "sk-shell" not in result.stdout + result.stderr
    env.write_text(f"OVERBRAINER_PROVIDERS__MAIN__BASE_URL={provider.url}\n")  # loopback
    assert run_cli("providers", "check").exit_code == 0
