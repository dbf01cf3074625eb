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
stale or edited pid is never signalled nor read as running.
"""

from __future__ import annotations

import shlex
from importlib import resources

from overbrainer.job.layout import (
    CANCELLED,
    CANCELLING,
    EXIT_CODE,
    JOB_PID,
    MANIFEST_FILE,
    RUNNER,
)

TOKEN_VAR = "OVERBRAINER_JOB"  # noqa: S105 - a variable's name; its value is no secret
STALE = (EXIT_CODE, CANCELLING, CANCELLED, JOB_PID, MANIFEST_FILE)
METRICS_CAP = 1 << 20
SNAPSHOT_CAP = 64 << 10
WAIT_TERM_S = 10
WAIT_KILL_S = 10

q = shlex.quote

# A process group is alive while one of its members is not a zombie. `kill -0` alone also
# answers for zombies, which a host whose init reaps slowly (or never, in some containers)
# keeps around: a finished job would read running, and a cancel would never see it gone.
_GROUP_ALIVE = """\
group_alive() {
  kill -0 -"$1" 2>/dev/null || return 1
  [ -r /proc/self/stat ] || return 0
  for f in /proc/[0-9]*/stat; do
    read -r line 2>/dev/null < "$f" || continue
    set -- "$1" ${line##*) }
    [ "$4" = "$1" ] && [ "$2" != Z ] && return 0
  done
  return 1
}
"""

# A live member of group $1 carries the job's token $2 in its environment (readable for
# the processes of the same user, which a job's are). Without /proc nothing can be proven.
_PROVEN = f"""\
proven() {{
  [ -r /proc/self/environ ] || return 1
  for f in /proc/[0-9]*/stat; do
    read -r line 2>/dev/null < "$f" || continue
    set -- "$1" "$2" ${{line##*) }}
    [ "$5" = "$1" ] && [ "$3" != Z ] || continue
    tr '\\0' '\\n' < "${{f%/stat}}/environ" 2>/dev/null | grep -qx "{TOKEN_VAR}=$2" && return 0
  done
  return 1
}}
"""


def _alive(token: str | None) -> str:
    """``alive``: the job of ``job.pid`` runs (proven by ``token`` when there is one and
    ``/proc`` can tell)."""
    proof = f' && {{ [ ! -r /proc/self/environ ] || proven "$pid" {q(token)}; }}' if token else ""
    return (
        _GROUP_ALIVE
        + _PROVEN
        + f"""\
alive() {{
  pid=$(cat job.pid 2>/dev/null) || return 1
  case $pid in ''|*[!0-9]*) return 1;; esac
  [ "$pid" -gt 1 ] && group_alive "$pid"{proof}
}}
"""
    )


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


def status_script(root: str, offset: int, token: str | None = None) -> str:
    """One look at the job: its status, a pending request, a saved snapshot, new metrics.

    Output: a ``status`` line; ``request <reason>`` when ``snapshot.request`` exists;
    ``snapshot <n>`` followed by n bytes of ``snapshot.json`` (at most 64 KiB + 1, so a
    larger file shows as too large); ``metrics <size>`` then the bytes of
    ``metrics.jsonl`` from ``offset`` (at most 1 MiB) to the end of the output. A group
    that does not carry ``token`` is not the job's: without an exit code, it is lost.
    """
    return f"""\
if ! cd {q(root)} 2>/dev/null; then echo "status lost"; exit 0; fi
{_alive(token)}\
if [ -f cancelled ]; then echo "status cancelled"
elif [ -f cancelling ]; then if alive; then echo "status running"; else echo "status cancelled"; fi
elif [ -f exit_code ]; then echo "status exited $(cat exit_code)"
elif alive; then echo "status running"
elif [ -f exit_code ]; then echo "status exited $(cat exit_code)"
else echo "status lost"; fi
if [ -f snapshot.request ]; then
  printf 'request %s\\n' "$(head -c 64 snapshot.request | tr -dc 'a-z')"
fi
if [ -f snapshot.json ]; then
  n=$(head -c {SNAPSHOT_CAP + 1} snapshot.json | wc -c)
  echo "snapshot $n"; head -c {SNAPSHOT_CAP + 1} snapshot.json
fi
size=$(wc -c < metrics.jsonl 2>/dev/null || echo 0)
echo "metrics $size"
if [ "$size" -gt {offset} ]; then tail -c +{offset + 1} metrics.jsonl | head -c {METRICS_CAP}; fi
"""


def request_script(root: str, reason: str) -> str:
    """Write ``snapshot.request`` holding ``reason``, atomically."""
    return (
        f"cd {q(root)} && printf '%s\\n' {q(reason)} > snapshot.request.tmp "
        "&& mv -f snapshot.request.tmp snapshot.request && echo requested\n"
    )


def cancel_script(
    root: str, pid: int | None, container: tuple[str, str] | None, token: str | None = None
) -> str:
    """Stop the job's container and process group: TERM, up to 10 s, KILL, up to 10 s.

    Prints the final status line. ``pid`` is the recorded one (``job.pid`` when None). A
    job that already finished is never signalled (its pid may belong to another process by
    now), nor a live group none of whose processes carries ``token`` (a stale or edited
    record). Exit 3: no valid pid; exit 4: the group survived KILL (``cancelling`` stays, so
    the status keeps reading running); exit 5: the group is not the job's, or cannot be
    tied to it (no ``token``).
    """
    stop = ""
    if container is not None:
        engine, name = container
        stop = f"{q(engine)} stop -t 30 {q(name)} >/dev/null 2>&1\n"
    # No token (the reference tool's records, older or edited ones): nothing ties the
    # group to the job, and a pid is reused; the group is never signalled.
    proof = """\
if group_alive "$pid"; then
  echo "process group $pid cannot be tied to this job: its run record has no job token \
(written by another tool or an older version); nothing was signalled. If it is the job, \
stop it by hand: kill -TERM -$pid"
  exit 5
fi
"""
    if token:
        proof = f"""\
if group_alive "$pid" && ! proven "$pid" {q(token)}; then
  where=$(readlink "/proc/$pid/cwd" 2>/dev/null || echo "an unknown directory")
  if [ -r /proc/self/environ ]; then
    echo "process group $pid is not this job's: none of its processes carries the job's \
token (its leader runs in $where)"
  else
    echo "process group $pid cannot be proven to be this job's: /proc is not readable"
  fi
  exit 5
fi
"""
    return f"""\
if ! cd {q(root)} 2>/dev/null; then echo "status lost"; exit 0; fi
if [ -f cancelled ]; then echo "status cancelled"; exit 0; fi
if [ -f exit_code ]; then echo "status exited $(cat exit_code)"; exit 0; fi
pid={pid if pid is not None else "$(cat job.pid 2>/dev/null)"}
case $pid in ''|*[!0-9]*) echo "no job.pid"; exit 3;; esac
if [ "$pid" -le 1 ]; then echo "invalid job.pid"; exit 3; fi
{_GROUP_ALIVE}{_PROVEN}{proof}\
: > cancelling
{stop}\
wait_gone() {{
  i=0
  while group_alive "$pid"; do
    [ $i -ge $1 ] && return 1
    sleep 0.1; i=$((i + 1))
  done
}}
if group_alive "$pid"; then
  kill -TERM -"$pid" 2>/dev/null
  if ! wait_gone {WAIT_TERM_S * 10}; then
    kill -KILL -"$pid" 2>/dev/null
    if ! wait_gone {WAIT_KILL_S * 10}; then echo "the job survived KILL"; exit 4; fi
  fi
fi
: > cancelled.tmp && mv -f cancelled.tmp cancelled
echo "status cancelled"
"""


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
    return resources.files("overbrainer.job").joinpath(RUNNER).read_text(encoding="utf-8")


def tar_out_script(root: str) -> str:
    """Stream a tar of the files named on stdin (NUL-separated) to stdout."""
    return f"cd {q(root)} && tar -c -f - --null --no-recursion -T -\n"


def tar_in_script(root: str) -> str:
    """Unpack a tar from stdin into ``root`` (created if needed)."""
    return f"mkdir -p {q(root)} && tar -x -f - -C {q(root)} --no-same-owner\n"


# pip's settings that decide which wheels an install gets (a machine's find-links holding
# the CPU torch wheel, its index, constraints, certificates), and the variables uv reads
# for each: uv reads no pip configuration of its own. pip weighs every file of every index;
# uv takes a version's files from the first index that has it, so with several indexes it
# can install another wheel than pip would (a py310 build on 3.11): pip installs then.
_PIP_TO_UV = """\
import configparser, os, shlex, sys
names = {"find-links": "UV_FIND_LINKS", "index-url": "UV_INDEX_URL",
         "extra-index-url": "UV_EXTRA_INDEX_URL", "constraint": "UV_CONSTRAINT",
         "no-index": "UV_NO_INDEX", "cert": "SSL_CERT_FILE"}
home = os.path.expanduser("~")
chosen = os.environ.get("PIP_CONFIG_FILE")
files = []
if chosen != os.devnull:  # as pip: global, user (unless PIP_CONFIG_FILE), site, that file
    xdg = os.environ.get("XDG_CONFIG_DIRS") or "/etc/xdg"
    files += [os.path.join(d, "pip", "pip.conf") for d in reversed(xdg.split(":"))]
    files.append("/etc/pip.conf")
    if not (chosen and os.path.exists(chosen)):
        user = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
        files += [os.path.join(home, ".pip", "pip.conf"), os.path.join(user, "pip", "pip.conf")]
    if os.environ.get("VIRTUAL_ENV"):
        files.append(os.path.join(os.environ["VIRTUAL_ENV"], "pip.conf"))
    if chosen:
        files.append(chosen)
settings = {}
for path in files:
    parser = configparser.RawConfigParser()
    try:
        parser.read(path)
    except Exception:
        continue
    for section in ("global", "install"):
        if parser.has_section(section):
            for key, value in parser.items(section):
                settings[key.replace("_", "-")] = value
for name in names:
    value = os.environ.get("PIP_" + name.upper().replace("-", "_"))
    if value:
        settings[name] = value
if settings.get("extra-index-url", "").split():
    print("echo 'installing with pip: its settings name several package indexes'")
    sys.exit()
print("installer=uv")
for name, value in settings.items():
    if name not in names:
        continue
    if name == "no-index":
        value = "1" if value.strip().lower() in ("1", "true", "yes", "on") else ""
    else:
        value = ("," if name == "find-links" else " ").join(value.split())
    if value:
        print(f'[ -n "${{{names[name]}:-}}" ] || export {names[name]}={shlex.quote(value)}')
"""


CONSTRAINTS = "constraints"
"""In this package, ``axolotl-VERSION.txt``: the exact versions an Axolotl release
installs, shipped so that pip and uv install them without resolving its tree."""


def constraints_of(requirements: list[str]) -> str:
    """The shipped constraints for the ``axolotl==VERSION`` of ``requirements``, or ""."""
    for word in requirements:
        if word.startswith("axolotl=="):
            name = f"axolotl-{word.removeprefix('axolotl==')}.txt"
            path = resources.files("overbrainer.job").joinpath(CONSTRAINTS, name)
            if "/" not in word and path.is_file():
                return path.read_text(encoding="utf-8")
    return ""


def install_script(venv: str, shown: str, requirements: list[str]) -> str:
    """Install ``requirements`` (quoted already) into the venv ``venv`` (a shell path):
    with uv where the host has it (its venv, ``uv pip install``, pip's settings handed
    over), with pip otherwise or where pip's settings name several indexes; with the
    shipped constraints of an Axolotl release named exactly (``constraints_of``).
    ``shown``: the venv as the user wrote it."""
    wanted = " ".join(requirements)
    pins = constraints_of(requirements)
    if pins:
        wanted += ' -c "$pins"'
        pins = (
            'pins=$(mktemp)\ntrap \'rm -f "$pins"\' EXIT\n'
            f"cat > \"$pins\" <<'CONSTRAINTS'\n{pins.rstrip()}\nCONSTRAINTS\n"
        )
    return f"""\
set -e
echo {q(f"installing Axolotl into {shown} (first use; this takes minutes)")}
{pins}installer=pip
if command -v uv >/dev/null 2>&1 && command -v python3 >/dev/null 2>&1; then
  eval "$(python3 - <<'PIP_TO_UV'
{_PIP_TO_UV}PIP_TO_UV
)"
fi
if [ "$installer" = uv ]; then
  echo 'installing with uv'
  # pip takes the best version over every source (a local +cpu wheel over PyPI's): so does uv.
  [ -n "${{UV_INDEX_STRATEGY:-}}" ] || export UV_INDEX_STRATEGY=unsafe-best-match
  [ -x {venv}/bin/python ] || uv venv --python "$(command -v python3)" {venv} 2>&1
  uv pip install --python {venv}/bin/python {wanted} 2>&1
else
  [ -x {venv}/bin/pip ] || python3 -m venv {venv}
  {venv}/bin/pip install --progress-bar off {wanted} 2>&1
fi
"""
