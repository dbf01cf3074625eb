"""What ``plan`` says of a served provider: its tokens cost nothing, its machine's hours do."""

from __future__ import annotations

from overbrainer.config.model import ROLE_NAMES, HostTarget, Settings


def served_basis_lines(settings: Settings) -> list[str]:
    """One line a served provider the roles use: what it costs, and on what basis."""
    lines = []
    used = {
        role.provider
        for role in (getattr(settings.roles, name) for name in ROLE_NAMES)
        if role is not None
    }
    for name in sorted(used):
        serve = settings.providers[name].serve
        if serve is None:
            continue
        target = settings.targets.get(serve.target)
        price = target.price_per_hour if isinstance(target, HostTarget) else None
        hourly = (
            f"${price:.2f}/h (targets.{serve.target}.price_per_hour)"
            if price
            else f"no price per hour (set targets.{serve.target}.price_per_hour)"
        )
        lines.append(
            f"served: providers.{name} ({serve.engine} {serve.model} on `{serve.target}`) is "
            f"paid by the hour, not the token: {hourly}, recorded in history when it ends; "
            "its hours are not projected yet"
        )
    return lines
