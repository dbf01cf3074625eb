"""overbrainer.toml as `config check` reports it: every problem at once, values never echoed."""

from __future__ import annotations

import json

from tests.helpers.config_check import problems
from tests.helpers.project import LOCAL_PROVIDER


def test_a_missing_file_says_how_to_create_one(run_cli, project_dir):
    (project_dir / "overbrainer.toml").unlink()
    result = run_cli("config", "check")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == (
        f"error: no overbrainer.toml in {project_dir}: create one with `overbrainer init`\n"
    )


def test_a_syntax_error_names_only_line_and_column(run_cli, write_config):
    write_config('[extra]\nkey = "sk-live-0123456789abcdefghij\n')
    result = run_cli("config", "check")
    assert result.exit_code == 1
    assert result.stdout == ""
    # The minimal configuration has 19 lines: the string left open is on line 21.
    assert result.stderr == "error: TOML syntax error in overbrainer.toml at line 21, column 36\n"


def test_a_duplicate_key_is_a_syntax_error_too(run_cli, project_dir):
    (project_dir / "overbrainer.toml").write_text('[project]\nname = "a"\nname = "b"\n')
    result = run_cli("config", "check")
    assert result.exit_code == 1
    assert result.stderr == "error: TOML syntax error in overbrainer.toml at line 3, column 11\n"


def test_a_file_that_is_not_utf8_is_refused_without_content(run_cli, project_dir):
    (project_dir / "overbrainer.toml").write_bytes(b'[project]\nname = "\xff\xfe"\n')
    result = run_cli("config", "check")
    assert result.exit_code == 1
    assert result.stderr == "error: overbrainer.toml is not UTF-8 text\n"


def test_unknown_keys_are_listed_at_every_level(run_cli, write_config, minimal_config):
    write_config(
        """
        mood = "calm"

        [pipeline]
        speed = 3

        [providers.other]
        protocol = "openai"
        region = "eu"
        """,
        base='colour = "blue"\n' + minimal_config,
    )
    result = run_cli("config", "check")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert sorted(problems(result)) == [
        "colour: unknown field",
        "pipeline.speed: unknown field",
        "providers.other.region: unknown field",
        "roles.parent.mood: unknown field",
    ]


def test_out_of_range_values_are_all_listed_at_once_without_their_values(run_cli, write_config):
    write_config(
        """
        [pipeline]
        concurrency = 987654
        max_retries = -3
        dedup_threshold = 0
        eval_ratio = 1.5
        embedding_threshold = nan
        seed = -1

        [roles.judge]
        provider = "main"
        model = "judge-model"
        temperature = 2.5
        max_tokens = 0
        """
    )
    result = run_cli("config", "check")
    assert result.exit_code == 1
    assert problems(result) == [
        "roles.judge.max_tokens: must be at least 1",
        "roles.judge.temperature: must be at most 2.0",
        "pipeline.concurrency: must be at most 1024",
        "pipeline.max_retries: must be at least 0",
        "pipeline.dedup_threshold: must be greater than 0.0",
        "pipeline.embedding_threshold: must be a finite number",
        "pipeline.eval_ratio: must be less than 1.0",
        "pipeline.seed: must be at least 0",
    ]
    assert "987654" not in result.stderr


def test_a_type_error_names_the_key_and_the_type_never_the_value(run_cli, write_config):
    write_config(
        """
        [pipeline]
        concurrency = "sk-not-a-number-0123456789"
        include_system_prompt = "perhaps"
        """
    )
    result = run_cli("config", "check")
    assert problems(result) == [
        "pipeline.concurrency: expected an integer",
        "pipeline.include_system_prompt: expected true or false",
    ]
    assert "sk-not" not in result.stderr
    assert "perhaps" not in result.stderr


def test_required_tables_and_keys_are_named(run_cli, project_dir):
    (project_dir / "overbrainer.toml").write_text('[project]\n\n[[topics]]\nname = "t"\n')
    result = run_cli("config", "check")
    assert problems(result) == [
        "project.name: required",
        "topics[0].subtopics: required",
        "topics[0].questions_per_subtopic: required",
        "roles: required",
    ]


