"""The run's own target, reached again for work after training (export, compare)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from loguru import logger

from overbrainer import files
from overbrainer.after.toolchain import (
    DEFAULT_DIR,
    LLAMA_CPP,
    LLAMA_CPP_PYTHON,
    target_file,
    toolchain_dir,
)
from overbrainer.errors import UserError
from overbrainer.hookcalls import Hooks
from overbrainer.job import scripts
from overbrainer.job.host import Completed
from overbrainer.job.record import RunRecord
from overbrainer.job.shell import TargetShell
from overbrainer.project import Project
from overbrainer.train.executors import check_keep_machine, held_executor

PID_FILE = "script.pid"


@dataclass
class TargetRun:
    """A shell on the target of ``run``, for the block of :func:`open_target` that holds
    the executor it came from."""

    run: RunRecord
    shell: TargetShell

    def same_place(self, local_run_dir: Path) -> bool:
        """Whether the run's directory on the target is ``local_run_dir`` itself."""
        return self.shell.host.same_place(local_run_dir, self.run.remote_dir)

    def sha256(self, path: str) -> str:
        """The SHA-256 of ``path`` on the target; "" when it is not there."""
        done = self.shell.host.run(f"sha256sum {scripts.q(path)}\n", timeout=3600)
        out = done.text().split()
        return out[0] if done.code == 0 and out else ""

    def run_script(
        self,
        job_dir: str,
        command: str,
        log: str,
        timeout: float,
        secrets: Mapping[str, str] | None = None,
    ) -> Completed:
        """Run ``command`` in ``job_dir`` on the target, its output in ``log`` there (the
        last 4 kB come back as stderr). ``secrets`` join its environment through the
        script's stdin, never its command line. Ctrl-C (``KeyboardInterrupt``) stops it
        there too (SIGTERM: the scripts clean up on it) before it goes on."""
        q = scripts.q
        given = dict(secrets or {})
        names = sorted(given)
        for name in names:
            if "\n" in given[name] or "\r" in given[name]:
                raise UserError(f"{name} cannot be handed to the target: it holds a line break")
        reads = "".join(f"IFS= read -r {name} && export {name} && " for name in names)
        script = (
            f"{reads}cd {q(job_dir)} && {{ {command} > {q(log)} 2>&1 < /dev/null & "
            f"echo $! > {PID_FILE}; wait $!; code=$?; }}; tail -c 4000 {q(log)} >&2; "
            "exit $code\n"
        )
        stdin = "".join(f"{given[name]}\n" for name in names).encode()
        try:
            return self.shell.host.run(script, input=stdin, timeout=timeout)
        except KeyboardInterrupt:
            stop = f"kill -TERM $(cat {q(job_dir + '/' + PID_FILE)}) 2>/dev/null; exit 0\n"
            with suppress(Exception):
                self.shell.host.run(stop, timeout=30)
            raise

    def ensure_inputs(self, local_run_dir: Path, names: tuple[str, ...]) -> None:
        """Upload ``names`` of the run directory (no checkpoints) when a read-only probe
        finds one gone from the target (a cleaned work directory, another machine)."""
        if self.same_place(local_run_dir):
            return
        q = scripts.q
        probe = " && ".join(f"[ -e {q(self.run.remote_dir + '/' + name)} ]" for name in names)
        if self.shell.host.run(f"{probe}\n").code == 0:
            return
        logger.info(f"uploading {', '.join(names)} of run {self.run.id} to its target")
        with tempfile.TemporaryDirectory(prefix="overbrainer-stage-") as tmp:
            stage = Path(tmp)
            for name in names:
                source = local_run_dir / name
                if source.is_dir():
                    shutil.copytree(
                        source,
                        stage / name,
                        ignore=shutil.ignore_patterns("checkpoint-*"),
                        copy_function=_link_or_copy,
                    )
                else:
                    (stage / name).parent.mkdir(parents=True, exist_ok=True)
                    _link_or_copy(str(source), str(stage / name))
            self.shell.host.check(f"mkdir -p {q(self.run.remote_dir)}\n")
            self.shell.host.upload(stage, self.run.remote_dir)

    def ensure_toolchain(self, env: dict[str, str]) -> str:
        """The llama.cpp toolchain directory on the target, built there on first use when
        it is the default one (an ``OVERBRAINER_LLAMA_CPP`` directory must be complete)."""
        directory = toolchain_dir(env)
        shown = scripts.home_path(directory)
        probe = f"[ -x {shown}/bin/python ] && [ -f {shown}/llama.cpp/convert_hf_to_gguf.py ]\n"
        if directory != DEFAULT_DIR or self.shell.host.run(probe).code == 0:
            return directory
        logger.info(
            f"installing {LLAMA_CPP} on target `{self.run.target}` into {directory} (first use; "
            "it builds llama.cpp, which takes minutes)"
        )
        script = f"{self.run.remote_dir}/install_llama_cpp.sh"
        self.shell.host.write_file(script, target_file("install_llama_cpp.sh"))
        done = self.shell.host.run(
            f"sh {scripts.q(script)} {shown} {LLAMA_CPP_PYTHON} 2>&1\n", timeout=4 * 3600
        )
        if done.code != 0:
            lines = done.text().strip().splitlines()[-5:]
            raise UserError(
                f"installing {LLAMA_CPP} on target `{self.run.target}` failed:\n" + "\n".join(lines)
            )
        return directory


def _link_or_copy(source: str, dest: str) -> None:
    try:
        Path(dest).hardlink_to(source)
    except OSError:
        shutil.copy2(source, dest)


@contextmanager
def open_target(
    project: Project,
    hook: Hooks,
    run: RunRecord,
    *,
    purpose: str = "",
    keep_machine: bool = False,
) -> Iterator[TargetRun]:
    """The target of ``run`` with a shell on it for the block, its executor released
    however the block ends; or a ``UserError`` saying why not. ``purpose`` names the
    command, ``keep_machine`` is its ``--keep-machine``."""
    with held_executor(project, hook, run) as held:
        if keep_machine:  # before a machine is made for the command
            check_keep_machine(run.target, hook.describe_target(executor=held.executor))
        shell = hook.open_shell(executor=held.executor, purpose=purpose, keep_machine=keep_machine)
        if shell is None:
            raise UserError(
                f"target `{run.target}` of run {run.id} cannot run commands after training "
                "(its plugin gives no shell)"
            )
        if shell.run_dir is not None:  # a machine made for this command
            held.run = run = run.evolve(remote_dir=shell.run_dir)
        elif shell.host.local:  # the record's path, on this machine: the project's own only
            files.own_path(run.remote_dir, Path(shell.workdir), f"remote_dir of run {run.id}")
        yield TargetRun(run, shell)
