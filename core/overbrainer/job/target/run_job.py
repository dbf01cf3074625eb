"""The job runner: the whole training job as one command, ``python run_job.py``.

overbrainer copies this file into every job directory beside ``job.json``. It runs with the
standard library alone (Python 3.7 or newer: the venv's python, a container's, whatever
a scheduler starts), so any target runs the same job with one command:

1. reads ``job.json`` (stages, environment, job-relative paths) and, when present,
   ``.secrets.json`` (secrets handed over by file: read, then deleted at once);
2. runs the stages in order in the job directory, each announced by a ``stage`` line in
   ``metrics.jsonl``; after the first, the rest run only if no ``snapshot.json`` was
   saved (a stopped run is not merged);
3. turns SIGTERM into a graceful stop: it writes ``snapshot.request`` (the trainer saves a
   checkpoint at the end of its step, then stops) unless a ``cancelling`` marker says a
   host is cancelling the job, in which case its whole process group is killed at once,
   and every process that carries the job's token (``OVERBRAINER_JOB``) besides: torch's
   launcher starts each rank of a training on several GPUs in a session of its own;
4. while a stage runs, rewrites ``machine.json`` every ``machine_sample_s`` of ``job.json``
   (default 2 s, the follow loop's pace; 0: never) with a sample of the machine's gauges,
   taken by ``machine_sample.py`` beside it (a job directory without it has no gauges);
5. writes ``manifest.sha256`` (SHA-256 of ``output/``, ``metrics.jsonl`` and
   ``snapshot.json``) and ``exit_code``, then exits with the outcome: 0, or the exit status
   of the stage that failed (128 + N for a signal).

The stages run with SIGTERM ignored and blocked, inherited by every process they start, so
a scheduler that signals every process of the job (Slurm, systemd, Ray) reaches the runner
alone, which decides, rather than killing the trainer or its DataLoader workers mid-step.

``python run_job.py manifest COUNT PATH... PATTERN...`` prints the manifest records of the
COUNT paths (skipping names matching the patterns) to stdout: the host targets hash with it.
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import importlib.util
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

JOB_FILE = "job.json"
SECRETS_FILE = ".secrets.json"
METRICS_FILE = "metrics.jsonl"
SNAPSHOT_REQUEST = "snapshot.request"
SNAPSHOT_FILE = "snapshot.json"
MANIFEST_FILE = "manifest.sha256"
MANIFEST_ROOTS = ("output", METRICS_FILE, SNAPSHOT_FILE)
EXIT_CODE = "exit_code"
CANCELLING = "cancelling"
TOKEN_VAR = "OVERBRAINER_JOB"  # noqa: S105 - a variable's name; its value is no secret
SIGNAL_REASON = "requested"
FORMAT = 1
MACHINE_SAMPLER = "machine_sample.py"
MACHINE_FILE = "machine.json"
SAMPLE_S = 2.0


def say(message: str) -> None:
    """A line in the job's log."""
    print(f"overbrainer: {message}", flush=True)


def write_atomically(path: str, data: bytes, mode: int = 0o644, sync: bool = True) -> None:
    """``path`` holds ``data`` entirely or not at all (a temporary file, synced unless
    ``sync`` is false, renamed)."""
    temp = f"{path}.tmp.{os.getpid()}"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temp, path)


def append_line(path: str, record: dict) -> None:
    """One JSON line, in one write: a reader never sees half of it."""
    data = (json.dumps(record) + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


# The manifest.


def _excluded(path: bytes, exclude: list) -> bool:
    name = os.path.basename(path.rstrip(b"/")) or path
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in exclude)


def _files(top: bytes, exclude: list):
    # As find -P: the starting point and everything under it unfollowed, pruned by name.
    if _excluded(top, exclude):
        return
    try:
        mode = os.lstat(top).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISREG(mode):
        yield top
    elif stat.S_ISDIR(mode):
        for entry in sorted(os.scandir(top), key=lambda e: e.name):
            yield from _files(os.path.join(top, os.fsencode(entry.name)), exclude)


