"""The job protocol on a POSIX host: what the ``local`` and ``ssh`` targets share.

A transport supplies a :class:`~overbrainer.job.host.Host`; ``HostExecutor`` does the rest
(claim, job script, spawn, status, snapshot request, cancel, verified retrieval), and the
built-in hook implementations in :mod:`overbrainer.job.hooks` route every hook call for a
``HostExecutor`` here. A target kind on a POSIX host so needs only ``register_targets`` and
``create_executor``.
"""

from __future__ import annotations

import secrets as random_tokens
import shlex
import shutil
import time
from functools import cached_property
from pathlib import Path

from loguru import logger

from overbrainer.config.model import HostTarget
from overbrainer.errors import UserError
from overbrainer.job import scripts
from overbrainer.job.host import Host, HostError
from overbrainer.job.manifest import parse_manifest, verify
from overbrainer.job.metrics import complete_lines
from overbrainer.job.spec import (
    CANCELLED,
    LOST,
    RUNNING,
    ArtifactSpec,
    JobPoll,
    JobSpec,
    JobStatus,
)
from overbrainer.runs.record import Container, JobHandle, RunRecord

CONTAINER_ROOT = "/workspace/run"
DEFAULT_IMAGE = "axolotlai/axolotl:main-latest"
NOT_UPLOADED = ("run.json", "pod.json", "ssh", ".claim")
PID_WAIT_S = 30.0


