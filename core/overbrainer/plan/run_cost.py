"""``overbrainer plan``: what the rest of ``run`` will cost, before anything is spent.

Each stage still to run (``pipeline.projection``), then training (``plan.training``),
then the export after training and an ``overbrainer compare``. Prices are the
``[providers.NAME.prices]`` table's, else the provider's ``/models`` (asked only for a
stage with requests left); the batch price when the parent answers in batch. A compare is
not part of ``run``: it is shown, and left out of the total.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from overbrainer.config.model import Role, Settings
from overbrainer.errors import TransientError, UserError
from overbrainer.hookcalls import Hooks
from overbrainer.pipeline.budget import usd
from overbrainer.pipeline.preference import judge_work, judging
from overbrainer.pipeline.projection import (
    CHARS_PER_TOKEN,
    StagePlan,
    assumed,
    in_live_batches,
    project_stage,
    stage_role,
    work_left,
)
from overbrainer.pipeline.records import ANSWERS, EVAL, DataFiles
from overbrainer.pipeline.spend import spent_and_held
from overbrainer.pipeline.staleness import Stale, find_stale
from overbrainer.plan.logprobs import LogprobsPlan, plan_logprobs
from overbrainer.plan.serve_hours import ServeHours, serve_hours, serve_price, served_providers
from overbrainer.plan.training import TrainingPlan, estimate_training
from overbrainer.project import Project
from overbrainer.providers.prices import Price, PriceBook, discounted, table_price
from overbrainer.providers.registry import ProviderSet

EXPORT_HOURS = 0.25
"""The machine time an export to GGUF is assumed to take (download, convert, quantize)."""
COMPARE_HOURS = 0.25
"""The machine time a compare's child (and its base model) are assumed to be served for."""
JUDGED_EACH = 4
"""Judge requests a compare makes per eval example: both orders, against the base model and
against the parent (``overbrainer compare`` with no ``--against``)."""


@dataclass(frozen=True)
class Extra:
    """The export or a compare: its requests (a compare's judge), machine hours, dollars."""

    requests: int
    tokens_in: int
    tokens_out: int
    gpu_hours: float
    usd: float | None
    basis: str
    in_total: bool

    def as_json(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "gpu_hours": round(self.gpu_hours, 4),
            "usd": None if self.usd is None else round(self.usd, 6),
            "basis": self.basis,
            "in_total": self.in_total,
        }


@dataclass(frozen=True)
class StaleCost:
    """A stage's stale records, those of unknown making, and (answers) redoing's plan."""

    stage: str
    count: int
    unknown: int
    redo: StagePlan | None = None
    answers_after: StagePlan | None = None
    """Questions: answering the remade questions, whose old answers are left behind."""

    def as_json(self) -> dict[str, Any]:
        redo = self.redo.as_json() if self.redo is not None else None
        data: dict[str, Any] = {"stale": self.count, "unknown": self.unknown, "redo": redo}
        if self.answers_after is not None:
            data["answers_after"] = self.answers_after.as_json()
        return data


@dataclass(frozen=True)
class CostPlan:
    """The projection of the rest of a run, and what the project spent so far."""

    stages: list[StagePlan]
    training: TrainingPlan | None
    export: Extra | None
    compare: Extra | None
    spent: float
    """Paid, and held for live batches: what the budget counts as gone."""
    max_usd: float | None
    stale: tuple[StaleCost, ...] = ()
    """What an edit made stale: not part of the total (``answers --stale`` redoes it)."""
    held: float = 0.0
    """The part of ``spent`` held for live batches: their results may cost it, not yet paid."""
    served: tuple[ServeHours, ...] = ()
    """The served providers' projected hours and what they cost (docs/serving.md)."""
    logprobs: LogprobsPlan | None = None
    """The parent's logprobs of the answers to come (``distill = "logits"``)."""

    @property
    def total_usd(self) -> float | None:
        """The stages', training's and the export's dollars; None when one is unknown."""
        parts: list[float | None] = [stage.usd for stage in self.stages]
        if self.training is not None:
            parts.append(self.training.usd)
        if self.export is not None and self.export.in_total:
            parts.append(self.export.usd)
        parts.extend(found.usd for found in self.served)
        if self.logprobs is not None:
            parts.append(self.logprobs.usd)
        if any(part is None for part in parts):
            return None
        return sum(part or 0.0 for part in parts)

    @property
    def stages_bound_usd(self) -> float | None:
        """What the stages' requests can cost at most (the budget reserves it); None when
        a price is unknown."""
        parts = [stage.usd_bound for stage in self.stages]
        return None if any(p is None for p in parts) else sum(p or 0.0 for p in parts)

    @property
    def prior(self) -> list[StagePlan]:
        """The stages with work left and no measurement yet: projected from a prior."""
        return [stage for stage in self.stages if stage.basis == "prior"]

    def unknown(self) -> list[str]:
        """What has no price: ``answers (main/parent-2)``, ``training``."""
        names = [f"{s.stage} ({s.provider}/{s.model})" for s in self.stages if s.usd is None]
        if self.training is not None and self.training.usd is None:
            names.append("training")
        return names

    def as_json(self) -> dict[str, Any]:
        total = self.total_usd
        return {
            "stages": {stage.stage: stage.as_json() for stage in self.stages},
            "training": self.training.as_json() if self.training is not None else None,
            "export": self.export.as_json() if self.export is not None else None,
            "compare": self.compare.as_json() if self.compare is not None else None,
            "total_usd": None if total is None else round(total, 6),
            "stages_bound_usd": _rounded(self.stages_bound_usd),
            "spent_usd": round(self.spent, 6),
            "held_usd": round(self.held, 6),
            "max_usd": self.max_usd,
            "stale": {cost.stage: cost.as_json() for cost in self.stale},
            "served": {found.provider: found.as_json() for found in self.served},
            "logprobs": self.logprobs.as_json() if self.logprobs is not None else None,
        }


