"""The shell scripts of the job protocol on a POSIX host, run by any transport.

They are POSIX ``sh`` (dash, busybox, bash) plus ``sha256sum``, ``tar`` and fractional
``sleep``, which every Linux image has. Every path is quoted with ``shlex.quote``; the
paths themselves were validated by the settings models.

Files of a job's directory (its *root* on the target; :mod:`overbrainer.job.layout`):

- ``job.pid``: the wrapper's pid, which is also its process group (written first);
- ``exit_code``: the job's exit status (written last, atomically);
- ``cancelling`` / ``cancelled``: a cancel in progress / done;
- ``snapshot.request`` / ``snapshot.json``: a snapshot asked for / saved;
- ``metrics.jsonl``, ``job.log``, ``output/``: what the job produces.

Every process of a job carries ``OVERBRAINER_JOB=<token>`` in its environment (the token
is in ``run.json``): a process group is the job's only if a live member carries it, so a
stale or edited pid is never signalled nor read as running; and a cancel kills whatever
carries it outside the group too (the ranks of a training over several GPUs, each in a
session of its own).
"""

from __future__ import annotations

import shlex
from importlib import resources

from overbrainer.job.layout import (
    CANCELLED,
    CANCELLING,
    EXIT_CODE,
    JOB_PID,
    MACHINE_SAMPLER,
    MANIFEST_FILE,
    RUNNER,
    TRAVELS,
)

STALE = (EXIT_CODE, CANCELLING, CANCELLED, JOB_PID, MANIFEST_FILE)

q = shlex.quote

def home_path(path: str) -> str:
    """``path`` as a shell word: relative to the home directory unless absolute (``~`` and
    ``~/…`` included), whatever directory the script runs in."""
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        return '"$HOME"/' + q(path[2:])
    if not path.startswith("/"):
        return '"$HOME"/' + q(path)
    return q(path)


def workdir_script(workdir: str) -> str:
    """Create ``workdir`` and print its absolute, symlink-free path."""
    path = home_path(workdir)
    return f"set -e\nmkdir -p {path}\ncd {path}\npwd -P\n"


def claim_script(run_dir: str, token: str) -> str:
    """Reserve ``run_dir``: prints ``claimed`` when ``token`` holds it, ``taken`` otherwise.

    ``set -C`` makes the redirection fail when ``.claim`` exists, so only one owner wins.
    """
    return f"""\
mkdir -p {q(run_dir)} || exit 1
cd {q(run_dir)} || exit 1
if (set -C; printf '%s\\n' {q(token)} > .claim) 2>/dev/null; then echo claimed; exit 0; fi
if [ "$(cat .claim 2>/dev/null)" = {q(token)} ]; then echo claimed; else echo taken; fi
"""


def gpu_script() -> str:
    """Print ``gpu`` when the host has a usable NVIDIA GPU, ``cpu`` otherwise."""
    return (
        "if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; "
        "then echo gpu; else echo cpu; fi\n"
    )


def gpu_count_script() -> str:
    """Print how many GPUs a job started now would see: ``CUDA_VISIBLE_DEVICES``'s entries
    when it is set, else the lines of ``nvidia-smi -L``, else 0."""
    return (
        'if [ -n "${CUDA_VISIBLE_DEVICES+set}" ]; then\n'
        '  printf \'%s\\n\' "$CUDA_VISIBLE_DEVICES" | tr \',\' \'\\n\' | grep -c \'[^ ]\' || true\n'
        "elif command -v nvidia-smi >/dev/null 2>&1; then\n"
        "  nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true\n"
        "else echo 0; fi\n"
    )


def clear_stale_script(root: str) -> str:
    """Remove the markers a previous spawn in ``root`` may have left."""
    return f"cd {q(root)} && rm -f {' '.join(STALE)} job.pid.tmp exit_code.tmp\n"


def wrapper(root: str) -> str:
    """The detached wrapper: ``job.pid`` first, the job, ``exit_code`` last, atomically.

    It runs as the leader of a new session, so its pid is the job's process group.
    """
    return (
        f"cd {q(root)} || exit 1; "
        "echo $$ > job.pid.tmp && mv -f job.pid.tmp job.pid; "
        "sh ./job.sh; code=$?; "
        "echo $code > exit_code.tmp && mv -f exit_code.tmp exit_code"
    )


def manifest_script(root: str, paths: tuple[str, ...], exclude: tuple[str, ...]) -> str:
    """Print ``<sha256> <size> <path>`` records, each ended by a NUL, for the regular files
    under ``paths`` (symlinks are not followed), skipping names that match ``exclude``.

    NUL framing keeps any file name intact, newlines and all. With a Python 3.7+ on the
    host (every Axolotl host has one), the runner's own manifest code hashes in one process,
    several files at once, at OpenSSL's speed; otherwise ``find`` and ``sha256sum`` do, a
    few processes per file. Both print the same records (a test holds them to it).
    """
    quoted = " ".join(q(p) for p in paths)
    patterns = " ".join(q(pattern) for pattern in exclude)
    prune = " ".join(f"-name {q(pattern)} -prune -o" for pattern in exclude)
    return f"""\
cd {q(root)} || exit 1
if python3 -c 'import sys; sys.exit(sys.version_info < (3, 7))' 2>/dev/null; then
  python3 -c {q(runner_source())} manifest {len(paths)} {quoted} {patterns}
  exit $?
fi
for p in {quoted}; do
  [ -e "$p" ] || [ -L "$p" ] || continue
  find "$p" {prune} -type f -exec sh -c '
    for f; do
      h=$(sha256sum < "$f") || exit 1
      s=$(($(wc -c < "$f"))) || exit 1
      printf "%s %s %s\\0" "${{h%% *}}" "$s" "$f"
    done' sh {{}} + || exit 1
done
"""


def runner_source() -> str:
    """The text of the job runner (``run_job.py``), shipped into every job directory."""
    return resources.files(TRAVELS).joinpath(RUNNER).read_text(encoding="utf-8")


def tar_out_script(root: str) -> str:
    """Stream a tar of the files named on stdin (NUL-separated) to stdout."""
    return f"cd {q(root)} && tar -c -f - --null --no-recursion -T -\n"


def tar_in_script(root: str) -> str:
    """Unpack a tar from stdin into ``root`` (created if needed)."""
    return f"mkdir -p {q(root)} && tar -x -f - -C {q(root)} --no-same-owner\n"


def sampler_source() -> str:
    """The text of the machine sampler (``machine_sample.py``), shipped beside the runner."""
    return resources.files(TRAVELS).joinpath(MACHINE_SAMPLER).read_text(encoding="utf-8")
