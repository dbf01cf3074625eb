"""``overbrainer init``: a new project, ready to edit."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from overbrainer.cli.context import current_app

if TYPE_CHECKING:
    from tomlkit.items import Table

PROMPTS = (
    "subtopics.txt", "questions.txt", "answer_system.txt", "judge.txt", "judge_reference.txt",
)
GITIGNORE = (".env", "/runs/", "/.overbrainer/")
"""What a new project keeps out of git: its secrets, its runs (models: gigabytes) and this
machine's state. ``data/`` stays in: the questions and answers are what the parent was paid
for, worth a commit (``git lfs track 'data/*.jsonl'`` when they grow large)."""
GITIGNORE_NOTE = (
    "# overbrainer: secrets, runs (models) and local state stay out; data/ (the answers you"
    " paid for) is meant to be committed"
)
DEFAULT_TOPIC = ("rust-ownership", "ownership, borrowing and lifetimes in Rust")
DEFAULT_BASE_MODEL = "Qwen/Qwen3-0.6B"
STATE_VERSION = "1"

ENV_EXAMPLE = """\
# Copy to .env and fill in. A variable exported in the shell wins over this file.
# Keys and URLs live only here (or in the environment), never in overbrainer.toml.
# A secret may also be a reference: vault:<mount>/<path>#<field> (needs VAULT_ADDR).

# base_url is where the API starts, /v1 included: requests go to BASE_URL/chat/completions
# (openai) or BASE_URL/messages (anthropic). OpenRouter: https://openrouter.ai/api/v1;
# OpenAI: https://api.openai.com/v1; Anthropic: https://api.anthropic.com/v1;
# a local vLLM or llama.cpp server: http://127.0.0.1:8000/v1 (no key needed).
# `overbrainer providers check` sends one cheap request per role to try them.
OVERBRAINER_PROVIDERS__OPENROUTER__BASE_URL=
OVERBRAINER_PROVIDERS__OPENROUTER__API_KEY=

# Only for gated or private base models, or to push the result to the Hub.
# OVERBRAINER_HF_TOKEN=

# For an ssh target: user@host[:port], or an alias of ~/.ssh/config.
# OVERBRAINER_TARGETS__GPU_BOX__HOST=

