"""A run's pod as a command reaches it (``PodSession``), and what any of its commands needs
to make and reach a pod of the target (``PodSite``): training's executor and the commands
after training (``after.AfterPod``) both work through them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from shlex import quote as _q

from overbrainer.plugin import Project, UserError
from overbrainer.plugin.files import mkdir_nofollow, write_atomic
from overbrainer.plugin.host import Host, HostError, HostExecutor, HostRuntime
from overbrainer.plugin.operations import ServedModel
from overbrainer_runpod.api import RunpodApi
from overbrainer_runpod.pods import (
    STATE_DIR,
    Placement,
    PodLifecycle,
    auto_gpu_types,
    auto_vram_gb,
    no_auto_type,
)
from overbrainer_runpod.settings import RunpodTarget
from overbrainer_runpod.timing import Timing

HOME_ONLY = ("pod.json", "ssh")
"""What the run directory keeps of its pods: never uploaded to one."""
POD_LOGS = ("boot.log", "watchdog.log", "sshd.log")


@dataclass
class PodSession:
    """A run's pod while this command talks to it: its lifecycle, the connection to it and
    the job protocol over that connection."""

    life: PodLifecycle
    host: Host
    inner: HostExecutor
    launched: bool = False
    lease_at: float = 0.0
    guard_warned: bool = False

    @property
    def run_dir(self) -> str:
        return f"{self.inner.workdir}/{self.life.pod.run_id}"

    def check_venv(self) -> None:
        """Refuse a pod whose image has no Axolotl where the target's ``venv`` says."""
        name, venv = self.inner.name, self.inner.target.venv or ""
        done = self.host.run(f"[ -x {_q(venv)}/bin/python ] && [ -x {_q(venv)}/bin/axolotl ]")
        if done.code != 0:
            raise UserError(
                f"targets.{name}.venv: the pod's image has no Axolotl in {venv} "
                f"(no bin/python and bin/axolotl there): set targets.{name}.image to an "
                f"image that has it, or targets.{name}.venv to where it is"
            )

    def logs_home(self) -> None:
        """The pod's own logs, into ``pod/`` of its lifecycle's directory (``runs/<id>/``,
        ``runs/<id>/after-pod/``), and Runpod's log of it into ``pod/pod.log`` there."""
        where, run_id = self.life.run_dir, self.life.pod.run_id
        into = where / "pod"
        shown = f"runs/{run_id}" + ("" if where.name == run_id else f"/{where.name}") + "/pod"
        mkdir_nofollow(into, shown)  # a link there would take the logs anywhere
        for name in POD_LOGS:
            try:
                done = self.host.run(f'tail -c 4194304 "$HOME/{STATE_DIR}/{name}"')
            except HostError:
                continue
            if done.code == 0:
                write_atomic(into / name, done.stdout, f"{shown}/{name}")
        self.life.drain_log()  # Runpod's log of the pod too, before anything deletes it


@dataclass(frozen=True)
class PodSite:
    """The target's pods as one command makes and reaches them: its name and settings, the
    project, Runpod's API and the timing."""

    name: str
    target: RunpodTarget
    project: Project
    api: RunpodApi
    timing: Timing

    def run_dir(self, run_id: str) -> Path:
        return self.project.runs_dir / run_id

    def placement(self, serve: ServedModel | None = None) -> Placement:
        """Where a new pod may go: the GPU types to try (``"auto"``: those in stock that
        fit the model, the served one for ``serve``) and the data centers."""
        target = self.target
        data_centers: list[str | None] = (
            [None] if target.data_center_ids == "auto" else list(target.data_center_ids)
        )
        if target.gpu_types != "auto":
            return Placement(list(target.gpu_types), data_centers)
        vram, sized = auto_vram_gb(target, self.project, serve)
        types = auto_gpu_types(self.api, target.gpu_count, vram, target.max_price_per_hour)
        if not types:
            raise no_auto_type(vram, sized, target.max_price_per_hour)
        return Placement(types, data_centers, sized)

    def session_on(self, life: PodLifecycle, host: Host) -> PodSession:
        """The pod of ``life``, reached over ``host``, with the job protocol on it."""
        runtime = HostRuntime(venv=self.target.venv, device="gpu")
        inner = HostExecutor(
            self.name, runtime, host, life.pod.workdir or "/workspace/overbrainer",
            env=self.project.env, home_only=HOME_ONLY,
        )  # fmt: skip
        return PodSession(life, host, inner)