class HostExecutor:
    """Runs jobs of the target ``name`` on ``host``, in run directories under ``workdir``."""

    def __init__(
        self, name: str, target: HostTarget, host: Host, workdir: str, setup_dir: str | None = None
    ) -> None:
        self.name = name
        self.target = target
        self.host = host
        self.workdir = workdir
        self.setup_dir = setup_dir
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

    def claim(self, run_id: str) -> str:
        """Reserve the run's directory; "" when another owner holds that id on the host."""
        run_dir = f"{self.root}/{run_id}"
        token = random_tokens.token_hex(16)
        answer = self.host.check(scripts.claim_script(run_dir, token)).strip()
        return run_dir if answer == "claimed" else ""

    def job_root(self, run: RunRecord) -> str:
        """The run directory as the job sees it (inside a container, its mount point)."""
        return CONTAINER_ROOT if self.container else run.remote_dir

    def prepare_host(self, program: str = "axolotl") -> None:
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
        venv = self._venv_path()
        requirements = " ".join(
            shlex.quote(part) for part in shlex.split(self.target.install or "")
        )
        return (
            "set -e\n"
            f"echo 'installing Axolotl into {self.target.venv} (first use; this takes minutes)'\n"
            f"[ -x {venv}/bin/pip ] || python3 -m venv {venv}\n"
            f"{venv}/bin/pip install --progress-bar off {requirements} 2>&1\n"
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

        Milestones (pip's) and the last line are shown; the rest is debug output, and the
        last lines are quoted when the script fails.
        """
        from collections import deque

        from overbrainer.redact import printable

        tail: deque[str] = deque(maxlen=15)
        try:
            with self.host.stream_out(script) as stream:
                for raw in stream:
                    line = printable(raw.decode("utf-8", "replace").rstrip("\n"))
                    if line:
                        tail.append(line)
                        logger.log("INFO" if _milestone(line) else "DEBUG", f"{what}: {line}")
        except HostError as error:
            shown = "".join(f"\n  {line}" for line in tail)
            raise UserError(f"{failure}: {error}{shown}") from None
        if tail and not _milestone(tail[-1]):
            logger.info(f"{what}: {tail[-1]}")

    # The job.

    def launch(self, run: RunRecord, job: JobSpec) -> JobHandle:
        """Write the job script, upload the run directory, spawn the wrapper, read its pid."""
        root = run.remote_dir
        job_root = self.job_root(run)
        (job.local_dir / "job.sh").write_text(self.job_script(run, job, job_root), encoding="utf-8")
        self.host.check(scripts.clear_stale_script(root))
        if not self.host.same_place(job.local_dir, root):
            self.host.upload(job.local_dir, root, skip=NOT_UPLOADED)
        secrets = {name: value.get_secret_value() for name, value in job.secrets.items()}
        self.host.spawn(scripts.wrapper(root), cwd=root, log=f"{root}/job.log", secrets=secrets)
        pid = self._wait_for_pid(root)
        container = (
            Container(engine=self._engine, name=f"overbrainer-{run.id}") if self.container else None
        )
        return JobHandle(dir=root, pid=pid, container=container)

    def _wait_for_pid(self, root: str) -> int:
        deadline = time.monotonic() + PID_WAIT_S
        while True:
            text = self.host.read_range(f"{root}/job.pid", 0, 32).decode("ascii", "replace").strip()
            if text.isdigit() and int(text) > 1:
                return int(text)
            if time.monotonic() > deadline:
                raise HostError(f"the job did not start: no job.pid after {PID_WAIT_S:.0f} s")
            time.sleep(0.05)

    def job_script(self, run: RunRecord, job: JobSpec, root: str) -> str:
        """``job.sh``: the stages chained with ``&&``, each announced in metrics.jsonl;
        after the first, the rest runs only if no snapshot was saved."""
        inner = self._native_script(job, root, venv=None if self.container else self.target.venv)
        if not self.container:
            return inner
        return self._container_script(run, job, inner)

    def _native_script(self, job: JobSpec, root: str, venv: str | None) -> str:
        q = shlex.quote
        lines = [
            f"# the job of run {job.run_id}, written by overbrainer",
            f"cd {q(root)} || exit 1",
        ]
        lines += [f"export {key}={q(value)}" for key, value in sorted(job.env.items())]
        lines += [f"export {key}={q(f'{root}/{rel}')}" for key, rel in sorted(job.paths.items())]
        if venv:
            # Axolotl execs `accelerate` by name (all but `--launcher python`): the venv's
            # programs come first on PATH, as in an activated venv.
            lines.append(f'export PATH={self._venv_path()}/bin:"$PATH"')
        if job.pythonpath:
            joined = ":".join(f"{root}/{rel}" for rel in job.pythonpath)
            lines.append(f'export PYTHONPATH={q(joined)}"${{PYTHONPATH:+:$PYTHONPATH}}"')
        lines.append(
            'stage() { printf \'{"event":"stage","name":"%s","time":"%s"}\\n\' '
            f'"$1" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >> {q(root + "/metrics.jsonl")}; }}'
        )
        commands = [
            f"stage {q(stage.name)} && "
            + " ".join([self._program(stage.argv[0], venv), *(q(arg) for arg in stage.argv[1:])])
            for stage in job.stages
        ]
        chain = commands[0]
        if len(commands) > 1:
            rest = " && ".join(commands[1:])
            chain += f" && {{ [ -f snapshot.json ] || {{ {rest}; }}; }}"
        lines.append(chain)
        return "\n".join(lines) + "\n"

    def _container_script(self, run: RunRecord, job: JobSpec, inner: str) -> str:
        q = shlex.quote
        engine = self._engine
        gpu: list[str] = []
        if not job.cpu_only:
            gpu = ["--gpus", "all"] if engine == "docker" else ["--device", "nvidia.com/gpu=all"]
        args = [
            engine,
            "run",
            "--rm",
            "--name",
            f"overbrainer-{run.id}",
            *gpu,
            "--ipc=host",
            "-v",
            f"{run.remote_dir}:{CONTAINER_ROOT}",
            "-w",
            CONTAINER_ROOT,
        ]
        for name in sorted(job.secrets):
            args += ["-e", name]  # the value comes from the wrapper's environment
        command = " ".join(q(arg) for arg in args)
        cache = '-v "$HOME/.cache/huggingface:/root/.cache/huggingface"'
        image = q(self.target.image or DEFAULT_IMAGE)
        (job.local_dir / "job-inner.sh").write_text(inner, encoding="utf-8")
        return (
            f"# the job of run {job.run_id}, in a container, written by overbrainer\n"
            f"cd {q(run.remote_dir)} || exit 1\n"
            'mkdir -p "$HOME/.cache/huggingface"\n'
            f"exec {command} {cache} {image} sh {CONTAINER_ROOT}/job-inner.sh\n"
        )

    @property
    def _engine(self) -> str:
        return self.target.engine or "docker"

    def _program(self, name: str, venv: str | None = None) -> str:
        venv = self.target.venv if venv is None and not self.container else venv
        if not venv:
            return shlex.quote(name)
        return scripts.home_path(f"{venv}/bin/{name}")

    # Following.

    def poll(self, run: RunRecord) -> JobPoll:
        """One look at the job, with the metrics lines written since the last one."""
        offset = self._offsets.get(run.id, 0)
        done = self.host.run(scripts.status_script(run.remote_dir, offset), timeout=60)
        if done.code != 0:
            raise HostError(done.stderr.decode("utf-8", "replace").strip() or "status failed")
        status, request, snapshot, size, chunk = _parse_status(done.stdout)
        if size < offset:
            # metrics.jsonl shrank (rewritten): start over rather than skip lines.
            offset = 0
            chunk = b""
        lines, used = complete_lines(chunk, capped=len(chunk) >= scripts.METRICS_CAP)
        self._offsets[run.id] = offset + used
        return JobPoll(status, tuple(lines), request, snapshot)

    def request_snapshot(self, run: RunRecord, reason: str) -> None:
        self.host.check(scripts.request_script(run.remote_dir, reason))

    def cancel(self, run: RunRecord) -> JobStatus:
        container = None
        if run.job is not None and run.job.container is not None:
            container = (run.job.container.engine, run.job.container.name)
        pid = run.job.pid if run.job is not None else None
        done = self.host.run(scripts.cancel_script(run.remote_dir, pid, container), timeout=120)
        text = done.text().strip().splitlines()
        if done.code != 0:
            raise UserError(
                f"cannot cancel the job of run {run.id}: {text[-1] if text else done.code}"
            )
        return _status(text[-1])

    def collect(self, run: RunRecord, artifacts: ArtifactSpec, dest: Path) -> list[str]:
        """Download ``artifacts`` into ``dest`` and verify them against the host's manifest."""
        root = run.remote_dir
        script = scripts.manifest_script(root, artifacts.paths, artifacts.exclude)
        listed = self.host.run(script, timeout=3600)
        if listed.code != 0:
            detail = listed.stderr.decode("utf-8", "replace").strip().splitlines()
            raise HostError(
                "cannot list the job's files on the target: "
                + (detail[-1] if detail else f"exit code {listed.code}")
            )
        manifest = parse_manifest(listed.stdout)
        for required in artifacts.required:
            if not any(p == required or p.startswith(required + "/") for p in manifest):
                raise UserError(f'"{required}" is not on the target')
        if not self.host.same_place(dest, root):
            for path in artifacts.paths:
                _remove(dest / path)
            self.host.download(root, sorted(manifest), dest)
            verify(manifest, dest, artifacts.paths, artifacts.exclude)
        logger.debug(f"retrieved {len(manifest)} file(s) of run {run.id}")
        return sorted(manifest)

    def close(self) -> None:
        self.host.close()


_MILESTONES = ("Collecting ", "Installing collected", "Successfully", "ERROR", "installing ")


def _milestone(line: str) -> bool:
    """Whether a line of an install or setup is worth showing without debug logging."""
    return line.startswith(_MILESTONES)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def _status(line: str) -> JobStatus:
    words = line.split()
    if len(words) >= 2 and words[0] == "status":
        match words[1:]:
            case ["running"]:
                return RUNNING
            case ["cancelled"]:
                return CANCELLED
            case ["exited", code] if code.lstrip("-").isdigit():
                return JobStatus.exited(int(code))
            case ["lost"]:
                return LOST
    raise HostError("the status script answered something unexpected")


def _parse_status(output: bytes) -> tuple[JobStatus, str | None, str | None, int, bytes]:
    """Split the status script's output into its parts (see ``scripts.status_script``)."""
    rest = output
    line, _, rest = rest.partition(b"\n")
    status = _status(line.decode("ascii", "replace"))
    request = snapshot = None
    size = 0
    while rest:
        line, _, rest = rest.partition(b"\n")
        word, _, value = line.decode("ascii", "replace").partition(" ")
        if word == "request":
            request = value.strip()
        elif word == "snapshot":
            length = int(value)
            snapshot, rest = rest[:length].decode("utf-8", "replace"), rest[length:]
        elif word == "metrics":
            size = int(value) if value.strip().isdigit() else 0
            return status, request, snapshot, size, rest
    return status, request, snapshot, size, b""
