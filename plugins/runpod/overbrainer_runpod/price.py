"""``estimate_price``: what a new run's pod would cost per hour, from Runpod's GPU list.

The pod tries ``gpu_types`` in order: the first in stock on Secure Cloud (else the first
with a price) is the estimate's; ``"auto"`` picks the cheapest that fits, as a run does.
"""

from __future__ import annotations

from overbrainer.plugin import Project, UserError
from overbrainer.plugin.operations import TargetPrice
from overbrainer_runpod.api import api_of
from overbrainer_runpod.pods import estimate_vram_gb, gpu_price, priced_types, stock_of
from overbrainer_runpod.settings import RunpodTarget, account


def estimate(target: RunpodTarget, project: Project) -> TargetPrice:
    """The pod's price: the chosen type's price per GPU x ``gpu_count``."""
    gpus = api_of(*account(project)).gpus(target.gpu_count)
    if target.gpu_types == "auto":
        training = project.settings.training
        vram = target.min_vram_gb or estimate_vram_gb(
            training.base_model if training else None, training.adapter if training else None
        )
        found = priced_types(gpus, vram, target.max_price_per_hour)
        if not found:
            raise UserError(f'gpu_types = "auto": no Secure Cloud GPU type in stock with {vram} GB')
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
    return TargetPrice(price * target.gpu_count, gpu_type, target.gpu_count)
