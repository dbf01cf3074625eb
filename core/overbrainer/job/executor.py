"""The job protocol on a POSIX host: what the ``local`` and ``ssh`` targets share.

A transport supplies a :class:`~overbrainer.job.host.Host`; ``HostExecutor`` does the rest
(preparation, claim, spawn of the runner, status, snapshot request, cancel, verified
retrieval, logs); it is an :class:`~overbrainer.job.interface.Executor`, and the core's
built-in plugin (:mod:`overbrainer.job.hooks`) routes every hook call for one here. A
target kind on a POSIX host so needs only ``register_targets`` and ``create_executor``.
"""

from __future__ import annotations

import fnmatch
import os
import re
import secrets as random_tokens
import shlex
import shutil
import time
from collections import deque
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import IO

from loguru import logger

from overbrainer import files
from overbrainer.config.runtime import HostRuntime
from overbrainer.errors import MissingArtifact, UserError
from overbrainer.job import install, layout, scripts, serving, wire
from overbrainer.job.host import Host, HostError
from overbrainer.job.interface import Executor
from overbrainer.job.manifest import Manifest, covered, parse_manifest, select, verify
from overbrainer.job.metrics import complete_lines
from overbrainer.job.record import Container, JobHandle, RunRecord, RunState
from overbrainer.job.serving import ServeHandle, ServeSpec, ServeState
from overbrainer.job.shell import TargetShell
from overbrainer.job.spec import (
    ArtifactSpec,
    JobPoll,
    JobSpec,
    JobStatus,
    Launch,
    LogChunk,
    TargetInfo,
)
from overbrainer.redact import LineRedactor, printable

CONTAINER_ROOT = "/workspace/run"
DEFAULT_IMAGE = "axolotlai/axolotl:main-latest"
PID_WAIT_S = 30.0
MANIFEST_CAP = 64 << 20
LOG_CHUNK = 1 << 20