def test_env_only_keys_set_in_the_file_are_refused_without_their_values(
    run_cli, write_config, minimal_config
):
    write_config(
        """
        [runpod]
        api_key = "rpa_abcdefghijklmnopqrstuvwxyz"

        [targets.box]
        kind = "ssh"
        host = "me@gpu.example.invalid"
        """,
        base='hf_token = "hf_abcdefghijklmnopqrstuvwxyz"\n'
        + minimal_config.replace(
            'protocol = "openai"\n',
            'protocol = "openai"\nbase_url = "https://user:pass@example.invalid/v1"\n'
            'api_key = "sk-abcdefghijklmnopqrstuvwxyz"\n',
        ),
    )
    result = run_cli("config", "check")
    assert result.exit_code == 1
    assert sorted(problems(result)) == [
        "hf_token: must be set through env, not in overbrainer.toml",
        "providers.main.api_key: must be set through env, not in overbrainer.toml",
        "providers.main.base_url: must be set through env, not in overbrainer.toml",
        "runpod.api_key: must be set through env, not in overbrainer.toml",
        "targets.box.host: must be set through env, not in overbrainer.toml",
    ]
    for secret in ("hf_abc", "sk-abc", "rpa_abc", "pass@", "gpu.example"):
        assert secret not in result.stderr


def test_log_is_env_only(run_cli, write_config, minimal_config):
    write_config(base='log = "debug"\n' + minimal_config)
    result = run_cli("config", "check")
    assert problems(result) == ["log: must be set through env, not in overbrainer.toml"]


def test_cross_table_rules_are_reported_with_the_rest(run_cli, write_config):
    write_config(
        """
        [[topics]]
        name = "ownership"
        subtopics = 1
        questions_per_subtopic = 1

        [roles.judge]
        provider = "nowhere"
        model = "j"

        [training]
        target = "gpu"
        base_model = "Qwen/Qwen3-0.6B"
        adapter = "full"
        merge = true
        """
    )
    result = run_cli("config", "check")
    assert sorted(problems(result)) == [
        "roles.judge: unknown provider `nowhere`",
        "topics: duplicate name `ownership`",
        "training.target: unknown target `gpu`",
        "training: merge applies only to a lora or qlora adapter",
    ]


def test_role_rules(run_cli, write_config):
    write_config(
        """
        [providers.claude]
        protocol = "anthropic"

        [roles.judge]
        provider = "claude"
        model = "c"
        reasoning = true
        temperature = 0.5
        thinking_budget = 20000
        max_tokens = 16000

        [roles.embedder]
        provider = "claude"
        model = "e"
        reasoning_effort = "high"
        """
    )
    result = run_cli("config", "check")
    assert sorted(problems(result)) == [
        "roles.embedder: reasoning_effort needs reasoning = true",
        "roles.embedder: the embedder must use the openai protocol",
        "roles.judge.temperature: cannot be set with reasoning on the anthropic protocol",
        "roles.judge: thinking_budget must be less than max_tokens",
    ]


def test_targets_are_validated_by_their_plugins_model(run_cli, write_config):
    write_config(
        """
        [targets.pod]
        kind = "runpod"
        gpu_types = ["NVIDIA A40"]
        max_hours = 1000
        min_vram_gb = 24
        venv = "relative/venv"

        [targets.box]
        kind = "ssh"
        workdir = "-rf"

        [targets.Big-Box]
        kind = "local"

        [targets.here]
        kind = "local"
        runtime = "docker"
        venv = "/opt/axolotl"
        """
    )
    result = run_cli("config", "check")
    assert sorted(problems(result)) == [
        "targets.box.workdir: must not start with -",
        'targets.here: venv applies only to runtime = "native"',
        "targets.pod.max_hours: must be at most 720.0",
        "targets: invalid name `Big-Box`: use a-z, 0-9 and _ only",
    ]


