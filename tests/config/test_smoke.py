def test_config_check_prints_the_project_name(run_cli):
    result = run_cli("config", "check")
    assert result.exit_code == 0, result.stderr
    assert "project.name = Demo Project" in result.stdout.splitlines()