def _rounded(amount: float | None) -> float | None:
    return None if amount is None else round(amount, 6)


def build_plan(
    project: Project,
    hook: Hooks,
    prices: PriceBook,
    max_usd: float | None = None,
    *,
    price_compare: bool = True,
) -> CostPlan:
    """The plan of ``project`` now. ``prices`` keeps what providers said (``run`` hands it
    on to its stages, which then ask no more). ``price_compare``: ask the judge's price too
    (``run``, which does not compare, asks nothing of a project with nothing left)."""
    settings = project.settings
    work = work_left(project.dir, settings)
    stages = ["subtopics", "questions", "answers"]
    if judging(settings):  # the judge's requests of `[pipeline] select = "judge"`
        stages.append("select")
        work["select"] = judge_work(project.dir, settings)
    roles = {name: _role(settings, name) for name in stages}
    wanted = {(roles[s].provider, roles[s].model) for s in stages if work[s].requests}
    found = find_stale(project.dir, settings)
    wanted |= _stale_roles(settings, found)
    judge = settings.roles.judge or settings.roles.parent
    if price_compare and settings.training is not None:
        wanted.add((judge.provider, judge.model))
    known = _prices(settings, project.env, prices, wanted)
    plans = []
    for stage in stages:
        plans.append(
            project_stage(project.dir, settings, stage, work[stage], _price(settings, stage, known))
        )
    plans.append(StagePlan("split", 0, 0, 0, 0.0, "no requests"))
    # The answers a live batch holds are on their way: split will train on them too.
    coming = work["answers"].requests + len(in_live_batches(project.dir))
    training = estimate_training(project, hook, coming)
    export = compare = None
    if training is not None:
        rate = training.price.usd_per_hour if training.price is not None else 0.0
        priced = training.usd is not None
        export = Extra(0, 0, 0, EXPORT_HOURS if rate else 0.0,
                       EXPORT_HOURS * rate if priced else None,
                       _machine_basis(training, settings.export.after_training),
                       settings.export.after_training)  # fmt: skip
        judge_price = known.get((judge.provider, judge.model))
        compare = _compare(project, settings, judge, judge_price, rate if priced else None)
    limit = max_usd if max_usd is not None else settings.budget.max_usd
    stale = _stale_costs(project, found, known)
    paid, held = spent_and_held(project.dir)
    served = tuple(
        serve_hours(project.dir, settings, name, serve_price(project, hook, serve))
        for name in served_providers(settings)
        if (serve := settings.providers[name].serve) is not None
    )
    answers = next(plan for plan in plans if plan.stage == "answers")
    logprobs = plan_logprobs(settings, answers.tokens_out)
    return CostPlan(
        plans, training, export, compare, paid + held, limit, stale, held, served, logprobs
    )


def stale_costs(project: Project, prices: PriceBook) -> tuple[StaleCost, ...]:
    """What an edit made stale in ``project`` now, and what redoing it costs (a price
    asked only for a stage with stale records): ``watch``'s report."""
    settings = project.settings
    found = find_stale(project.dir, settings)
    wanted = _stale_roles(settings, found)
    try:
        known = _prices(settings, project.env, prices, wanted)
    except TransientError:
        known = {}  # said as "no price": the count is what matters here
    return _stale_costs(project, found, known)


def _stale_roles(settings: Settings, found: dict[str, Stale]) -> set[tuple[str, str]]:
    """The (provider, model) whose price redoing ``found`` needs: each stage's with stale
    records, and the parent's when remade questions are to be answered again."""
    wanted = set()
    for stage, stale in found.items():
        if stale.work.requests:
            role = _role(settings, stage)
            wanted.add((role.provider, role.model))
        if stale.answers_after is not None:
            role = _role(settings, "answers")
            wanted.add((role.provider, role.model))
    return wanted


def _stale_costs(
    project: Project, found: dict[str, Stale], known: dict[tuple[str, str], Price | None]
) -> tuple[StaleCost, ...]:
    costs = []
    for stage, stale in found.items():
        redo = after = None
        if stale.work.requests:
            price = _price(project.settings, stage, known)
            redo = project_stage(project.dir, project.settings, stage, stale.work, price)
        if stale.answers_after is not None:
            price = _price(project.settings, "answers", known)
            after = project_stage(
                project.dir, project.settings, "answers", stale.answers_after, price
            )
        costs.append(StaleCost(stage, len(stale.ids), stale.unknown, redo, after))
    return tuple(costs)