def test_unknown_target_kinds_name_the_package_to_install(run_cli, write_config):
    write_config(
        """
        [targets.cluster]
        kind = "slurm"

        [targets.box]
        kind = "ssh"

        [targets.odd]
        kind = 42
        """
    )
    result = run_cli("config", "check", env={"OVERBRAINER_LOAD_PLUGINS": "local"})
    assert sorted(problems(result)) == [
        "targets.box: no installed plugin provides target kind `ssh`: install overbrainer-ssh "
        "(pip install 'overbrainer[ssh]')",
        "targets.cluster: no installed plugin provides target kind `slurm`: install the package "
        "that does (`overbrainer plugins` lists what is installed)",
        "targets.odd: kind: expected the name of a target kind",
    ]


def test_a_valid_configuration_is_printed_line_by_line(run_cli, write_config):
    write_config(
        """
        [training]
        target = "gpu"
        base_model = "Qwen/Qwen3-0.6B"
        adapter = "lora"
        axolotl_extra = { flash_attention = true }

        [targets.gpu]
        kind = "runpod"
        gpu_types = ["NVIDIA A40", "NVIDIA L40S"]
        max_hours = 4
        """
    )
    result = run_cli("config", "check", env=LOCAL_PROVIDER)
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    for expected in (
        "project.name = Demo Project",
        "topics.ownership = 2 subtopics x 3 questions",
        "providers.main.protocol = openai",
        "providers.main.base_url = http://127.0.0.1:9/v1",
        "providers.main.api_key = (unset)",
        "providers.main.batch_discount = 0.5",
        "roles.generator = main/gen-model (reasoning: false, max_tokens: 16384)",
        "roles.parent = main/parent-model (reasoning: true, max_tokens: 16384)",
        "pipeline.concurrency = 8",
        "pipeline.eval_ratio = 0.1",
        "split.decontaminate = (none)",
        "split.decontaminate_n = 13",
        "training = Qwen/Qwen3-0.6B on gpu (lora)",
        "training.epochs = 3",
        "training.axolotl_extra.flash_attention = (set)",
        "targets.gpu.kind = runpod",
        "targets.gpu.gpu_types = NVIDIA A40, NVIDIA L40S",
        "targets.gpu.max_hours = 4.0",
        "runpod.api_key = (unset)",
        "metrics.listen = (unset)",
        "metrics.allow_remote = false",
        "hf_token = (unset)",
        "log = (unset)",
    ):
        assert expected in lines


def test_values_of_another_type_are_refused_not_converted(run_cli, write_config, minimal_config):
    write_config(
        """
        [pipeline]
        concurrency = true
        max_retries = false
        request_timeout_secs = 1e3
        seed = "42"
        dedup_threshold = "0.5"
        include_system_prompt = 1

        [targets.pod]
        kind = "runpod"
        gpu_types = ["NVIDIA A40"]
        max_hours = "4"
        gpu_count = 1.0
        """,
        base=minimal_config.replace("reasoning = true", 'reasoning = "yes"').replace(
            "subtopics = 2", "subtopics = 2.0"
        ),
    )
    result = run_cli("config", "check")
    assert result.exit_code == 1
    assert sorted(problems(result)) == [
        "pipeline.concurrency: expected an integer",
        "pipeline.dedup_threshold: expected a number",
        "pipeline.include_system_prompt: expected true or false",
        "pipeline.max_retries: expected an integer",
        "pipeline.request_timeout_secs: expected an integer",
        "pipeline.seed: expected an integer",
        "roles.parent.reasoning: expected true or false",
        "targets.pod.gpu_count: expected an integer",
        "targets.pod.max_hours: expected a number",
        "topics[0].subtopics: expected an integer",
    ]


