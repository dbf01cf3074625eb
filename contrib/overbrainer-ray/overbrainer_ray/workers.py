"""More than one worker: Axolotl's Ray Train integration, switched on in ``axolotl.yaml``.

With ``use_ray`` Axolotl's ``train`` builds a Ray Train ``TorchTrainer`` of
``ray_num_workers`` workers, each reserving ``resources_per_worker`` on the cluster; the
job's entrypoint is their driver (Ray sets ``RAY_ADDRESS`` for it, so it joins the same
cluster). The Python of the job needs ``ray[train]`` of the cluster's Ray version beside
Axolotl.
"""

from __future__ import annotations


def ray_train_settings(workers: int, device: str) -> str:
    """Lines appended to ``axolotl.yaml`` (the core writes none of these keys)."""
    resource = "GPU" if device == "gpu" else "CPU"
    return (
        "\n# Added by the ray target: Axolotl's Ray Train integration.\n"
        "use_ray: true\n"
        f"ray_num_workers: {workers}\n"
        f"resources_per_worker:\n  {resource}: 1\n"
    )