def _price(
    settings: Settings, stage: str, known: dict[tuple[str, str], Price | None]
) -> Price | None:
    """``stage``'s price per token: its role's, at the batch discount when it batches."""
    role = _role(settings, stage)
    price = known.get((role.provider, role.model))
    if price is not None and stage == "answers" and role.batch:
        price = discounted(price, settings.providers[role.provider].batch_discount)
    return price


def _role(settings: Settings, stage: str) -> Role:
    return stage_role(settings, stage)


def _machine_basis(training: TrainingPlan, after_training: bool) -> str:
    if not after_training:
        return "not after training (export.after_training is false)"
    if training.price is None:
        return training.basis
    return f"assumed ({EXPORT_HOURS:g} h of the target)"


def _compare(
    project: Project, settings: Settings, judge: Role, price: Price | None, rate: float | None
) -> Extra:
    """:data:`JUDGED_EACH` judge requests per eval example, the child and its base served on
    the target meanwhile."""
    data = DataFiles(project.dir)
    examples = len(data.read(EVAL)) if data.path(EVAL).is_file() else 0
    answers = data.read(ANSWERS) if data.path(ANSWERS).is_file() else []
    chars = (
        sum(len(r["messages"][-1].get("content", "")) for r in answers) // len(answers)
        if answers
        else settings.compare.max_tokens * CHARS_PER_TOKEN
    )
    each = assumed(3 * chars, 1, judge)  # the question and two answers
    requests = examples * JUDGED_EACH
    tokens_in, tokens_out = round(each.tokens_in * requests), round(each.tokens_out * requests)
    usd = None
    if price is not None and rate is not None:
        usd = tokens_in * price.prompt + tokens_out * price.completion + COMPARE_HOURS * rate
    hours = COMPARE_HOURS if rate else 0.0
    return Extra(requests, tokens_in, tokens_out, hours, usd,
                 "assumed (overbrainer compare, not part of run)", False)  # fmt: skip


def _prices(
    settings: Settings,
    env: Mapping[str, str],
    book: PriceBook,
    wanted: set[tuple[str, str]],
) -> dict[tuple[str, str], Price | None]:
    """The price of each (provider, model): the table's, else asked of the provider once
    (a provider that cannot be asked, no URL or no key, gives none)."""
    found: dict[tuple[str, str], Price | None] = {}
    ask = []
    for provider, model in wanted:
        price = table_price(settings, provider, model)
        if price is None:
            ask.append((provider, model))
        found[(provider, model)] = price
    if ask:
        found.update(asyncio.run(_ask(settings, env, book, ask)))
    return found


async def _ask(
    settings: Settings, env: Mapping[str, str], book: PriceBook, ask: list[tuple[str, str]]
) -> dict[tuple[str, str], Price | None]:
    providers = ProviderSet(settings, env, book)
    found: dict[tuple[str, str], Price | None] = {}
    try:
        for provider, model in ask:
            try:
                found[(provider, model)] = await providers.ask_price(provider, model)
            except UserError:
                found[(provider, model)] = None
    finally:
        await providers.aclose()
    return found


STALE = "made with another prompt, model or setting than now"
UNKNOWN = (
    "made before overbrainer kept what made them: unknown, not counted stale "
    "(`overbrainer {stage} --force` redoes them all)"
)


def stale_lines(
    stale: tuple[StaleCost, ...], unknown: bool = True, redoing: bool = False
) -> list[str]:
    """``stale: answers: 12 made with another prompt …``: a line a stage with stale
    records, and (``unknown``) one for those made before fingerprints were kept;
    ``redoing``: said as what this cycle does now, not the command that would."""
    lines = []
    for cost in stale:
        if cost.count and cost.redo is not None:
            redo = cost.redo
            how = "redone now" if redoing else f"`overbrainer {cost.stage} --stale`"
            then = ""
            if cost.answers_after is not None:
                after = cost.answers_after
                then = (
                    f", then answering them again: {after.requests} requests, "
                    f"{_dollars(after.usd)} (up to {_dollars(after.usd_bound)}, {after.basis})"
                )
            lines.append(
                f"stale: {cost.stage}: {cost.count} {STALE}; redoing them: {redo.requests} "
                f"requests, {_dollars(redo.usd)} (up to {_dollars(redo.usd_bound)}, "
                f"{redo.basis}){then}: {how}"
            )
        elif cost.count:  # subtopics: their questions hang on their ids
            lines.append(
                f"stale: {cost.stage}: {cost.count} {STALE} (`overbrainer {cost.stage} "
                "--force --topic NAME` makes a topic's again)"
            )
        if cost.unknown and unknown:
            lines.append(f"stale: {cost.stage}: {cost.unknown} {UNKNOWN.format(stage=cost.stage)}")
    return lines


def _dollars(amount: float | None) -> str:
    return "no price" if amount is None else usd(amount)
