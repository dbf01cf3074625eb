"""``estimate_price``: what a new run's pod would cost per hour, from Runpod's GPU list.

The pod tries ``gpu_types`` in order: the first in stock on Secure Cloud (else the first
with a price) is the estimate's; ``"auto"`` picks the cheapest that fits, as a run does
(a serve's pod: the cheapest that fits its served model, as the serve does).
"""

from __future__ import annotations

from overbrainer.plugin import Project, UserError
from overbrainer.plugin.operations import ServedModel, TargetPrice
from overbrainer_runpod.api import api_of
from overbrainer_runpod.pods import (
    auto_vram_gb,
    gpu_price,
    no_auto_type,
    priced_types,
    stock_of,
)
from overbrainer_runpod.settings import RunpodTarget, account


def estimate(target: RunpodTarget, project: Project, serve: ServedModel | None) -> TargetPrice:
    """The pod's price: the chosen type's price per GPU x ``gpu_count`` (a serve's
    ``serve.gpus``); ``"auto"`` sizes a serve's pod by its served model."""
    count = (serve.gpus if serve else None) or target.gpu_count
    gpus = api_of(*account(project)).gpus(count)
    if target.gpu_types == "auto":
        vram, sized = auto_vram_gb(target, project, serve)
        found = priced_types(gpus, vram, target.max_price_per_hour)
        if not found:
            raise no_auto_type(vram, sized, target.max_price_per_hour)
        price, gpu_type = found[0]
    else:
        known = {str(gpu.get("id")): gpu for gpu in gpus}
        listed = [(name, known[name]) for name in target.gpu_types if name in known]
        priced = [(name, gpu) for name, gpu in listed if gpu_price(gpu) is not None]
        in_stock = [(name, gpu) for name, gpu in priced if stock_of(gpu)]
        if not priced:
            raise UserError(f"Runpod lists no price for gpu_types {', '.join(target.gpu_types)}")
        gpu_type, gpu = (in_stock or priced)[0]
        price = gpu_price(gpu) or 0.0
    return TargetPrice(price * count, gpu_type, count)
