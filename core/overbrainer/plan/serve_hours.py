"""A served parent's projected hours: the tokens its stages still ask, at a throughput.

The table (:data:`SERVE_THROUGHPUT`) gives rough output tokens per second of one engine
with its batch kept full (many requests at once), by GPU class and model size, for one GPU;
``gpus`` multiplies it (tensor parallel is taken as linear, which it is not quite). Prompt
tokens are read :data:`PREFILL` times faster than replies are written. llama.cpp runs on a
CPU, one request at a time: its figure is a CPU's, whatever the GPU. ``[plan]
serve_throughput`` (tokens out per second, by provider) replaces the table's figure.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from overbrainer.config.model import ROLE_NAMES, HostTarget, Serve, Settings
from overbrainer.duration import duration
from overbrainer.errors import TransientError, UserError
from overbrainer.hookcalls import Hooks
from overbrainer.job.serving import ServedModel
from overbrainer.model_size import model_billions
from overbrainer.pipeline.projection import project_stage, stage_role, work_left
from overbrainer.plan.training import DEFAULT_CLASS, DEFAULT_SIZE, SIZES, gpu_class
from overbrainer.project import Project

SERVE_THROUGHPUT: dict[str, tuple[float, ...]] = {
    "RTX A5000": (5000, 2500, 1100, 500, 150, 0),
    "RTX 4090": (8000, 4000, 1800, 800, 250, 0),
    "A40": (7000, 3500, 1500, 750, 300, 0),
    "L40S": (10000, 5000, 2200, 1100, 450, 150),
    "A100": (14000, 7000, 3500, 1800, 900, 400),
    "H100": (22000, 11000, 5500, 2800, 1400, 700),
    "H200": (25000, 12500, 6500, 3300, 1700, 850),
}
"""Output tokens per second of vLLM or SGLang on one GPU, by class and size (``SIZES``);
0: the model does not fit one GPU of the class (its ``gpus`` must share it)."""

ENGINE_SPEED = {"vllm": 1.0, "sglang": 1.0}
"""Throughput relative to vLLM's; an engine not named here is read as vLLM."""
CPU_TOKENS_PER_SECOND = (20.0, 8.0, 3.0, 1.5, 0.6, 0.3)
"""llama.cpp on a CPU, one request at a time, by size (``SIZES``)."""
PREFILL = 10.0
"""Times faster a prompt's tokens are read than a reply's are written."""


@dataclass(frozen=True)
class ServeHours:
    """A served provider's projection: the tokens its stages still ask, the hours they
    take (at ``tokens_per_second`` out) and what those cost at ``price_per_hour``."""

    provider: str
    tokens_in: int
    tokens_out: int
    tokens_per_second: float
    basis: str
    price_per_hour: float
    price_basis: str = ""
    """Where ``price_per_hour`` comes from (the target's setting, or its plugin's estimate)."""

    @property
    def hours(self) -> float:
        if not self.tokens_out and not self.tokens_in:
            return 0.0
        seconds = (self.tokens_out + self.tokens_in / PREFILL) / self.tokens_per_second
        return seconds / 3600

    @property
    def usd(self) -> float:
        return self.hours * self.price_per_hour

    def as_json(self) -> dict[str, object]:
        return {
            "provider": self.provider, "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out, "tokens_per_second": self.tokens_per_second,
            "hours": round(self.hours, 6), "price_per_hour": self.price_per_hour,
            "usd": round(self.usd, 6), "basis": self.basis,
        }  # fmt: skip


def price_per_hour(settings: Settings, target: str) -> float:
    """The target's ``price_per_hour`` (a host target's setting), else 0."""
    found = settings.targets.get(target)
    price = found.price_per_hour if isinstance(found, HostTarget) else None
    return price or 0.0


def serve_speed(settings: Settings, provider: str, serve: Serve) -> tuple[float, str]:
    """Output tokens per second of ``provider``'s engine, and where the figure comes from."""
    override = settings.plan.serve_throughput.get(provider)
    if override is not None:
        return override, f"[plan] serve_throughput.{provider}"
    size = model_billions(serve.model)
    column = next(
        (i for i, most in enumerate(SIZES) if (size or DEFAULT_SIZE) <= most), len(SIZES) - 1
    )
    notes = [] if size is not None else [f"{DEFAULT_SIZE:g}B assumed"]
    if serve.engine == "llama.cpp":
        return CPU_TOKENS_PER_SECOND[column], ", ".join(["llama.cpp on a CPU", *notes])
    cls = gpu_class(serve.gpu_type or "")
    gpus = serve.gpus or 1
    speed = SERVE_THROUGHPUT[cls or DEFAULT_CLASS][column]
    if not speed:  # too big for one GPU: the largest size that fits, slowed
        speed = min(s for s in SERVE_THROUGHPUT[cls or DEFAULT_CLASS] if s) / 4
        notes.append("a model this size needs several GPUs: a guess")
    if cls is None:
        notes.append(f"{serve.gpu_type or 'no serve.gpu_type'} read as {DEFAULT_CLASS}")
    speed *= gpus * ENGINE_SPEED.get(serve.engine, 1.0)
    return speed, ", ".join([f"the serve throughput table ({serve.engine}, {gpus} GPU)", *notes])