def test_an_integer_is_a_number(run_cli, write_config):
    write_config("\n[pipeline]\ndedup_threshold = 1\n\n[training]\ntarget = \"gpu\"\n"
                 'base_model = "m"\nadapter = "lora"\nlearning_rate = 1\n\n'
                 '[targets.gpu]\nkind = "runpod"\ngpu_types = ["A"]\nmax_hours = 4\n')
    result = run_cli("config", "check", env=LOCAL_PROVIDER)
    assert result.exit_code == 0, result.stderr
    assert "pipeline.dedup_threshold = 1.0" in result.stdout.splitlines()


def test_counts_are_bounded_so_that_plan_can_count_them(run_cli, write_config):
    """``subtopics = 99999999999999999999`` was an OverflowError traceback in `plan` (the
    command the docs call safe to run first), 1000000000 a MemoryError."""
    for count in ("99999999999999999999", "1000000000"):
        write_config(
            f"""
            [[topics]]
            name = "huge"
            subtopics = {count}
            questions_per_subtopic = {count}
            """
        )
        for command in (("config", "check"), ("plan",)):
            result = run_cli(*command)
            assert result.exit_code == 1, command
            assert "Traceback" not in result.stderr
            assert "topics[1].subtopics: must be at most 100000" in result.stderr, result.stderr
            assert "topics[1].questions_per_subtopic: must be at most 1000000" in result.stderr


def test_eval_files_are_checked_and_printed(run_cli, write_config):
    write_config('[eval]\nfiles = ["evals/*.jsonl", "more/held-out.jsonl"]\n')
    result = run_cli("config", "check", env=LOCAL_PROVIDER)
    assert result.exit_code == 0, result.stderr
    assert "eval.files = evals/*.jsonl, more/held-out.jsonl" in result.stdout.splitlines()
    write_config('[eval]\nfiles = ["../outside/*.jsonl"]\nquestions = 3\n')
    result = run_cli("config", "check", env=LOCAL_PROVIDER)
    assert result.exit_code != 0
    assert "eval.files" in result.stderr
    assert "must be a glob relative to the project, without .." in result.stderr
    assert "eval.questions" in result.stderr
    write_config()
    env = {**LOCAL_PROVIDER, "OVERBRAINER_EVAL__FILES": "evals/a.jsonl,evals/b.jsonl"}
    result = run_cli("config", "check", env=env)
    assert result.exit_code == 0, result.stderr
    assert "eval.files = evals/a.jsonl, evals/b.jsonl" in result.stdout.splitlines()
    result = run_cli("config", "check", env=LOCAL_PROVIDER)
    assert "eval.files" not in result.stdout  # unset: compare asks the eval split alone


def test_eval_files_compare_would_refuse_are_a_problem(run_cli, write_config, project_dir):
    """Two files of one set name, or one named `split`: config check says so, in compare's
    words, not only compare."""
    write_config('[eval]\nfiles = ["evals/*.jsonl", "more/*.jsonl"]\n')
    for folder in ("evals", "more"):
        (project_dir / folder).mkdir()
        (project_dir / folder / "rust.jsonl").write_text('{"question": "Why?"}\n')
    clash = ("[eval] files: evals/rust.jsonl and more/rust.jsonl are both the set `rust` "
             "(a set is named by its file's name): rename one")
    result = run_cli("config", "check", env=LOCAL_PROVIDER)
    assert result.exit_code == 1
    assert f"problem: {clash}" in result.stderr.splitlines()
    result = run_cli("config", "check", "--json", env=LOCAL_PROVIDER)
    assert result.exit_code == 1
    assert clash in json.loads(result.stdout)["problems"]
    (project_dir / "more" / "rust.jsonl").rename(project_dir / "more" / "split.jsonl")
    result = run_cli("config", "check", env=LOCAL_PROVIDER)
    assert result.exit_code == 1
    assert ("problem: [eval] files: more/split.jsonl: a set cannot be named `split`, the eval "
            "split's name (`compare --eval split`): rename the file") in result.stderr
    (project_dir / "more" / "split.jsonl").rename(project_dir / "more" / "go.jsonl")
    result = run_cli("config", "check", env=LOCAL_PROVIDER)
    assert result.exit_code == 0, result.stderr
