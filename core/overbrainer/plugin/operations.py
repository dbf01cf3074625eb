"""The types of the optional operations and of the hooks beside the executor's: for
``open_shell``, ``TargetShell``; for ``estimate_price``, ``TargetPrice``,
``ServedModel`` and ``model_billions`` (a model's size from its name, read as the core
reads it); for
``show_machine_log``, ``MachineLogQuery``; for the serve hooks, ``ServeSpec``,
``ServeHandle`` and ``ServeState``; for ``register_engines``, ``Engine``,
``EngineLaunch`` and ``EngineMetrics``; for the ``watch`` hooks, ``CycleSummary``; a
machine made for a run, ``Container`` (in ``JobHandle``) and ``Launch`` (in
``TargetInfo``)."""

from __future__ import annotations

from overbrainer.cycles import CycleSummary
from overbrainer.engines import Engine, EngineLaunch, EngineMetrics
from overbrainer.job.record import Container
from overbrainer.job.serving import ServedModel, ServeHandle, ServeSpec, ServeState
from overbrainer.job.shell import TargetShell
from overbrainer.job.spec import Launch, MachineLogQuery, TargetPrice
from overbrainer.model_size import model_billions

__all__ = [
    "Container",
    "CycleSummary",
    "Engine",
    "EngineLaunch",
    "EngineMetrics",
    "Launch",
    "MachineLogQuery",
    "ServeHandle",
    "ServeSpec",
    "ServeState",
    "ServedModel",
    "TargetPrice",
    "TargetShell",
    "model_billions",
]
