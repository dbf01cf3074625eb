"""``ExecutorHooks`` turns executor classes into hooks; ``Hooks`` calls them typed."""

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
from overbrainer.plugins import new_manager

RUN = RunRecord(
    id="demo_20260101-000000", target="t", created="2026-01-01T00:00:00Z", remote_dir="/toy"
)


class ToyTarget(TargetBase):
    kind: Literal["toy"]


class Toy(Executor):
    """Records what it was asked."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def describe(self) -> TargetInfo:
        return TargetInfo(device="cpu", local_paths=True)

    def claim(self, run_id: str) -> str:
        return f"/toy/{run_id}"

    def launch(self, run, job) -> JobHandle:
        raise NotImplementedError

    def poll(self, run) -> JobPoll:
        raise NotImplementedError

    def request_snapshot(self, run, reason) -> None:
        self.calls.append(("snapshot", reason))

    def cancel(self, run):
        raise NotImplementedError

    def collect(self, run, artifacts, dest: Path) -> list[str]:
        raise NotImplementedError

    def read_log(self, run, offset):
        raise NotImplementedError

    def release(self, run, outcome) -> None:
        self.calls.append(("release", outcome))


class SubToy(Toy):
    pass


def _manager(*plugins: object):
    manager = new_manager()
    for index, plugin in enumerate(plugins):
        manager.register(plugin, name=f"p{index}")
    return manager


def test_the_adapter_registers_kinds_creates_and_dispatches_to_methods():
    plugins = _manager(ExecutorHooks(Toy, targets={"toy": ToyTarget}, create=lambda *a: Toy()))
    assert plugins.kinds == {"toy": ToyTarget}
    hooks = plugins.hook
    toy = hooks.create_executor(name="t", target=ToyTarget(kind="toy"), project=None, run=None)
    assert isinstance(toy, Toy)
    assert hooks.claim_run_dir(executor=toy, run_id=RUN.id) == f"/toy/{RUN.id}"
    assert hooks.request_snapshot(executor=toy, run=RUN, reason="deadline") is True
    hooks.release_executor(executor=toy, run=RUN, outcome=RunState.SUCCEEDED)
    hooks.release_executor(executor=toy, run=RUN, outcome="failed")  # a raw caller's string
    assert toy.calls == [
        ("snapshot", "deadline"),
        ("release", RunState.SUCCEEDED),
        ("release", RunState.FAILED),
    ]
    assert isinstance(toy.calls[2][1], RunState)


def test_an_executor_of_another_class_gets_none_and_nothing_is_called():
    plugins = _manager(ExecutorHooks(Toy))
    hooks = plugins.hook
    sub = SubToy()  # a subclass is served only by an adapter that names it
    assert hooks.claim_run_dir(executor=sub, run_id=RUN.id) is None
    assert hooks.request_snapshot(executor=sub, run=RUN, reason="requested") is False
    hooks.release_executor(executor=sub, run=None, outcome=None)
    assert sub.calls == []
    both = _manager(ExecutorHooks(Toy), ExecutorHooks(SubToy)).hook
    both.release_executor(executor=sub, run=None, outcome=None)
    assert sub.calls == [("release", None)]  # once, not once per adapter


def test_only_the_hooks_given_something_to_do_are_listed():
    kinds_only = ExecutorHooks(targets={"toy": ToyTarget}, create=lambda *a: Toy())
    plugins = _manager(kinds_only)
    assert [info.hooks for info in plugins.info()] == [["create_executor", "register_targets"]]


def test_targets_without_a_create_function_are_refused():
    with pytest.raises(TypeError, match="ExecutorHooks: targets need a create function"):
        ExecutorHooks(Toy, targets={"toy": ToyTarget})


def test_a_class_named_by_its_path_is_served_once_its_module_is_loaded(monkeypatch):
    adapter = ExecutorHooks("toy_executors:Lazy")
    plugins = _manager(adapter)
    toy = Toy()
    assert plugins.hook.claim_run_dir(executor=toy, run_id=RUN.id) is None  # not loaded yet
    module = types.ModuleType("toy_executors")
    module.Lazy = type("Lazy", (Toy,), {})  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "toy_executors", module)
    lazy = module.Lazy()  # type: ignore[attr-defined]
    assert plugins.hook.claim_run_dir(executor=lazy, run_id=RUN.id) == f"/toy/{RUN.id}"
    assert repr(adapter) == "ExecutorHooks(toy_executors:Lazy; no kind)"


def test_an_optional_hook_is_implemented_only_where_a_class_overrides_it():
    plugins = _manager(ExecutorHooks(Toy))
    (listed,) = [info.hooks for info in plugins.info()]
    assert "release_executor" in listed  # Toy has its own release
    assert not {"prepare_target", "wait_for_job", "open_shell"} & set(listed)
    assert "poll_job" in listed
    lazy = _manager(ExecutorHooks("not_loaded_yet:Toy"))  # unknown until loaded: all of them
    (listed,) = [info.hooks for info in lazy.info()]
    assert {"prepare_target", "wait_for_job", "open_shell", "release_executor"} <= set(listed)