def _record(path: bytes) -> bytes:
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as file:
        while True:
            block = file.read(1 << 20)
            if not block:
                break
            digest.update(block)
            size += len(block)
    return b"%s %d %s\0" % (digest.hexdigest().encode(), size, path)


def manifest(paths: list, exclude: list) -> bytes:
    """``<sha256> <size> <path>`` records, each ended by a NUL, of the regular files under
    ``paths`` (symlinks not followed). hashlib releases the GIL: threads hash several large
    files (a model's shards) at once."""
    found = [
        path
        for top in paths
        for path in _files(os.fsencode(top), [os.fsencode(p) for p in exclude])
    ]
    with ThreadPoolExecutor(min(8, os.cpu_count() or 1)) as pool:
        return b"".join(pool.map(_record, found))


# The job.


class Runner:
    """Runs the job of the directory ``root``."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.stop_asked = False
        self.sample_s = SAMPLE_S
        self.sampler: object = None

    def path(self, name: str) -> str:
        return os.path.join(self.root, name)

    def load(self) -> dict:
        with open(self.path(JOB_FILE), encoding="utf-8") as file:
            job = json.load(file)
        if not isinstance(job, dict) or job.get("format") != FORMAT:
            raise ValueError(f"{JOB_FILE} is not a job description this runner knows")
        return job

    def secrets(self) -> dict:
        """The secrets handed over by file, which is gone once read."""
        path = self.path(SECRETS_FILE)
        try:
            with open(path, encoding="utf-8") as file:
                data = json.load(file)
        except FileNotFoundError:
            return {}
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        if not isinstance(data, dict):
            return {}
        return {str(k): str(v) for k, v in data.items()}

    def environment(self, job: dict) -> dict:
        env = dict(os.environ)
        env.update({str(k): str(v) for k, v in job.get("env", {}).items()})
        env.update({str(k): self.path(str(v)) for k, v in job.get("paths", {}).items()})
        entries = [self.path(str(p)) for p in job.get("pythonpath", [])]
        if env.get("PYTHONPATH"):
            entries.append(env["PYTHONPATH"])
        if entries:
            env["PYTHONPATH"] = os.pathsep.join(entries)
        if sys.prefix != getattr(sys, "base_prefix", sys.prefix):
            # Run by a venv's python: its programs first, as in an activated venv (Axolotl
            # execs `accelerate` by name).
            env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
        env.update(self.secrets())
        return env

    def on_term(self, signum: int, frame: object) -> None:
        if os.path.exists(self.path(CANCELLING)):
            # A host's cancel (it writes the marker, then signals the job's process group):
            # nothing to save, and the stages ignore TERM, so end the whole group now.
            say("cancelled")
            for pid in token_carriers(os.environ.get(TOKEN_VAR, "")):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            os.killpg(os.getpgrp(), signal.SIGKILL)
            return  # only a container's PID 1 outlives that; its stage is gone, it ends
        if not self.stop_asked:
            self.stop_asked = True
            say("SIGTERM: the trainer saves a snapshot at the end of its step, then stops")
            request = self.path(SNAPSHOT_REQUEST)
            if not os.path.exists(request):
                write_atomically(request, (SIGNAL_REASON + "\n").encode())

    def stage(self, name: str, argv: list, env: dict) -> int:
        line = {"event": "stage", "name": name, "time": round(time.time(), 3)}
        append_line(self.path(METRICS_FILE), line)
        program = argv[0]
        if os.sep not in program:
            program = shutil.which(program, path=env.get("PATH")) or program
        say(f"stage {name}: {' '.join(argv)}")
        try:
            child = subprocess.Popen(
                [program, *argv[1:]],
                cwd=self.root,
                env=env,
                stdin=subprocess.DEVNULL,
                preexec_fn=_shield_from_term,  # noqa: PLW1509 - the runner has no threads
            )
        except OSError as error:
            say(f"stage {name} could not start: {error}")
            return 127
        code = self.wait(child)
        return 128 - code if code < 0 else code

    def wait(self, child: subprocess.Popen) -> int:
        """The stage's exit status; meanwhile a machine sample now and every ``sample_s``."""
        while True:
            self.write_sample()
            try:
                return child.wait(timeout=self.sample_s if self.sampler is not None else None)
            except subprocess.TimeoutExpired:
                continue

    def start_sampling(self, job: dict) -> None:
        """The sampler beside the runner, when it is there and ``job.json`` wants samples."""
        every = job.get("machine_sample_s", SAMPLE_S)
        path = self.path(MACHINE_SAMPLER)
        if not isinstance(every, (int, float)) or every <= 0 or not os.path.isfile(path):
            return
        try:
            spec = importlib.util.spec_from_file_location("machine_sample", path)
            module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
            spec.loader.exec_module(module)  # type: ignore[union-attr]
            self.sampler = module.Sampler(self.root)
        except Exception as error:  # noqa: BLE001 - gauges never stop a job
            say(f"no machine gauges: {error}")
            return
        self.sample_s = float(every)

    def write_sample(self) -> None:
        if self.sampler is None:
            return
        try:
            sample = self.sampler.sample()  # type: ignore[attr-defined]
            data = json.dumps(sample).encode("utf-8")
            write_atomically(self.path(MACHINE_FILE), data, sync=False)
        except Exception as error:  # noqa: BLE001 - gauges never stop a job
            say(f"machine gauges stopped: {error}")
            self.sampler = None

    def run(self) -> int:
        os.chdir(self.root)
        signal.signal(signal.SIGTERM, self.on_term)
        code = 0
        try:
            job = self.load()
            env = self.environment(job)
            self.start_sampling(job)
            for index, stage in enumerate(job.get("stages", [])):
                if index > 0 and os.path.exists(self.path(SNAPSHOT_FILE)):
                    say(f"a snapshot was saved: stage {stage['name']} is skipped")
                    break
                code = self.stage(str(stage["name"]), [str(a) for a in stage["argv"]], env)
                if code != 0:
                    say(f"stage {stage['name']} exited with code {code}")
                    break
        except (OSError, ValueError, KeyError, TypeError) as error:
            say(f"cannot run the job: {error}")
            code = 2
        self.finish(code)
        return code

    def finish(self, code: int) -> None:
        """The manifest, then the exit code: once ``exit_code`` exists, all is written."""
        try:
            records = manifest([p for p in MANIFEST_ROOTS if os.path.lexists(p)], [])
            write_atomically(self.path(MANIFEST_FILE), records)
        except OSError as error:
            say(f"cannot write {MANIFEST_FILE}: {error}")
        write_atomically(self.path(EXIT_CODE), f"{code}\n".encode())


def token_carriers(token: str) -> list:
    """The pids of the other processes whose environment holds ``OVERBRAINER_JOB=token``
    (those of the same user: /proc lets a process read only theirs); none without /proc."""
    if not token:
        return []
    entry = f"{TOKEN_VAR}={token}".encode()
    found = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as file:
                if entry in file.read().split(b"\0"):
                    found.append(int(name))
        except OSError:
            continue
    return found


def _shield_from_term() -> None:
    """A stage starts with SIGTERM ignored and blocked. Ignoring covers the stage's own
    process; blocking covers every process it starts, since a mask is inherited across fork
    and exec while a disposition is not kept by a process that installs its own handler:
    torch's DataLoader workers do (they die on TERM, and the trainer fails with them). Some
    code clears the mask (dash at its start, Python's resource tracker): the trainer's
    plugin blocks TERM again before the workers start."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})


def main(argv: list) -> int:
    if argv[:1] == ["manifest"]:
        count = int(argv[1])
        paths, exclude = argv[2 : 2 + count], argv[2 + count :]
        sys.stdout.buffer.write(manifest(paths, exclude))
        return 0
    root = os.path.dirname(os.path.abspath(__file__))
    return Runner(root).run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
