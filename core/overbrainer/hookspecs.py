"""The executor contract: the hooks a target plugin implements.

Every hook is called with keyword arguments only (pluggy's rule). Implementations must
not give their arguments default values: pluggy treats such arguments as opt-in and does
not pass them. Each ``firstresult`` hook stops at the first non-None result, so an
implementation returns None for an executor (or a target kind) that is not its own.

An executor is an :class:`~overbrainer.job.interface.Executor`. The operation hooks (from
``describe_target`` to ``release_executor``) are answered for every executor by the core's
built-in dispatcher (:mod:`overbrainer.job.hooks`), last, calling the executor's method: a
plugin implements them only to answer before its executor's own method.

The core owns Ctrl-C: ``launch_job`` and ``cancel_job`` are called with SIGINT deferred,
and plugins never catch ``KeyboardInterrupt``. Plugins import only :mod:`overbrainer.plugin`,
which holds every type named here; ``docs/plugins.md`` gives the order of the calls of each
command.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pluggy

if TYPE_CHECKING:
    from pydantic import BaseModel

    from overbrainer.config.model import Settings
    from overbrainer.config.sections import RegisterSection
    from overbrainer.cycles import CycleSummary
    from overbrainer.engines import Engine
    from overbrainer.job.interface import Executor
    from overbrainer.job.record import JobHandle, RunRecord, RunState
    from overbrainer.job.serving import ServedModel, ServeHandle, ServeSpec, ServeState
    from overbrainer.job.shell import TargetShell
    from overbrainer.job.spec import (
        ArtifactSpec,
        JobPoll,
        JobSpec,
        JobStatus,
        LogChunk,
        MachineLogQuery,
        TargetInfo,
        TargetPrice,
    )
    from overbrainer.project import Project

hookspec = pluggy.HookspecMarker("overbrainer")


@hookspec
def register_targets(register: Callable[[str, type[BaseModel]], None]) -> None:
    """Declare the target kinds this plugin provides.

    Called once when the plugins are loaded. Call ``register(kind, model)`` for each
    kind: ``model`` is the pydantic model that validates a ``[targets.NAME]`` table whose
    ``kind`` is that value (subclass ``TargetBase``, which holds ``kind``). Every plugin's
    implementation is called.
    """


@hookspec
def register_settings(register: RegisterSection) -> None:
    """Declare the top-level tables of ``overbrainer.toml`` this plugin reads besides its
    targets' (an account's settings: its API key and URLs, shared by every target).

    Called once when the plugins are loaded. Call ``register(name, model, secrets=(...),
    env_only=(...))`` for each table ``[name]``: ``model`` validates it (subclass
    ``Section``; every key needs a default, since a project may leave the table out);
    ``secrets`` are ``SecretStr`` keys, masked by ``config check``, redacted from every
    log and record and, like ``env_only`` keys, refused in the file: they come from
    ``OVERBRAINER_NAME__KEY`` or ``.env``. Read the table with
    ``project.settings.section(name, model)``. Every plugin's implementation is called.
    """


@hookspec
def register_engines(register: Callable[[Engine], None]) -> None:
    """Declare the engines this plugin provides (what ``serve.engine`` names): call
    ``register(engine)`` with an ``Engine`` instance for each. Called once when the plugins
    are loaded; every plugin's implementation is called, and the first to register a name
    keeps it.
    """


@hookspec(firstresult=True)
def create_executor(
    name: str, target: BaseModel, project: Project, run: RunRecord | None
) -> Executor | None:
    """Connect to, or prepare to reach, the target ``name`` configured as ``target``.

    ``run`` is None for a new run, and the run's record when a later command (attach,
    stop, cancel, logs) needs its job again, so that a machine made for one run can be
    found. Return an ``Executor`` (the core refuses anything else), or None when ``target``
    is not of a kind this plugin registered. Raise ``UserError`` when the target cannot
    be reached. Stops at the first non-None result.
    """


@hookspec(firstresult=True)
def describe_target(executor: Executor) -> TargetInfo | None:
    """What the core must know of the executor's target before a run is prepared: its
    device (CPU or GPU), whether the job sees this machine's files, whether its machine is
    made for one run, and the channel its secrets take.

    Called once per new run, after ``create_executor``; a probe (``nvidia-smi``) belongs
    here. Stops at the first non-None result.
    """


@hookspec(firstresult=True)
def estimate_price(
    name: str, target: BaseModel, project: Project, serve: ServedModel | None
) -> TargetPrice | None:
    """What a new run's machine on the target ``name`` (configured as ``target``) would
    cost per hour, and its GPU type, before anything is created: ``overbrainer plan``'s
    training estimate, and the budget's check before ``train`` creates a machine.

    ``serve``: the model and GPUs of a serve the machine would be made for (``plan``'s
    line of a served provider, the budget's check before a serve starts); None for a
    run's. A target that picks its machine by the model's size sizes it by the served
    model then; an implementation that does not take ``serve`` prices a run's machine.

    Return None for a target of a kind that is not yours, or one that costs nothing
    (this machine, your own server). Ask the provider's price list, nothing more: no
    machine is made here. Raise ``UserError`` when the price cannot be learnt (no key).
    Stops at the first non-None result.
    """


@hookspec
def prepare_target(executor: Executor) -> None:
    """Make the target ready for a new run before it is created: install Axolotl on first
    use, run a setup command. Show progress with loguru (``logger.info``); raise
    ``UserError`` with the last lines of output when it fails.

    Every plugin's implementation is called; ignore executors that are not your own.
    """


@hookspec(firstresult=True)
def claim_run_dir(executor: Executor, run_id: str) -> str | None:
    """Reserve run ``run_id`` on the target and return where its job will live there (an
    absolute path, or any string that locates it: ``ray://cluster/overbrainer/ID``).

    The claim is exclusive: return ``""`` when another owner already holds that id there,
    so the core tries the next id. Stops at the first non-None result.
    """


@hookspec(firstresult=True)
def launch_job(executor: Executor, run: RunRecord, job: JobSpec) -> JobHandle | None:
    """Copy ``job.local_dir`` to where the job runs and start ``job.command()`` there,
    detached (it outlives this process).

    The secrets go through the target's declared channel, never a command line. Return
    the handle recorded in ``run.json``. Called with SIGINT deferred: a job started but
    not recorded would be lost. Stops at the first non-None result.
    """


@hookspec(firstresult=True)
def poll_job(executor: Executor, run: RunRecord) -> JobPoll | None:
    """Look at the job of ``run`` once: its status, the complete ``metrics.jsonl`` lines
    written since the previous poll of this executor, a pending snapshot request and a
    saved snapshot.

    Called every two seconds while a run is followed; a plugin with periodic duties (a
    pod's lease, a cost cap) does them here. Raise ``TransientError`` on a failure worth
    retrying: the core retries five times before it detaches. Stops at the first non-None
    result.
    """


@hookspec(firstresult=True)
def wait_for_job(executor: Executor, run: RunRecord, timeout: float) -> bool | None:
    """Wait up to ``timeout`` seconds for the job of ``run`` to change state (it ended, was
    cancelled, a snapshot was asked for or saved), so that the core polls at once rather
    than at its next interval. Return True when it changed, False at the timeout.

    Optional (the ``Executor`` capability ``"wait"``): None, or no implementation, and the
    core sleeps between polls. An implementation waits on events (inotify, a long-lived
    stream), never by polling more often. Stops at the first non-None result.
    """


@hookspec(firstresult=True)
def request_snapshot(executor: Executor, run: RunRecord, reason: str) -> bool | None:
    """Ask the job of ``run`` to save a checkpoint at the end of its current step and stop.

    Either write ``snapshot.request`` holding ``reason`` in the job directory (atomically;
    writing again changes only the reason), or send the job's runner SIGTERM, which it
    turns into the same request (reason ``requested``). Return True once asked. Stops at
    the first non-None result.
    """


@hookspec(firstresult=True)
def cancel_job(executor: Executor, run: RunRecord) -> JobStatus | None:
    """Stop the job of ``run`` now, its container or process group and every process in it.

    Idempotent, and never signals a job that already finished, nor a process that is not
    the job's (a stale pid): return the status it ended with then (``exited N``), else
    ``cancelled``. Called with SIGINT deferred. Stops at the first non-None result.
    """


@hookspec(firstresult=True)
def collect_artifacts(
    executor: Executor, run: RunRecord, artifacts: ArtifactSpec, dest: Path
) -> list[str] | None:
    """Bring ``artifacts`` of ``run`` home into ``dest`` and verify them.

    Check every file against a SHA-256 manifest: the runner's ``manifest.sha256`` for
    what it covers, one computed on the target for the rest. Raise ``MissingArtifact`` for
    a required path that is not there and ``ArtifactMismatch`` for a missing, extra or
    differing file. Return the relative paths retrieved. Called once for a finished run,
    twice for a stopped one (its results, then its checkpoint). Stops at the first non-None
    result.
    """


@hookspec(firstresult=True)
def read_job_log(executor: Executor, run: RunRecord, offset: int) -> LogChunk | None:
    """The job's log (what its runner and stages printed) from byte ``offset``: at most a
    few MiB, and empty data when nothing is new.

    Used by ``runs logs`` on a run whose log is not home yet, and by ``--follow``. Stops at
    the first non-None result.
    """


@hookspec
def on_config_change(old: Settings, new: Settings, changed_keys: list[str]) -> None:
    """``overbrainer watch`` read a changed configuration: ``changed_keys`` are the dotted
    keys whose values differ (``training.learning_rate``). Called before the cycle the
    change starts. Every plugin's implementation is called.
    """


@hookspec
def on_cycle_end(summary: CycleSummary) -> None:
    """A cycle of ``overbrainer watch`` ended: what changed, what ran, how long, the cost,
    the error that ended it and the training run it ended with. Post a message, push the
    model... Every plugin's implementation is called.
    """


@hookspec(firstresult=True)
def open_shell(executor: Executor, purpose: str, keep_machine: bool) -> TargetShell | None:
    """A shell on the executor's target for the commands after training (``export``,
    ``compare``): its POSIX host, its runtime's Python and its work directory. They run
    their own scripts there, in the run's directory, and fetch what they made.

    ``purpose`` names the command (for progress lines); ``keep_machine`` is its
    ``--keep-machine`` (alias ``--keep-pod``): a machine made for this command is kept at
    ``release_executor`` instead of deleted. A target whose machine is gone after training
    may make one here (``TargetShell.run_dir`` then says where the run's directory is on it).

    Return None when the target cannot give one (those commands then refuse it). Stops at
    the first non-None result.
    """


@hookspec(firstresult=True)
def start_serve(executor: Executor, spec: ServeSpec) -> ServeHandle | None:
    """Start ``spec.argv`` on the executor's target as a long-lived process listening on
    the target's loopback, under a watchdog that ends it after ``spec.idle_seconds``
    without a connection; detached (it outlives this process). Return its handle, recorded
    by the core before anything else, so a later command can end it.

    Optional (the ``Executor`` capability ``"serve"``): None, or no implementation, and
    the target cannot serve. Called with SIGINT deferred. Stops at the first non-None
    result.
    """


@hookspec(firstresult=True)
def reach_serve(executor: Executor, handle: ServeHandle) -> str | None:
    """A base URL (``http://127.0.0.1:PORT``) on this machine that reaches the served
    process of ``handle``: its own port on the local target, a port forwarded over the
    target's transport for a remote one (closed at ``release_executor``). Return ``""``
    when the process is gone. Optional (capability ``"serve"``). Stops at the first
    non-None result.
    """


@hookspec(firstresult=True)
def serve_state(executor: Executor, handle: ServeHandle) -> ServeState | None:
    """Where the served process of ``handle`` stands: ``UP`` under its watchdog,
    ``UNWATCHED`` when its watchdog is gone but the process runs on (no idle limit ends
    it), ``GONE``. Optional (capability ``"serve"``). Stops at the first non-None result.
    """


@hookspec(firstresult=True)
def stop_serve(executor: Executor, handle: ServeHandle, keep_log: bool) -> bool | None:
    """End the served process of ``handle`` and its watchdog, every process of its group
    (the watchdog's, even when the watchdog itself was killed): TERM, then KILL after a
    grace; then remove its files on the target, all but its log when ``keep_log`` (a
    serve ended because it never answered, whose log the user is shown). Idempotent, and
    never signals a process that is not its own (a stale pid): True when it was running,
    False when it was gone already. Optional (capability ``"serve"``); called with SIGINT
    deferred. Stops at the first non-None result.
    """


@hookspec
def release_executor(executor: Executor, run: RunRecord | None, outcome: RunState | None) -> None:
    """Close what ``executor`` holds; for a machine made for one run, delete it once its
    results are home (unless the job asked to keep it).

    ``outcome`` is the run's state when the command ends, or None when it only detached.
    Every plugin's implementation is called; ignore executors that are not your own.
    """


@hookspec
def register_commands(register: Callable[[Any], None]) -> None:
    """Add command groups to the ``overbrainer`` command line: call ``register(command)``
    with a click command or group (``overbrainer pod`` of the runpod target).

    Called only when a command name the core does not know is asked for, so that
    ``overbrainer --help`` loads no plugin. Every plugin's implementation is called.
    """


@hookspec(firstresult=True)
def show_machine_log(
    project: Project, run: RunRecord, query: MachineLogQuery
) -> Literal[True] | None:
    """``runs logs RUN --pod``: print the own log of the machine a target made for ``run``,
    what the run directory keeps of it, then what its provider still has; with
    ``query.follow``, keep printing until the machine is gone.

    Lines go to standard output, redacted and each on one line; notes (the machine is
    gone, its provider cannot be reached) to standard error. The core owns Ctrl-C and a
    closed standard output (both end the command quietly). Return None when ``run`` did
    not run on a machine of this plugin (the core then refuses ``--pod``), else True (no
    other value means anything).
    Stops at the first non-None result.
    """