def serve_price(project: Project, hook: Hooks, serve: Serve) -> tuple[float, str]:
    """What an hour of ``serve`` costs, and where that comes from: the target's
    ``price_per_hour``, else, on a target that makes a machine for the serve (a Runpod
    pod), its plugin's ``estimate_price`` scaled to ``serve.gpus``; 0 when neither says."""
    settings = project.settings
    setting = price_per_hour(settings, serve.target)
    if setting:
        return setting, f"targets.{serve.target}.price_per_hour"
    model = settings.targets.get(serve.target)
    if model is None or isinstance(model, HostTarget):
        return 0.0, ""
    try:
        found = hook.estimate_price(
            name=serve.target, target=model, project=project,
            serve=ServedModel(serve.model, serve.gpus),
        )  # fmt: skip
    except (UserError, TransientError) as error:
        return 0.0, f"no estimate: {error}"
    if found is None:
        return 0.0, ""
    gpus = serve.gpus or found.gpu_count
    usd = found.usd_per_hour / max(found.gpu_count, 1) * gpus
    return usd, f"target `{serve.target}`'s estimate for {gpus} x {found.gpu_type}"


def serve_hours(
    project_dir: Path, settings: Settings, provider: str, priced: tuple[float, str] | None = None
) -> ServeHours:
    """What ``provider``'s serve still has to do (the subtopics, questions and answers
    stages whose role is on it, as ``plan`` projects them), in hours and dollars;
    ``priced``: its price an hour and its basis (:func:`serve_price`), else the target's
    ``price_per_hour``."""
    serve = settings.providers[provider].serve
    assert serve is not None
    work = work_left(project_dir, settings)
    tokens_in = tokens_out = 0
    for stage in ("subtopics", "questions", "answers"):
        if stage_role(settings, stage).provider != provider:
            continue
        found = project_stage(project_dir, settings, stage, work[stage], None)
        tokens_in += found.tokens_in
        tokens_out += found.tokens_out
    speed, basis = serve_speed(settings, provider, serve)
    if priced is None:
        price = price_per_hour(settings, serve.target)
        priced = (price, f"targets.{serve.target}.price_per_hour" if price else "")
    return ServeHours(provider, tokens_in, tokens_out, speed, basis, *priced)


def served_providers(settings: Settings) -> list[str]:
    """The served providers a role uses, sorted."""
    used = {
        role.provider
        for role in (getattr(settings.roles, name) for name in ROLE_NAMES)
        if role is not None
    }
    return sorted(name for name in used if settings.providers[name].serve is not None)


def served_line(settings: Settings, found: ServeHours) -> str:
    """What ``plan`` says of a served provider: its hours, their price, and the basis."""
    serve = settings.providers[found.provider].serve
    assert serve is not None
    hourly = (
        f"${found.price_per_hour:.2f}/h ({found.price_basis})"
        if found.price_per_hour
        else f"no price per hour (set targets.{serve.target}.price_per_hour)"
    )
    return (
        f"served: providers.{found.provider} ({serve.engine} {serve.model} on "
        f"`{serve.target}`) is paid by the hour, not the token: {hourly}, recorded in history "
        f"when it ends; about {duration(found.hours * 3600)} for the "
        f"{found.tokens_out:,} tokens out and {found.tokens_in:,} in still to ask "
        f"(${found.usd:.4f}) at {found.tokens_per_second:g} tokens/s out (assumed: "
        f"{found.basis}; a measured figure goes in [plan] serve_throughput)"
    )


def projected_cost(
    project: Project, provider: str, estimate: float | None = None
) -> tuple[float, str]:
    """What the serve of ``provider`` is projected to cost, and what that is in words:
    the budget's question before it starts one. ``estimate``: the price an hour of the
    machine a target makes for the serve (a Runpod pod), when its settings name none."""
    found = serve_hours(project.dir, project.settings, provider)
    rate = f"${found.price_per_hour:.2f}/h"
    if estimate is not None and not found.price_per_hour:
        found = replace(found, price_per_hour=estimate)
        rate = f"${estimate:.2f}/h (the target's estimate)"
    return found.usd, f"{duration(found.hours * 3600)} at {rate} ({found.basis})"
