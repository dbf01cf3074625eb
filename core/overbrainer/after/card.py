"""The model card ``push`` writes as the repo's ``README.md``.

The card is overbrainer's part, ending with :data:`MARKER` on its own line; whatever a person
writes below the marker on the Hub is theirs, and a later push keeps it. A README without the
marker is someone else's card, kept unless ``--overwrite-card``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomlkit
import yaml

from overbrainer import files
from overbrainer.config.model import Settings
from overbrainer.errors import UserError
from overbrainer.job.layout import CONFIG_FILE, EVAL_FILE, METRICS_FILE, TRAIN_FILE
from overbrainer.lines import read_lines

MARKER = "<!-- overbrainer:card -->"

REPRODUCE_TRAINING = (
    "base_model", "adapter", "epochs", "learning_rate", "lora_r", "lora_alpha", "lora_dropout",
    "sequence_len", "micro_batch_size", "gradient_accumulation_steps", "optimizer",
    "lr_scheduler", "sample_packing", "evals_per_epoch", "saves_per_epoch", "merge",
    "chat_template",
)  # fmt: skip
"""Keys of ``[training]`` a card shows: never the target, a hub id or free-form extras."""


@dataclass(frozen=True)
class CardFacts:
    """What the card says of one run, read from its files and the settings."""

    repo: str
    run_id: str
    base_model: str
    """A Hub repo id, or a local model's last path part."""
    adapter: str
    license: str | None
    train_examples: int
    eval_examples: int
    topics: list[str]
    final_loss: float | None
    eval_loss: float | None
    reasoning: bool
    gguf: list[str]
    compare: dict[str, Any] | None
    base_is_local: bool = False
    """The base is a directory of the training machine: never named as a Hub repo."""


def _text(path: Path) -> str:
    """The text of a run's file, "" when it is missing or not a regular file."""
    try:
        return files.read_text(path, path.name, files.READ_LIMIT) or ""
    except UserError:
        return ""


def _lines(path: Path) -> list[str]:
    return _text(path).split("\n")  # not splitlines: a record may hold U+2028


def _count_lines(path: Path) -> int:
    try:
        file = files.open_read(path, path.name)
    except UserError:
        return 0
    if file is None:
        return 0
    with file:
        return sum(1 for line in read_lines(file, path.name, cut=True) if line.strip())


def _topics(path: Path) -> list[str]:
    topics: list[str] = []
    lines = _lines(path)
    for line in lines:
        try:
            topic = json.loads(line).get("topic")
        except (ValueError, AttributeError):
            continue
        if isinstance(topic, str) and topic not in topics:
            topics.append(topic)
    return topics


def _losses(path: Path) -> tuple[float | None, float | None]:
    loss = eval_loss = None
    for line in _lines(path):
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict):
            continue
        if isinstance(event.get("loss"), int | float):
            loss = float(event["loss"])
        if isinstance(event.get("eval_loss"), int | float):
            eval_loss = float(event["eval_loss"])
    return loss, eval_loss


def newest_compare_record(run_dir: Path) -> tuple[str, dict[str, Any]] | None:
    """The id and summary of the run's newest compare (ids sort by time), if any."""
    for path in sorted(run_dir.glob("compares/*/compare.json"), reverse=True):
        try:
            data = json.loads(_text(path))
        except ValueError:
            continue
        summary = data.get("summary") if isinstance(data, dict) else None
        if isinstance(summary, dict):
            return path.parent.name, summary
    return None


def newest_compare(run_dir: Path) -> dict[str, Any] | None:
    """The summary of the run's newest compare, if any."""
    found = newest_compare_record(run_dir)
    return found[1] if found else None


def public_model(name: str) -> str:
    """``name`` as a card may publish it: a Hub repo as it is, a local path (absolute, from
    home or here, or one that exists) by its last part, never this machine's directories."""
    path = Path(name)
    if path.is_absolute() or name.startswith(("~", ".")) or path.exists():
        return path.name or name
    return name


_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")


def is_local_model(name: str, project_dir: Path) -> bool:
    """Whether ``name`` is a directory of this machine (absolute, from home or here, or
    existing beside the project) and not a Hub repo id."""
    path = Path(name)
    if path.is_absolute() or name.startswith(("~", ".")) or not _HUB_ID.fullmatch(name):
        return True
    return path.exists() or (project_dir / name).exists()


def gather(
    settings: Settings, run_dir: Path, repo: str, gguf: list[str], license: str | None
) -> CardFacts:
    """The card's facts of the run in ``run_dir``."""
    try:
        config = yaml.safe_load(_text(run_dir / CONFIG_FILE)) or {}
    except yaml.YAMLError:
        config = {}
    training = settings.training
    raw_base = str(config.get("base_model") or (training.base_model if training else "unknown"))
    base = public_model(raw_base)
    adapter = str(config.get("adapter") or (training.adapter if training else "full"))
    loss, eval_loss = _losses(run_dir / METRICS_FILE)
    return CardFacts(
        repo=repo,
        run_id=run_dir.name,
        base_model=base,
        adapter=adapter,
        license=license,
        train_examples=_count_lines(run_dir / TRAIN_FILE),
        eval_examples=_count_lines(run_dir / EVAL_FILE),
        topics=_topics(run_dir / TRAIN_FILE) or [topic.name for topic in settings.topics],
        final_loss=loss,
        eval_loss=eval_loss,
        reasoning=settings.roles.parent.reasoning,
        gguf=gguf,
        compare=newest_compare(run_dir),
        base_is_local=is_local_model(raw_base, run_dir.parents[1]),
    )


