"""The click type of a budget on the command line: dollars, finite and above zero."""

from __future__ import annotations

import math

import click


class Dollars(click.ParamType):
    """USD above zero: ``nan`` and ``inf`` are refused (either would switch a budget off,
    as no comparison with NaN is true and nothing passes infinity)."""

    name = "usd"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        if isinstance(value, float) and math.isfinite(value) and value > 0:
            return value
        try:
            amount = float(str(value).strip())
        except ValueError:
            self.fail(f"{value!r} is not a number of dollars", param, ctx)
        if not math.isfinite(amount) or amount <= 0:
            self.fail(f"{value!r} is not a finite amount above 0", param, ctx)
        return amount


DOLLARS = Dollars()
