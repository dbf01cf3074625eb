"""``ExecutorHooks`` registers a plugin written as classes: its kinds, its ``create`` and its
``price``, and names its executor classes for ``overbrainer plugins``; nothing else."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Literal

import pytest

from overbrainer.plugin import (
    Executor,
    ExecutorHooks,
    JobHandle,
    JobPoll,
    RunRecord,
    RunState,
    TargetBase,
    TargetInfo,
)
from overbrainer.plugin.operations import TargetPrice
from overbrainer.plugins import new_manager


class ToyTarget(TargetBase):
    kind: Literal["toy"]


class OtherTarget(TargetBase):
    kind: Literal["other"]


class Toy(Executor):
    """An executor of one run's life and a release of its own."""

    capabilities = frozenset({"release"})

    def describe(self) -> TargetInfo:
        return TargetInfo(device="cpu", local_paths=True)

    def claim(self, run_id: str) -> str:
        return f"/toy/{run_id}"

    def launch(self, run, job) -> JobHandle:
        raise NotImplementedError

    def poll(self, run) -> JobPoll:
        raise NotImplementedError

    def request_snapshot(self, run, reason) -> None:
        raise NotImplementedError

    def cancel(self, run):
        raise NotImplementedError

    def collect(self, run, artifacts, dest: Path) -> list[str]:
        raise NotImplementedError

    def read_log(self, run, offset):
        raise NotImplementedError

    def release(self, run: RunRecord | None, outcome: RunState | None) -> None:
        return


def _manager(*plugins: object):
    manager = new_manager()
    for index, plugin in enumerate(plugins):
        manager.register(plugin, name=f"p{index}")
    return manager


def test_the_adapter_registers_kinds_creates_and_prices_its_own_kinds_only():
    price = TargetPrice(usd_per_hour=1.5, gpu_type="toy")
    adapter = ExecutorHooks(
        Toy, targets={"toy": ToyTarget}, create=lambda *a: Toy(), price=lambda *a: price
    )
    plugins = _manager(adapter)
    assert plugins.kinds == {"toy": ToyTarget}
    hooks = plugins.hook
    toy = hooks.create_executor(name="t", target=ToyTarget(kind="toy"), project=None, run=None)
    assert isinstance(toy, Toy)
    other = OtherTarget(kind="other")
    assert hooks.create_executor(name="o", target=other, project=None, run=None) is None
    assert hooks.estimate_price(name="t", target=ToyTarget(kind="toy"), project=None) == price
    assert hooks.estimate_price(name="o", target=other, project=None) is None


def test_only_the_registration_hooks_are_the_plugins_own():
    """The operations are the core's dispatcher's: the plugin implements none of them."""
    kinds_only = ExecutorHooks(targets={"toy": ToyTarget}, create=lambda *a: Toy())
    with_class = ExecutorHooks(Toy, targets={"toy": ToyTarget}, create=lambda *a: Toy())
    priced = ExecutorHooks(Toy, targets={"toy": ToyTarget}, create=lambda *a: Toy(), price=None)
    for adapter in (kinds_only, with_class, priced):
        (listed,) = [info.hooks for info in _manager(adapter).info()]
        assert listed == ["create_executor", "register_targets"]


def test_targets_without_a_create_function_are_refused():
    with pytest.raises(TypeError, match="ExecutorHooks: targets need a create function"):
        ExecutorHooks(Toy, targets={"toy": ToyTarget})


def test_plugins_lists_each_executor_class_with_what_it_declares():
    plugins = _manager(ExecutorHooks(Toy, targets={"toy": ToyTarget}, create=lambda *a: Toy()))
    (info,) = plugins.info()
    assert info.executors == {"Toy": ["release"]}


def test_a_class_named_by_its_path_is_imported_for_the_listing_only(monkeypatch):
    adapter = ExecutorHooks("toy_executors:Lazy")
    assert repr(adapter) == "ExecutorHooks(toy_executors:Lazy; no kind)"
    plugins = _manager(adapter)  # registering it imports nothing
    module = types.ModuleType("toy_executors")
    module.Lazy = type("Lazy", (Toy,), {"capabilities": frozenset({"release"})})  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "toy_executors", module)
    (info,) = plugins.info()
    assert info.executors == {"Lazy": ["release"]}


def test_a_class_that_cannot_be_imported_is_warned_of_and_the_listing_goes_on(capsys):
    from overbrainer.logs import configure_logging

    configure_logging()
    plugins = _manager(ExecutorHooks("overbrainer_no_such_module:Gone"))
    (info,) = plugins.info()
    assert info.executors == {}
    assert (
        "plugin `p0`: cannot import its executor: No module named 'overbrainer_no_such_module'"
        in capsys.readouterr().err
    )
