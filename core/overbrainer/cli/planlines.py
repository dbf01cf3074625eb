"""How ``plan`` and ``run`` show a cost plan: a table, and its total in one line."""

from __future__ import annotations

from overbrainer.pipeline.budget import usd
from overbrainer.plan.logprobs import logprobs_line
from overbrainer.plan.run_cost import CostPlan, Extra, stale_lines
from overbrainer.plan.training import TrainingPlan

HEADER = (
    f"{'stage':<10} {'requests':>9} {'tokens in':>12} {'tokens out':>12} {'usd':>10} "
    f"{'up to':>10}  basis"
)


def dollars(amount: float | None) -> str:
    return "no price" if amount is None else usd(amount)


def plan_lines(plan: CostPlan) -> list[str]:
    """The table: a row per stage, then training, export, compare and the total."""
    lines = [HEADER]
    for stage in plan.stages:
        lines.append(
            f"{stage.stage:<10} {stage.requests:>9} {stage.tokens_in:>12} {stage.tokens_out:>12} "
            f"{dollars(stage.usd):>10} {dollars(stage.usd_bound):>10}  {stage.basis}"
        )
    if plan.logprobs is not None:
        lines.append(f"{'logprobs':<10} {logprobs_line(plan.logprobs)}")
    if plan.training is not None:
        lines.append(f"{'training':<10} {training_line(plan.training)}")
    for name, extra in (("export", plan.export), ("compare", plan.compare)):
        if extra is not None:
            lines.append(f"{name:<10} {extra_line(extra)}")
    lines.append(f"{'total':<10} {total_line(plan)}")
    return lines + stale_lines(plan.stale)


def training_line(training: TrainingPlan) -> str:
    tokens = (
        f"{training.tokens_per_epoch} tokens/epoch x {training.epochs} = {training.tokens} "
        f"tokens (assumed: {training.tokens_from}, characters / 4)"
    )
    price = training.price
    if price is None:
        spend = "$0.0000, no price" if training.usd == 0 else f"no price ({training.basis})"
        time = training.time_text()
        return f"on `{training.target}`: {tokens}; " + (f"{time}; " if time else "") + spend
    gpus = f"{price.gpu_count} x {price.gpu_type}" if price.gpu_count > 1 else price.gpu_type
    return (
        f"on `{training.target}`: {tokens}; {training.gpu_hours or 0:.2f} GPU hours of {gpus} "
        f"at ${price.usd_per_hour:.2f}/h: {dollars(training.usd)}, {training.basis}"
    )


def extra_line(extra: Extra) -> str:
    plural = "" if extra.requests == 1 else "s"
    requests = f"{extra.requests} judge request{plural}, " if extra.requests else ""
    hours = f"{extra.gpu_hours:g} h of the target, " if extra.gpu_hours else ""
    return f"{requests}{hours}{dollars(extra.usd)}, {extra.basis}"


def total_line(plan: CostPlan) -> str:
    """The plan's total, what was spent, and the budget with what it leaves."""
    total = plan.total_usd
    shown = f"{usd(total)} to spend" if total is not None else (
        "cost unknown (no price: " + ", ".join(plan.unknown()) + ")"
    )
    bound = plan.stages_bound_usd
    if total is not None and bound is not None and plan.prior:
        shown += f" (the stages up to {usd(bound)})"
    line = f"{shown}; spent so far {usd(plan.spent - plan.held)}"
    if plan.held > 0:
        line += f" (and {usd(plan.held)} held for live batches)"
    if plan.max_usd is not None:
        left = max(plan.max_usd - plan.spent, 0.0)
        line += f"; budget {usd(plan.max_usd)}, {usd(left)} left"
        if total is not None and total > left:
            line += ": the plan goes past it"
    return line
