"""One cycle of ``run``: every stage in order, then training when its inputs changed.

``run`` is one cycle; ``watch`` runs one after each change. The configuration is read
again between stages and before training (a running stage keeps the settings it started
with), and training is skipped when a succeeded run was made from the same inputs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from loguru import logger

from overbrainer.config.reload import Reloader
from overbrainer.cycles import CycleSummary
from overbrainer.errors import UserError
from overbrainer.hookcalls import Hooks
from overbrainer.pipeline.preflight import reasoning_problem
from overbrainer.pipeline.runner import STAGES, Outcome, run_stage
from overbrainer.plan.run_cost import stale_costs, stale_lines
from overbrainer.project import Project
from overbrainer.providers.prices import PriceBook
from overbrainer.runs.store import RunStore
from overbrainer.train.preflight import check_training_target
from overbrainer.train.session import train
from overbrainer.train.workspace import Workspace


@dataclass
class Cycle:
    """The pieces a cycle works with, which outlive it: the watched configuration, the
    plugins' hooks, the run store, and where lines go."""

    reloader: Reloader
    hook: Hooks
    runs: RunStore
    echo: Callable[[str], None]
    prices: PriceBook = field(default_factory=PriceBook)
    max_usd: float | None = None
    """The budget, in place of ``[budget] max_usd`` (``run --max-usd``)."""
    watching: bool = False
    """A ``watch`` cycle: it says what is stale first, and redoes it when ``[watch]
    redo_stale`` says so (``run`` says it with its plan)."""
    said: set[str] = field(default_factory=set)
    """Warnings of the training target's check said already: a ``watch`` says each once,
    not every cycle."""
    models_found: set[str] | None = None
    """A ``watch``'s base models found on their targets: probed once, not every cycle."""

    def workspace(self) -> Workspace:
        """The training side's view, with the settings in force now."""
        reloader = self.reloader
        project = Project(reloader.project_dir, reloader.settings, reloader.env.merged)
        return Workspace(project, self.hook, self.runs, self.echo)

    def run(
        self,
        summary: CycleSummary,
        *,
        on_stage: Callable[[Outcome], None],
        retrain: bool = False,
        resume_if_same: str | None = None,
        stop_when: Callable[[], str | None] | None = None,
    ) -> CycleSummary:
        """Run the stages, then train, filling ``summary``; the first failure raises.

        ``retrain``: train even when a succeeded run has the same inputs;
        ``resume_if_same``: a stopped run to resume from when the inputs did not change.
        """
        started = time.monotonic()
        try:
            problem = reasoning_problem(self.reloader.settings)
            if problem is not None:
                raise UserError(problem)
            prepared = check_training_target(
                self.workspace(), said=self.said, found=self.models_found
            )
            redo = self.watching and self._stale(first=summary.number == 1)
            for stage in STAGES:
                self.reloader.changed()
                outcome = run_stage(
                    stage,
                    self.reloader.project_dir,
                    self.reloader.settings,
                    self.reloader.env,
                    self.prices,
                    max_usd=self.max_usd,
                    stale=redo and stage in ("questions", "answers"),
                )
                summary.cost += outcome.cost
                if outcome.brief:
                    summary.ran.append(outcome.brief)
                on_stage(outcome)
                outcome.check()
            self.reloader.changed()
            ws = self.workspace()
            if ws.settings.training is None:
                logger.info("no [training] section in overbrainer.toml: run stops after split")
                return summary
            trained = train(
                ws,
                only_if_changed=not retrain,
                resume_if_same=resume_if_same,
                stop_when=stop_when,
                max_usd=self.max_usd,
                prepared=prepared,
            )
            if trained is not None:
                summary.run = trained.record
                run = trained.record
                summary.ran.append(
                    f"train up to date with run {run.id}"
                    if trained.up_to_date
                    else f"train run {run.id} {run.state.value}"
                )
            return summary
        finally:
            summary.seconds = time.monotonic() - started

    def _stale(self, first: bool) -> bool:
        """Say what an edit made stale and what redoing it costs (the records of unknown
        making: at the first cycle only, they do not change); whether to redo it."""
        settings = self.reloader.settings
        costs = stale_costs(self.workspace().project, self.prices)
        redo = settings.watch.redo_stale
        for line in stale_lines(costs, unknown=first, redoing=redo):
            self.echo(f"watch: {line}")
        if any(cost.count for cost in costs if cost.stage != "subtopics") and not redo:
            self.echo("watch: stale records are not redone: set [watch] redo_stale = true")
        return redo