# For a runpod target.
# OVERBRAINER_RUNPOD__API_KEY=
"""


@click.command()
@click.argument("directory", required=False, type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--topic", "topics", multiple=True, metavar="NAME",
    help="A topic to distill (repeat for several); default: an example, rust-ownership.",
)
@click.option(
    "--base-model", metavar="ID",
    help=f"The child's base model: a Hub id or a local directory [default: {DEFAULT_BASE_MODEL}].",
)
def init(directory: Path | None, topics: tuple[str, ...], base_model: str | None) -> None:
    """Create a project: overbrainer.toml, .env.example and the prompt templates.

    DIRECTORY defaults to the project directory (-C). Nothing is written when any of
    these files already exists.

    Example: overbrainer init my-project --topic "SQL query optimisation"
    """
    from overbrainer import files
    from overbrainer.errors import UserError

    for topic in topics:
        if not topic.strip():
            raise UserError("--topic is empty: name the topic to distill")
    if len(set(topics)) < len(topics):
        raise UserError(f"--topic {_first_twice(topics)!r} is given twice")
    if base_model is not None and not base_model.strip():
        raise UserError("--base-model is empty: give a Hub id (org/name) or a directory")
    root = directory if directory is not None else current_app().given
    targets = [root / "overbrainer.toml", root / ".env.example"]
    existing = [path for path in targets if path.exists() or path.is_symlink()]
    existing += sorted((root / "prompts").glob("*.txt"))
    if existing:
        raise UserError(f"{existing[0]} already exists")
    for needed in (root, root / "prompts", root / ".overbrainer"):
        if needed.exists() and not needed.is_dir():
            raise UserError(f"{needed} exists and is not a directory")
    root.mkdir(parents=True, exist_ok=True)
    name = root.resolve().name or "project"
    # Every file by rename, no directory through a link: `init` may run in a clone.
    config = config_template(name, topics, base_model).encode()
    files.write_atomic(root / "overbrainer.toml", config, "overbrainer.toml")
    files.write_atomic(root / ".env.example", ENV_EXAMPLE.encode(), ".env.example")
    defaults = Path(__file__).parent.parent / "pipeline" / "prompts"
    for prompt in PROMPTS:
        files.write_atomic(
            root / "prompts" / prompt, (defaults / prompt).read_bytes(), f"prompts/{prompt}"
        )
    _extend_gitignore(root / ".gitignore")
    files.write_atomic(
        root / ".overbrainer" / "version", (STATE_VERSION + "\n").encode(), ".overbrainer/version"
    )
    click.echo(f"init: created a project in {root}")
    click.echo("next: copy .env.example to .env and set the provider's URL and key, then run")
    click.echo(f"  overbrainer -C {root} config check")


def _extend_gitignore(path: Path) -> None:
    from overbrainer import files

    text = (files.read_regular(path, ".gitignore", files.RECORD_LIMIT) or b"").decode()
    missing = [line for line in GITIGNORE if line not in text.splitlines()]
    if not missing:
        return
    if text and not text.endswith("\n"):
        text += "\n"
    if GITIGNORE_NOTE not in text.splitlines():
        missing.insert(0, GITIGNORE_NOTE)
    files.write_atomic(path, (text + "\n".join(missing) + "\n").encode(), ".gitignore")


def _first_twice(values: tuple[str, ...]) -> str:
    seen: set[str] = set()
    for value in values:
        if value in seen:
            return value
        seen.add(value)
    return ""


def config_template(
    project_name: str, topic_names: tuple[str, ...] = (), base_model: str | None = None
) -> str:
    """A commented ``overbrainer.toml`` for a project called ``project_name``: its topics
    (else an example one) and the child's base model (else a small Qwen)."""
    import tomlkit

    doc = tomlkit.document()
    doc.add(tomlkit.comment("overbrainer: distill a parent model into a small child model."))
    doc.add(tomlkit.comment("Any key can be overridden from the environment, for example"))
    doc.add(tomlkit.comment("OVERBRAINER_PIPELINE__CONCURRENCY=16. URLs and keys go in .env only."))
    doc.add(tomlkit.nl())

    doc.add("project", _table({"name": project_name}))

    topics = tomlkit.aot()
    given: list[tuple[str, str | None]] = [(name.strip(), None) for name in topic_names]
    for name, description in given or [DEFAULT_TOPIC]:
        values: dict[str, object] = {"name": name}
        if description is not None:
            values["description"] = description
        topics.append(_table({**values, "subtopics": 5, "questions_per_subtopic": 10}))
    doc.add(tomlkit.nl())
    doc.add(tomlkit.comment("Each topic gets `subtopics` subtopics, each `questions_per_subtopic`"))
    doc.add(tomlkit.comment("questions, and the parent answers every question."))
    doc.add("topics", topics)

    providers = tomlkit.table(is_super_table=True)
    openrouter = _table({"protocol": "openai"})
    openrouter.comment("base_url and api_key: OVERBRAINER_PROVIDERS__OPENROUTER__*")
    providers.add("openrouter", openrouter)
    doc.add("providers", providers)

    roles = tomlkit.table(is_super_table=True)
    roles.add("generator", _table({"provider": "openrouter", "model": "qwen/qwen3-235b-a22b"}))
    parent = _table({"provider": "openrouter", "model": "deepseek/deepseek-r1", "reasoning": True})
    parent.comment("the model to distill: its reasoning is kept")
    roles.add("parent", parent)
    doc.add("roles", roles)

    doc.add(
        "pipeline",
        _table(
            {
                "concurrency": 8,
                "max_retries": 5,
                "dedup_threshold": 0.8,
                "question_batch_size": 10,
                "eval_ratio": 0.1,
                "seed": 42,
            }
        ),
    )

    child = base_model.strip() if base_model is not None else DEFAULT_BASE_MODEL
    training = _table({"target": "local", "base_model": child, "adapter": "lora"})
    training.comment("the child model; `overbrainer run` trains it after split")
    doc.add(tomlkit.nl())
    if base_model is None:
        for line in (
            "Qwen/Qwen3-0.6B is sized for a GPU: on this machine's CPU it trains for hours an",
            "epoch. Train it on a GPU target (ssh, runpod below), or set base_model to a tiny",
            "model for a first try on the CPU (examples/quickstart does).",
        ):
            doc.add(tomlkit.comment(line))
    doc.add(tomlkit.comment("`run` checks the target before the first paid request, and stops"))
    doc.add(tomlkit.comment("there when it cannot train."))
    doc.add("training", training)

    targets = tomlkit.table(is_super_table=True)
    local = _table({"kind": "local", "runtime": "native"})
    local.comment("this machine: needs Axolotl, see venv below")
    for line in (
        "Without venv, `axolotl` must be on PATH, or `run` stops before its first paid",
        "request. Set venv to a directory holding bin/axolotl; with install too, Axolotl is",
        "installed there on first use (several minutes), as examples/quickstart does:",
        'venv = "~/.cache/overbrainer/axolotl-0.19.0"',
        'install = "torch==2.13.0 axolotl==0.19.0"',
    ):
        local.add(tomlkit.comment(line))
    targets.add("local", local)
    doc.add("targets", targets)

    doc.add(tomlkit.nl())
    for line in (
        "A machine over SSH (host: OVERBRAINER_TARGETS__GPU_BOX__HOST=user@host):",
        "[targets.gpu_box]",
        'kind = "ssh"',
        'workdir = "overbrainer"',
        "",
        "A Runpod GPU pod made for each run (key: OVERBRAINER_RUNPOD__API_KEY):",
        "[targets.pod]",
        'kind = "runpod"',
        'gpu_types = ["NVIDIA RTX A6000", "NVIDIA A40"]',
        "max_hours = 4",
    ):
        doc.add(tomlkit.comment(line) if line else tomlkit.nl())
    return tomlkit.dumps(doc)


def _table(values: dict[str, object]) -> Table:
    import tomlkit

    table = tomlkit.table()
    for key, value in values.items():
        table.add(key, value)
    return table
