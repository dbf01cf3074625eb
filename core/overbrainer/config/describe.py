"""The configuration as ``config check`` prints it: one line an item, secrets masked."""

from __future__ import annotations

from collections.abc import Iterator

from pydantic import BaseModel, SecretStr

from overbrainer.config.model import Role, Settings
from overbrainer.config.sections import section_secrets
from overbrainer.redact import mask_url

UNSET = "(unset)"
MASKED = "***"
SSH_CLIENT_NOTE = (
    " (here one client serves both: fabric, built in, reading ~/.ssh/config as OpenSSH does)"
)


def describe_settings(settings: Settings) -> Iterator[str]:
    """Each setting worth checking, as ``key = value``."""
    yield f"project.name = {settings.project.name}"
    for topic in settings.topics:
        yield (
            f"topics.{topic.name} = {topic.subtopics} subtopics x "
            f"{topic.questions_per_subtopic} questions"
        )
    yield from _providers(settings)
    for name in ("generator", "parent", "embedder", "judge"):
        role = getattr(settings.roles, name)
        if role is not None:
            yield f"roles.{name} = {_role(role)}"
    yield from _pipeline(settings)
    training = settings.training
    if training is None:
        yield "training = (none: run stops after split)"
    else:
        yield f"training = {training.base_model} on {training.target} ({training.adapter})"
        for key, value in training.model_dump(
            exclude={"target", "base_model", "adapter", "axolotl_extra"}, exclude_none=True
        ).items():
            yield f"training.{key} = {_value(value)}"
        for key in sorted(training.axolotl_extra):
            yield f"training.axolotl_extra.{key} = (set)"
    for name, target in settings.targets.items():
        for key, value in target.model_dump(exclude_none=True).items():
            note = SSH_CLIENT_NOTE if key == "ssh_client" else ""
            yield f"targets.{name}.{key} = {_value(value)}{note}"
    if settings.eval.files:  # the held-out sets compare asks (unset: the eval split alone)
        yield f"eval.files = {_value(settings.eval.files)}"
    yield from _sections(settings)
    for gpu, speed in sorted(settings.plan.throughput.items()):
        yield f"plan.throughput.{gpu} = {_value(speed)} tokens/s"
    yield from _plugin_tables(settings)
    yield f"hf_token = {_secret(settings.hf_token)}"
    yield f"log = {settings.log or UNSET}"


def _pipeline(settings: Settings) -> Iterator[str]:
    for key, value in settings.pipeline.model_dump().items():
        yield f"pipeline.{key} = {_value(UNSET if value is None else value)}"
    for key, value in settings.split.model_dump().items():
        yield f"split.{key} = {_value(value) if value != [] else '(none)'}"


def _providers(settings: Settings) -> Iterator[str]:
    for name, provider in settings.providers.items():
        yield f"providers.{name}.protocol = {provider.protocol}"
        yield f"providers.{name}.base_url = {_url(provider.base_url)}"
        yield f"providers.{name}.api_key = {_secret(provider.api_key)}"
        yield f"providers.{name}.batch_discount = {_value(provider.batch_discount)}"
        for model, price in sorted(provider.prices.items()):
            logprobs = "" if price.logprobs is None else f", ${_value(price.logprobs)} logprobs"
            yield (
                f"providers.{name}.prices.{model} = ${_value(price.input)} in, "
                f"${_value(price.output)} out{logprobs} per million tokens"
            )


def _sections(settings: Settings) -> Iterator[str]:
    """The tables of later commands (watch, export, hub, compare, metrics), key by key."""
    for section in ("budget", "watch", "export", "hub", "compare", "metrics"):
        for key, value in getattr(settings, section).model_dump().items():
            if key == "base_url":
                if value:
                    yield f"{section}.{key} = {_url(value)}"
                continue
            yield f"{section}.{key} = {_value(UNSET if value is None else value)}"


def _plugin_tables(settings: Settings) -> Iterator[str]:
    """The tables plugins registered: every secret, masked, and each other key that is set
    (a URL masked as the providers' are)."""
    for name, (section, value) in settings.sections.items():
        for key in type(value).model_fields:
            field = getattr(value, key)
            if key in section.secrets:
                yield f"{name}.{key} = {_secret(field)}"
            elif isinstance(field, str) and "://" in field:
                yield f"{name}.{key} = {_url(field)}"
            elif field is not None:
                yield f"{name}.{key} = {_value(field)}"


def secret_fields(settings: Settings) -> Iterator[tuple[str, SecretStr | None]]:
    """Every secret setting by its key, set or not."""
    for name, provider in settings.providers.items():
        yield f"providers.{name}.api_key", provider.api_key
    yield from section_secrets(settings.sections)
    yield "hf_token", settings.hf_token


def _role(role: Role) -> str:
    details = [f"reasoning: {str(role.reasoning).lower()}", f"max_tokens: {role.max_tokens}"]
    if role.batch:
        details.append("batch: true")
    if role.samples > 1:  # the parent's answers a question, and how they are asked
        details.append(f"samples: {role.samples}")
        if not role.samples_n:
            details.append("samples_n: false")
    for key in ("temperature", "reasoning_effort", "thinking_budget"):
        value = getattr(role, key)
        if value is not None:
            details.append(f"{key}: {value}")
    return f"{role.provider}/{role.model} ({', '.join(details)})"


def _secret(secret: SecretStr | None) -> str:
    if secret is None:
        return UNSET
    if secret.get_secret_value().startswith("vault:"):
        return f"{MASKED} (vault reference)"
    return MASKED


def _url(url: str | None) -> str:
    return mask_url(url) if url else UNSET


def _value(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, BaseModel):
        return repr(value)
    if isinstance(value, list):
        return ", ".join(str(item) for item in value)
    return str(value)