class HostExecutor(Executor):
    """Runs jobs of the target ``name`` on ``host``, in run directories under ``workdir``.

    ``target``: the target's runtime keys (``HostTarget.host_runtime()``, or a
    ``HostRuntime`` made by a target of another shape); ``setup_dir``: where ``setup`` runs
    (default: the work directory); ``env``: overbrainer's environment, from which
    ``pass_env`` takes what the job gets besides its secrets; ``home_only``: names of the
    run directory the target keeps at home besides ``layout.HOME_ONLY`` (its own records
    of the machine), never uploaded.
    """

    capabilities = frozenset({"prepare", "wait", "open_shell", "release", "serve"})

    def __init__(
        self,
        name: str,
        target: HostRuntime,
        host: Host,
        workdir: str,
        *,
        setup_dir: str | None = None,
        env: Mapping[str, str] | None = None,
        home_only: tuple[str, ...] = (),
    ) -> None:
        self.name = name
        self.target = target
        self.host = host
        self.workdir = workdir
        self.setup_dir = setup_dir
        self.env = dict(env or {})
        self.home_only = (*layout.HOME_ONLY, *home_only)
        self._offsets: dict[str, int] = {}

    @cached_property
    def root(self) -> str:
        """The absolute, symlink-free work directory on the host (created if needed)."""
        return self.host.check(scripts.workdir_script(self.workdir)).strip().splitlines()[-1]

    @cached_property
    def has_gpu(self) -> bool:
        return self.host.check(scripts.gpu_script()).strip() == "gpu"

    @property
    def cpu_only(self) -> bool:
        """Whether jobs train on the CPU: as the target says, or for lack of a GPU."""
        return self.target.device == "cpu" or (self.target.device == "auto" and not self.has_gpu)

    @property
    def container(self) -> bool:
        return self.target.runtime == "docker"

    def describe(self) -> TargetInfo:
        """A job here sees this machine's files when the host is local and not a container;
        with ``gpus``, Axolotl runs in one process a GPU (``"all"``: counted now)."""
        return TargetInfo(
            device="cpu" if self.cpu_only else "gpu",
            local_paths=self.host.local and not self.container,
            launch=self._launch(),
        )

    def _launch(self) -> Launch | None:
        gpus = self.target.gpus
        if gpus is None:
            return None
        shown = str(gpus) if isinstance(gpus, int) else '"all"'
        setting = f"targets.{self.name}.gpus = {shown}"
        if self.cpu_only:
            why = "device = cpu" if self.target.device == "cpu" else "no GPU found: no nvidia-smi"
            raise UserError(
                f"{setting}, but this target trains on the CPU ({why}): remove gpus, or "
                "train on a machine with GPUs"
            )
        count = self._gpus_asked(gpus, setting) if isinstance(gpus, int) else self._gpu_count()
        if count < 1:
            raise UserError(
                f"{setting}: the machine shows no GPU (nvidia-smi -L, CUDA_VISIBLE_DEVICES)"
            )
        preset = self.target.deepspeed or self.target.fsdp
        if preset is not None and count < 2:
            raise UserError(
                f'{setting}: the machine shows 1 GPU, and the preset "{preset}" shards '
                "across several: remove it, or train on a machine with more GPUs"
            )
        return Launch(count, deepspeed=self.target.deepspeed, fsdp=self.target.fsdp)

    def _gpus_asked(self, gpus: int, setting: str) -> int:
        """``gpus``, once the machine shows that many: fewer is refused before a run starts
        (its ranks would wait for GPUs that are not there); none counted (no nvidia-smi: a
        ROCm machine, a container without it) is trusted, with a warning."""
        if gpus < 2:
            return gpus
        seen = self._gpu_count()
        if seen == 0:
            logger.warning(
                f"{setting}: the GPUs cannot be counted here (no nvidia-smi, no "
                "CUDA_VISIBLE_DEVICES): trusting the setting"
            )
        elif seen < gpus:
            plural = "GPU" if seen == 1 else "GPUs"
            raise UserError(
                f"{setting}, but the machine shows {seen} {plural} (nvidia-smi -L, "
                f'CUDA_VISIBLE_DEVICES): set gpus = {seen} or gpus = "all", or train on a '
                "machine with more"
            )
        return gpus

    def _gpu_count(self) -> int:
        text = self.host.check(scripts.gpu_count_script()).strip()
        return int(text) if text.isdigit() else 0

    def claim(self, run_id: str) -> str:
        """Reserve the run's directory; "" when another owner holds that id on the host."""
        run_dir = f"{self.root}/{run_id}"
        token = random_tokens.token_hex(16)
        answer = self.host.check(scripts.claim_script(run_dir, token)).strip()
        return run_dir if answer == "claimed" else ""

    def prepare(self, program: str = "axolotl") -> None:
        """Make the host ready for a new run: Axolotl installed (on first use, when the
        target says how), then the target's ``setup`` command."""
        if not self.container and not self._has(program):
            if self.target.install is None:
                self._missing(program)
            self._stream("install", self._install_script(), f"targets.{self.name}.install failed")
            if not self._has(program):
                self._missing(program)
        if self.target.setup is not None:
            self._stream("setup", self._setup_script(), f"targets.{self.name}.setup failed")

    def _has(self, program: str) -> bool:
        return self.host.run(f"command -v {self._program(program)} >/dev/null 2>&1\n").code == 0

    def _missing(self, program: str) -> None:
        if self.target.venv:
            raise UserError(
                f"targets.{self.name}.venv: {self.target.venv} has no bin/{program}: install "
                f"Axolotl there, or set targets.{self.name}.install to have it installed"
            )
        raise UserError(
            f"target `{self.name}`: `{program}` is not on PATH: set targets.{self.name}.venv "
            "to a venv that holds Axolotl"
        )

    def _venv_path(self) -> str:
        return scripts.home_path(self.target.venv or "")

    def _install_script(self) -> str:
        return install.install_script(
            self._venv_path(),
            str(self.target.venv),
            [shlex.quote(part) for part in shlex.split(self.target.install or "")],
        )

    def _setup_script(self) -> str:
        where = shlex.quote(self.setup_dir) if self.setup_dir else shlex.quote(self.root)
        path = (
            f'export PATH={self._venv_path()}/bin:"$PATH"\n'
            if self.target.venv and not self.container
            else ""
        )
        return f"set -e\ncd {where}\n{path}{self.target.setup} 2>&1\n"

    def _stream(self, what: str, script: str, failure: str) -> None:
        """Run ``script`` on the host, showing its progress as it comes.

        Milestones (pip's and uv's) and the last line are shown, pip's ``Collecting`` lines
        as one count at most every ``PROGRESS_S``; the whole output goes to a log file on
        this machine (``install_log``), and its last lines are quoted when the script fails.
        """
        tail: deque[str] = deque(maxlen=15)
        started = time.monotonic()
        counted = _Count(what, started)
        kept = _OutputLog(what, self.name)
        try:
            with self.host.stream_out(script) as stream:
                for raw in stream:
                    line = printable(raw.decode("utf-8", "replace").rstrip("\n"))
                    if not line:
                        continue
                    tail.append(line)
                    kept.write(line)
                    if line.startswith("Collecting "):
                        counted.collected()
                        logger.debug(f"{what}: {line}")
                        continue
                    shown = _shortened(line)
                    logger.log("INFO" if _milestone(line) else "DEBUG", f"{what}: {shown}")
        except HostError as error:
            shown = "".join(f"\n  {line}" for line in tail)
            where = f"\n  (the whole output: {kept.path})" if kept.path else ""
            raise UserError(f"{failure}: {error}{shown}{where}") from None
        finally:
            kept.close()
        if tail and not _milestone(tail[-1]) and not _UV_LISTED.match(tail[-1]):
            logger.info(f"{what}: {_shortened(tail[-1])}")
        collected = f" ({counted.count} packages collected)" if counted.count else ""
        logger.info(f"{what}: done in {_elapsed(time.monotonic() - started)}{collected}")

    # The job.

    def launch(self, run: RunRecord, job: JobSpec) -> JobHandle:
        """Write ``job.sh``, upload the run directory, spawn the wrapper, read its pid."""
        root = run.remote_dir
        (job.local_dir / "job.sh").write_text(self.job_script(run, job), encoding="utf-8")
        self.host.check(scripts.clear_stale_script(root))
        if not self.host.same_place(job.local_dir, root):
            self.host.upload(job.local_dir, root, skip=self.home_only)
        token = random_tokens.token_hex(16)
        env = {name: value.get_secret_value() for name, value in job.secrets.items()}
        env.update(self._passed_env())
        env[wire.TOKEN_VAR] = token
        self.host.spawn(
            scripts.wrapper(root), cwd=root, log=f"{root}/{layout.JOB_LOG}", secrets=env
        )
        pid = self._wait_for_pid(root)
        container = (
            Container(engine=self._engine, name=container_name(run.id)) if self.container else None
        )
        return JobHandle(dir=root, pid=pid, container=container, token=token)

    def _passed_env(self) -> dict[str, str]:
        """What ``pass_env`` names of overbrainer's environment (never its own settings)."""
        patterns = self.target.pass_env
        return {
            key: value
            for key, value in self.env.items()
            if any(fnmatch.fnmatchcase(key, pattern) for pattern in patterns)
            and not key.startswith(("OVERBRAINER_", "VAULT_"))
        }

    def _wait_for_pid(self, root: str) -> int:
        deadline = time.monotonic() + PID_WAIT_S
        while True:
            data = self.host.read_range(f"{root}/{layout.JOB_PID}", 0, 32)
            text = data.decode("ascii", "replace").strip()
            if text.isdigit() and int(text) > 1:
                return int(text)
            if time.monotonic() > deadline:
                raise HostError(f"the job did not start: no job.pid after {PID_WAIT_S:.0f} s")
            time.sleep(0.05)

    def job_script(self, run: RunRecord, job: JobSpec) -> str:
        """``job.sh``: the runner, with the venv's python (natively) or in a container."""
        q = shlex.quote
        if self.container:
            return self._container_script(run, job)
        python = (
            scripts.home_path(f"{self.target.venv}/bin/python") if self.target.venv else "python3"
        )
        command = " ".join([python, *(q(arg) for arg in job.command()[1:])])
        return (
            f"# the job of run {job.run_id}, written by overbrainer\n"
            f"cd {q(run.remote_dir)} || exit 1\n"
            f"exec {command}\n"
        )

    def _container_script(self, run: RunRecord, job: JobSpec) -> str:
        q = shlex.quote
        engine = self._engine
        gpu: list[str] = []
        if not self.cpu_only:
            gpu = ["--gpus", "all"] if engine == "docker" else ["--device", "nvidia.com/gpu=all"]
        args = [
            engine,
            "run",
            "--rm",
            "--name",
            container_name(run.id),
            *gpu,
            "--ipc=host",
            "-v",
            f"{run.remote_dir}:{CONTAINER_ROOT}",
            "-w",
            CONTAINER_ROOT,
        ]
        for name in sorted({*job.secrets, *self._passed_env()}):
            args += ["-e", name]  # the value comes from the wrapper's environment
        command = " ".join(q(arg) for arg in args)
        cache = '-v "$HOME/.cache/huggingface:/root/.cache/huggingface"'
        image = q(self.target.image or DEFAULT_IMAGE)
        python = job.command()[0]
        runner = f"{q(python)} {q(f'{CONTAINER_ROOT}/{layout.RUNNER}')}"
        return (
            f"# the job of run {job.run_id}, in a container, written by overbrainer\n"
            f"cd {q(run.remote_dir)} || exit 1\n"
            'mkdir -p "$HOME/.cache/huggingface"\n'
            f"exec {command} {cache} {image} {runner}\n"
        )

    @property
    def _engine(self) -> str:
        return self.target.engine or "docker"

    def _program(self, name: str) -> str:
        if self.container or not self.target.venv:
            return shlex.quote(name)
        return scripts.home_path(f"{self.target.venv}/bin/{name}")

    # Following.

    def poll(self, run: RunRecord) -> JobPoll:
        """One look at the job, with the metrics lines written since the last one."""
        offset = self._offsets.get(run.id, 0)
        token = run.job.token if run.job is not None else None
        done = self.host.run(wire.status_script(self.run_root(run), offset, token), timeout=60)
        if done.code != 0:
            raise HostError(done.stderr.decode("utf-8", "replace").strip() or "status failed")
        status, request, snapshot, machine, size, chunk = wire.parse_status(done.stdout)
        if size < 0:
            return JobPoll(status, (), request, snapshot, machine)  # the metrics next time
        if size < offset:
            # metrics.jsonl shrank (rewritten): start over rather than skip lines.
            offset = 0
            chunk = b""
        lines, used = complete_lines(chunk, capped=len(chunk) >= wire.METRICS_CAP)
        self._offsets[run.id] = offset + used
        return JobPoll(status, tuple(lines), request, snapshot, machine)

    def wait(self, run: RunRecord, timeout: float) -> bool | None:
        """Until the job changes state or ``timeout`` passes; None: poll instead."""
        return self.host.wait_for_change(self.run_root(run), timeout)

    def request_snapshot(self, run: RunRecord, reason: str) -> None:
        self.host.check(wire.request_script(self.run_root(run), reason))

    def cancel(self, run: RunRecord) -> JobStatus:
        container = None
        if run.job is not None and run.job.container is not None:
            container = _own_container(run, run.job.container)
        pid = run.job.pid if run.job is not None else None
        token = run.job.token if run.job is not None else None
        script = wire.cancel_script(self.run_root(run), pid, container, token)
        done = self.host.run(script, timeout=120)
        text = done.text().strip().splitlines()
        if done.code != 0:
            raise UserError(
                f"cannot cancel the job of run {run.id}: {text[-1] if text else done.code}"
            )
        return wire.status_line(text[-1])

    def collect(self, run: RunRecord, artifacts: ArtifactSpec, dest: Path) -> list[str]:
        """Download ``artifacts`` into ``dest`` and verify them: against the runner's
        manifest for what it covers, against one computed now for the rest."""
        root = self.run_root(run)
        manifest = self._manifest(root, artifacts)
        for required in artifacts.required:
            if not any(p == required or p.startswith(required + "/") for p in manifest):
                raise MissingArtifact(required)
        if not self.host.same_place(dest, root):
            for path in artifacts.paths:
                _remove(dest / path)
            self.host.download(root, sorted(manifest), dest)
            verify(manifest, dest, artifacts.paths, artifacts.exclude)
        logger.debug(f"retrieved {len(manifest)} file(s) of run {run.id}")
        return sorted(manifest)

    def _manifest(self, root: str, artifacts: ArtifactSpec) -> Manifest:
        written = self.host.read_range(f"{root}/{layout.MANIFEST_FILE}", 0, MANIFEST_CAP)
        by_runner = parse_manifest(written) if written else None
        rest = tuple(p for p in artifacts.paths if by_runner is None or not covered(p))
        manifest = (
            {} if by_runner is None else select(by_runner, artifacts.paths, artifacts.exclude)
        )
        if rest:
            listed = self.host.run(
                scripts.manifest_script(root, rest, artifacts.exclude), timeout=3600
            )
            if listed.code != 0:
                detail = listed.stderr.decode("utf-8", "replace").strip().splitlines()
                raise HostError(
                    "cannot list the job's files on the target: "
                    + (detail[-1] if detail else f"exit code {listed.code}")
                )
            manifest.update(parse_manifest(listed.stdout))
        return manifest

    def read_log(self, run: RunRecord, offset: int) -> LogChunk:
        data = self.host.read_range(f"{self.run_root(run)}/{layout.JOB_LOG}", offset, LOG_CHUNK)
        return LogChunk(data, offset + len(data))

    def run_root(self, run: RunRecord) -> str:
        """``run.remote_dir``, on this machine only when it lies in the work directory: a
        record copied from another project, or edited, must not point polls, cancels and
        downloads at any other directory here."""
        if self.host.local:
            files.own_path(run.remote_dir, Path(self.root), f"remote_dir of run {run.id}")
        return run.remote_dir

    def shell(self) -> TargetShell:
        """The host with the runtime's Python, for export and compare (native runtimes
        only: a container's Python is not reachable by a plain script)."""
        if self.container:
            raise UserError(
                f"target `{self.name}` runs Axolotl in a container: export and compare need a "
                "native runtime (a venv) on it"
            )
        python = (
            scripts.home_path(f"{self.target.venv}/bin/python") if self.target.venv else "python3"
        )
        return TargetShell(self.host, python, self.root)

    def open_shell(self, purpose: str, keep_machine: bool) -> TargetShell:
        return self.shell()

    # Serving (docs/serving.md): an engine under its watchdog, in ``.serve/ID`` of the work
    # directory, on the host's loopback.

    def serve(self, spec: ServeSpec) -> ServeHandle:
        """Start the watchdog and its engine detached; the handle once its pid is written."""
        bin_dir = self._bin_dir()
        probe = spec.probe(bin_dir) if spec.probe is not None else None
        if probe is not None and self.host.run(probe).code != 0:
            venv = self.target.venv
            where = f"targets.{self.name}.venv ({venv})" if venv else "the target's PATH"
            hint = f": install {spec.install} there" if spec.install else ""
            raise UserError(
                f"target `{self.name}`: the engine is not installed in {where} (this was "
                f"checked: {probe}){hint}"
            )
        directory = f"{self.root}/.serve/{spec.serve_id}"
        self.host.check(f"mkdir -p {shlex.quote(directory)}\n")
        self.host.write_file(f"{directory}/{serving.WATCHDOG}", serving.watchdog_source())
        port = spec.port or int(self.host.check(serving.free_port_script()).strip())
        argv = spec.command(port, bin_dir)
        script = serving.launch_script(directory, port, spec.idle_seconds, argv)
        self.host.spawn(
            script, cwd=directory, log=f"{directory}/{serving.LOG_FILE}", secrets=self._passed_env()
        )
        deadline = time.monotonic() + PID_WAIT_S
        while True:
            text = self.host.read_range(f"{directory}/{serving.PID_FILE}", 0, 32).decode(
                "ascii", "replace"
            ).strip()
            if text.isdigit() and int(text) > 1:
                return ServeHandle(spec.serve_id, directory, int(text), port)
            if time.monotonic() > deadline:
                raise HostError(f"the watchdog did not start: no pid after {PID_WAIT_S:.0f} s")
            time.sleep(0.05)

    def _bin_dir(self) -> str:
        """The runtime's ``VENV/bin/`` as an absolute path (a venv is home-relative unless
        absolute), or "" for PATH."""
        venv = self.target.venv
        if not venv:
            return ""
        if not venv.startswith("/"):
            home = self.host.check('printf %s "$HOME"\n').strip()
            venv = f"{home}/{venv.removeprefix('~').lstrip('/')}"
        return f"{venv.rstrip('/')}/bin/"

    def reach(self, handle: ServeHandle) -> str:
        """``http://127.0.0.1:PORT`` reaching the engine here; "" when its watchdog is gone."""
        if self.serve_state(handle) is ServeState.GONE:
            return ""
        return f"http://127.0.0.1:{self.host.forward(handle.port)}"

    def serve_state(self, handle: ServeHandle) -> ServeState:
        """Its watchdog's pid running its script, else a process of its group in its
        directory (the engine, its watchdog killed), else gone."""
        return ServeState(self.host.check(serving.state_script(handle)).strip())

    def end_serve(self, handle: ServeHandle, keep_log: bool) -> bool:
        done = self.host.run(serving.stop_script(handle, keep_log), timeout=serving.GRACE_S + 30)
        if done.code != 0:
            detail = done.stderr.decode("utf-8", "replace").strip().splitlines()
            raise UserError(
                f"cannot end the serve {handle.serve_id} on target `{self.name}`: "
                + (detail[-1] if detail else f"exit code {done.code}")
            )
        return done.text().strip() == "stopped"

    def serve_log(self, handle: ServeHandle, tail: int = 4000) -> str:
        """The last ``tail`` bytes of the serve's log (the engine's and its watchdog's)."""
        data = self.host.read_range(f"{handle.dir}/{serving.LOG_FILE}", 0, 64 << 20)
        return data[-tail:].decode("utf-8", "replace")

    def close(self) -> None:
        self.host.close()

    def release(self, run: RunRecord | None, outcome: RunState | None) -> None:
        self.close()