def reproduce_toml(settings: Settings) -> str:
    """The settings a reader needs to make the model again: topics, roles (provider names and
    models), ``[pipeline]`` and the run's ``[training]``; never providers, targets, keys, URLs
    or paths of this machine."""
    document = tomlkit.document()
    topics = tomlkit.aot()
    for topic in settings.topics:
        topics.append(tomlkit.item(topic.model_dump(exclude_none=True)))
    if settings.topics:
        document["topics"] = topics
    roles = tomlkit.table()
    for name, role in settings.roles:
        if role is not None:
            roles[name] = {"model": role.model, "reasoning": role.reasoning}
    document["roles"] = roles
    document["pipeline"] = settings.pipeline.model_dump(exclude_none=True)
    if settings.training is not None:
        values = settings.training.model_dump(include=set(REPRODUCE_TRAINING), exclude_none=True)
        if "base_model" in values:
            values["base_model"] = public_model(values["base_model"])
        document["training"] = values
    return tomlkit.dumps(document)


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def render(facts: CardFacts, settings: Settings) -> str:
    """The card: front matter, how to use it, how it was made, how to make it again, and
    the marker last."""
    # The Hub links base_model to a repo: a local base is named in the text only.
    front: dict[str, Any] = {} if facts.base_is_local else {"base_model": facts.base_model}
    base_shown = (
        f"a local model (`{facts.base_model}`)" if facts.base_is_local else f"`{facts.base_model}`"
    )
    front["library_name"] = "peft" if facts.adapter in ("lora", "qlora") else "transformers"
    if facts.license:
        front["license"] = facts.license
    front["tags"] = ["overbrainer", "distillation"] + (["gguf"] if facts.gguf else [])
    lines = ["---", yaml.safe_dump(front, sort_keys=False).strip(), "---", ""]
    lines += [f"# {facts.repo.split('/')[-1]}", ""]
    lines += [
        f"A child model distilled from `{settings.roles.parent.model}` into "
        f"{base_shown} with [overbrainer](https://pypi.org/project/overbrainer/), "
        f"run `{facts.run_id}`.",
        "",
        "## Use it",
        "",
    ]
    if facts.gguf:
        quant = facts.gguf[0].rsplit("-", 1)[-1].removesuffix(".gguf")
        lines += ["```sh", f"ollama run hf.co/{facts.repo}:{quant}", "```", ""]
        lines += [f"GGUF files: {', '.join(f'`{name}`' for name in facts.gguf)}.", ""]
    if facts.adapter in ("lora", "qlora"):
        lines += [
            "```python",
            "from peft import AutoPeftModelForCausalLM",
            f'model = AutoPeftModelForCausalLM.from_pretrained("{facts.repo}")',
            "```",
            "",
        ]
    lines += ["## How it was made", ""]
    roles = settings.roles
    lines.append(
        f"- Parent (teacher): `{roles.parent.model}`; questions by `{roles.generator.model}`"
    )
    lines.append(
        f"- Data: {facts.train_examples} training and {facts.eval_examples} evaluation examples"
    )
    if facts.topics:
        lines.append(f"- Topics: {', '.join(facts.topics)}")
    reasoning = "trained (the parent's, in <think>)" if facts.reasoning else "not trained"
    lines.append(f"- Reasoning: {reasoning}")
    training = settings.training
    if training is not None and facts.adapter in ("lora", "qlora"):
        lines.append(
            f"- Adapter: {facts.adapter}, r {training.lora_r}, alpha {training.lora_alpha}, "
            f"dropout {training.lora_dropout}"
        )
    lines.append(f"- Final training loss: {_number(facts.final_loss)}")
    lines.append(f"- Final eval loss: {_number(facts.eval_loss)}")
    if facts.compare:
        rate = facts.compare.get("win_or_tie")
        shown = f"{rate:.0%}" if isinstance(rate, int | float) else "-"
        bounds = (facts.compare.get("intervals") or {}).get("win_or_tie")
        between = (
            f" (95% interval {bounds[0]:.0%}-{bounds[1]:.0%}, each question judged in both "
            "orders)"
            if isinstance(bounds, list) and len(bounds) == 2
            else ""
        )
        lines.append(
            f"- Compared with the parent: win-or-tie rate {shown}{between} over "
            f"{facts.compare.get('questions', '-')} questions (judged)"
        )
    lines += ["", "## Reproduce", "", "```toml", reproduce_toml(settings).strip(), "```", ""]
    lines.append(MARKER)
    return "\n".join(lines) + "\n"


def merge_card(generated: str, existing: str | None, overwrite: bool) -> str | None:
    """The README to send: the new card with what followed the marker in ``existing``; None
    when ``existing`` is someone else's card (no marker) and ``overwrite`` is off."""
    if existing is None or overwrite:
        return generated
    if MARKER not in existing:
        return None
    tail = existing.split(MARKER, 1)[1]
    return generated + tail.lstrip("\n") if tail.strip() else generated
