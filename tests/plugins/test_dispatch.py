"""The core's built-in dispatcher answers the operation hooks of any ``Executor`` by calling
its method: a subclass too, optional operations only when declared, after every plugin's
own hook, and in one step from pluggy."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from overbrainer import hookimpl
from overbrainer.errors import UserError
from overbrainer.plugin import Executor, JobHandle, JobPoll, RunRecord, RunState, TargetInfo
from overbrainer.plugin.operations import TargetShell
from overbrainer.plugins import new_manager

RUN = RunRecord(
    id="demo_20260101-000000", target="t", created="2026-01-01T00:00:00Z", remote_dir="/toy"
)


class Toy(Executor):
    """Records what it was asked; declares no optional operation."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []
        self.stack: list[inspect.FrameInfo] = []

    def describe(self) -> TargetInfo:
        return TargetInfo(device="cpu", local_paths=True)

    def claim(self, run_id: str) -> str:
        self.stack = inspect.stack()
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


class SubToy(Toy):
    """A subclass no plugin names."""


class Capable(Toy):
    """Declares every optional operation."""

    capabilities = frozenset({"prepare", "wait", "open_shell", "release"})

    def prepare(self) -> None:
        self.calls.append(("prepare", None))

    def wait(self, run: RunRecord, timeout: float) -> bool | None:
        self.calls.append(("wait", timeout))
        return True

    def open_shell(self, purpose: str, keep_machine: bool) -> TargetShell | None:
        self.calls.append(("open_shell", purpose))
        return None

    def release(self, run: RunRecord | None, outcome: RunState | None) -> None:
        self.calls.append(("release", outcome))


class Quiet(Capable):
    """Inherits its parent's methods and their declaration."""


def test_any_executor_is_served_a_subclass_too():
    hooks = new_manager().hook
    for toy in (Toy(), SubToy()):
        assert hooks.claim_run_dir(executor=toy, run_id=RUN.id) == f"/toy/{RUN.id}"
        assert hooks.describe_target(executor=toy) == TargetInfo(device="cpu", local_paths=True)
        assert hooks.request_snapshot(executor=toy, run=RUN, reason="deadline") is True
        assert toy.calls == [("snapshot", "deadline")]


def test_optional_operations_are_called_only_when_declared():
    hooks = new_manager().hook
    plain = Toy()
    hooks.prepare_target(executor=plain)
    assert hooks.wait_for_job(executor=plain, run=RUN, timeout=1.0) is None  # cannot tell
    assert hooks.open_shell(executor=plain, purpose="export", keep_machine=False) is None
    hooks.release_executor(executor=plain, run=RUN, outcome=RunState.SUCCEEDED)
    assert plain.calls == []
    for capable in (Capable(), Quiet()):
        hooks.prepare_target(executor=capable)
        assert hooks.wait_for_job(executor=capable, run=RUN, timeout=1.0) is True
        hooks.open_shell(executor=capable, purpose="export", keep_machine=False)
        hooks.release_executor(executor=capable, run=RUN, outcome=RunState.SUCCEEDED)
        assert capable.calls == [
            ("prepare", None),
            ("wait", 1.0),
            ("open_shell", "export"),
            ("release", RunState.SUCCEEDED),
        ]


def test_a_class_declares_exactly_the_optional_methods_it_has():
    with pytest.raises(TypeError, match=r"Sly overrides release\(\) without declaring it: add "):

        class Sly(Toy):
            def release(self, run: RunRecord | None, outcome: RunState | None) -> None:
                return

    with pytest.raises(TypeError, match=r"Boastful\.capabilities declares 'wait' but the class"):

        class Boastful(Toy):
            capabilities = frozenset({"wait"})

    with pytest.raises(TypeError, match=r"Odd\.capabilities: unknown operation fly"):

        class Odd(Toy):
            capabilities = frozenset({"fly"})


class Overrider:
    """A plugin whose own hooks answer for the executors it marks, None for the others."""

    @hookimpl
    def claim_run_dir(self, executor: Executor, run_id: str) -> str | None:
        return "/raw" if getattr(executor, "raw", False) else None

    @hookimpl
    def release_executor(
        self, executor: Executor, run: RunRecord | None, outcome: RunState | None
    ) -> None:
        if getattr(executor, "raw", False):
            executor.calls.append(("raw release", outcome))  # type: ignore[attr-defined]


def test_a_plugins_own_hook_answers_before_the_dispatcher():
    plugins = new_manager()
    plugins.register(Overrider(), name="raw")
    hooks = plugins.hook
    marked, plain = Toy(), Toy()
    marked.raw = True  # type: ignore[attr-defined]
    assert hooks.claim_run_dir(executor=marked, run_id=RUN.id) == "/raw"
    assert marked.stack == []  # its method was never called
    assert hooks.claim_run_dir(executor=plain, run_id=RUN.id) == f"/toy/{RUN.id}"
    hooks.release_executor(executor=marked, run=None, outcome=None)
    assert marked.calls == [("raw release", None)]  # once: Toy declares no release


def test_anything_else_gets_none_from_the_dispatcher():
    hooks = new_manager().hook
    stranger = object()
    assert hooks.claim_run_dir(executor=stranger, run_id=RUN.id) is None  # type: ignore[arg-type]
    assert hooks.request_snapshot(executor=stranger, run=RUN, reason="x") is False  # type: ignore[arg-type]


def test_a_call_reaches_the_method_in_two_hops():
    """``Hooks`` method, pluggy, the dispatcher's function, the method: nothing between."""
    toy = Toy()
    new_manager().hook.claim_run_dir(executor=toy, run_id=RUN.id)
    frames = toy.stack[1:]  # the callers of Toy.claim, nearest first
    hooks_at = next(i for i, f in enumerate(frames) if f.filename.endswith("hookcalls.py"))
    between = [f for f in frames[:hooks_at] if "/pluggy/" not in f.filename]
    assert [(Path(f.filename).name, f.function) for f in between] == [
        ("hooks.py", "claim_run_dir")
    ]


class Maker:
    @hookimpl
    def create_executor(self, name, target, project, run):
        return f"executor for {name}"


def test_something_made_that_is_not_an_executor_is_refused_naming_the_target():
    plugins = new_manager()
    plugins.register(Maker(), name="old")
    with pytest.raises(UserError) as raised:
        plugins.hook.create_executor(name="far", target=None, project=None, run=None)
    assert str(raised.value) == (
        "target `far`: its plugin made a str, not an executor (overbrainer.plugin.Executor): "
        "update the plugin"
    )


def test_every_operation_hook_is_dispatched_typed_and_documented():
    """The places the operations are written agree: the spec, the dispatcher, the typed
    ``Hooks`` method and the guide's table of hooks, each with the spec's parameters."""
    from overbrainer import hookspecs
    from overbrainer.hookcalls import Hooks
    from overbrainer.job import hooks as dispatcher

    def parameters(function) -> list[str]:
        return [name for name in inspect.signature(function).parameters if name != "self"]

    specs = {
        name: parameters(spec)
        for name, spec in vars(hookspecs).items()
        if inspect.isfunction(spec) and "executor" in parameters(spec)
    }
    assert len(specs) == 16
    guide = (Path(__file__).parents[2] / "docs" / "plugins.md").read_text()
    for name, params in specs.items():
        assert parameters(getattr(dispatcher, name)) == params, name
        assert parameters(getattr(Hooks, name)) == params, name
        assert f"| `{name}({', '.join(params)})` |" in guide, name