_MILESTONES = (
    # pip's
    "Collecting ", "Installing collected", "Successfully", "ERROR",
    # uv's
    "Resolved ", "Prepared ", "Installed ", "Uninstalled ", "error:", "× ",
    # the install script's own
    "installing ",
)  # fmt: skip


_UV_LISTED = re.compile(r"^ [-+~] \S")
"""A line of uv's list of what it installed or removed: no last word worth showing."""


PROGRESS_S = 15.0
"""The longest an install goes without a line while pip collects packages."""


class _Count:
    """pip's ``Collecting`` lines as one progress line: the first, then at most one every
    ``PROGRESS_S``."""

    def __init__(self, what: str, started: float) -> None:
        self.what = what
        self.started = started
        self.count = 0
        self._said: float | None = None

    def collected(self) -> None:
        self.count += 1
        now = time.monotonic()
        if self._said is None or now - self._said >= PROGRESS_S:
            self._said = now
            logger.info(f"{self.what}: {self.count} package(s) collected so far, "
                        f"{_elapsed(now - self.started)}")


class _OutputLog:
    """The whole output of an install or setup, in ``~/.cache/overbrainer/logs/`` (0600,
    redacted; each run replaces the one before); none when it cannot be written."""

    def __init__(self, what: str, target: str) -> None:
        self._redactor = LineRedactor()
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", target)
        self.path: Path | None = base / "overbrainer" / "logs" / f"{what}-{safe}.log"
        self._file: IO[str] | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
            self._file = os.fdopen(os.open(self.path, flags, 0o600), "w", encoding="utf-8")
        except OSError:
            self.path = None

    def write(self, line: str) -> None:
        if self._file is not None:
            self._file.write(self._redactor.line(line) + "\n")

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _shortened(line: str) -> str:
    """pip's one-line lists of every package, as a count."""
    for head, said in (("Installing collected packages: ", "Installing {} collected packages"),
                       ("Successfully installed ", "Successfully installed {} packages")):
        if line.startswith(head):
            names = line[len(head):].split(", " if "," in line else " ")
            if len(names) > 3:
                return said.format(len(names))
    return line


def _elapsed(seconds: float) -> str:
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes} min {rest:02d} s" if minutes else f"{rest} s"


def _milestone(line: str) -> bool:
    """Whether a line of an install or setup is worth showing without debug logging."""
    return line.startswith(_MILESTONES)


def _own_container(run: RunRecord, recorded: Container) -> tuple[str, str]:
    """The engine and name of the run's container from ``run.json``, refused unless it is
    the one ``launch`` names (``overbrainer-<run id>``, docker or podman): an edited record
    cannot stop another container, nor run a program of its choosing as the engine."""
    name = container_name(run.id)
    if recorded.engine not in ("docker", "podman") or recorded.name != name:
        raise UserError(
            f"run {run.id}: run.json names container {recorded.name!r} of {recorded.engine!r}, "
            f"not {name!r} of docker or podman: the record was edited, or is not this tool's; "
            "nothing was stopped"
        )
    return recorded.engine, name


def container_name(run_id: str) -> str:
    """The container of the run ``run_id``'s job."""
    return f"overbrainer-{run_id}"


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()
