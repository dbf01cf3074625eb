"""The job's wire protocol on a POSIX host: each script beside the parser of its answer.

``status_script`` prints a ``status`` line (``running``, ``cancelled``, ``exited N``,
``lost``) and the job's news, which :func:`parse_status` reads; ``cancel_script`` prints
the final status line, or fails with one of the ``CANCEL_*`` exit codes, which the
executor and the tests read by name. A job's processes are told apart from any other by
``TOKEN_VAR`` in their environment (see :mod:`overbrainer.job.scripts`).
"""

from __future__ import annotations

import shlex

from overbrainer.job.host import HostError
from overbrainer.job.spec import CANCELLED, LOST, RUNNING, JobStatus

TOKEN_VAR = "OVERBRAINER_JOB"  # noqa: S105 - a variable's name; its value is no secret
METRICS_CAP = 1 << 20
SNAPSHOT_CAP = 64 << 10
MACHINE_CAP = 64 << 10
WAIT_TERM_S = 10
WAIT_KILL_S = 10
CANCEL_NO_PID = 3
"""``cancel_script``: no valid pid, recorded or in ``job.pid``."""
CANCEL_SURVIVED_KILL = 4
"""``cancel_script``: the group survived KILL (``cancelling`` stays: the status reads running)."""
CANCEL_NOT_THE_JOB = 5
"""``cancel_script``: the group is not the job's, or cannot be tied to it (no ``/proc``)."""

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


# Without a token (the reference tool's records, older or edited ones), a group is the
# job's only if a live member runs in the job's directory, the one the script runs in.
# `group_dirs` prints the directory of each live member of group $1, a line each.
_TIED = """\
group_dirs() {
  for f in /proc/[0-9]*/stat; do
    read -r line 2>/dev/null < "$f" || continue
    set -- "$1" ${line##*) }
    [ "$4" = "$1" ] && [ "$2" != Z ] || continue
    readlink "${f%/stat}/cwd" 2>/dev/null || echo "(a directory it cannot read)"
  done
}
tied() {
  group_dirs "$1" | grep -qxF -- "$(pwd -P)"
}
"""


# The processes that carry the job's token $1, a pid a line: those of the group, and the
# ranks torch's launcher starts in sessions of their own (training on several GPUs).
_CARRIERS = f"""\
carriers() {{
  [ -r /proc/self/environ ] || return 0
  for f in /proc/[0-9]*/stat; do
    read -r line 2>/dev/null < "$f" || continue
    set -- "$1" ${{line##*) }}
    [ "$2" != Z ] || continue
    d=${{f%/stat}}
    tr '\\0' '\\n' 2>/dev/null < "$d/environ" | grep -qx "{TOKEN_VAR}=$1" && echo "${{d#/proc/}}"
  done
  return 0
}}
"""


def _alive(token: str | None) -> str:
    """``alive``: the job of ``job.pid`` runs (proven by ``token`` when there is one, tied by
    its directory otherwise, where ``/proc`` can tell)."""
    proof = f' && {{ [ ! -r /proc/self/environ ] || proven "$pid" {q(token)}; }}' if token else (
        ' && { [ ! -r /proc/self/stat ] || tied "$pid"; }'
    )
    return (
        _GROUP_ALIVE
        + _PROVEN
        + _TIED
        + f"""\
alive() {{
  pid=$(cat job.pid 2>/dev/null) || return 1
  case $pid in ''|*[!0-9]*) return 1;; esac
  [ "$pid" -gt 1 ] && group_alive "$pid"{proof}
}}
"""
    )


def status_script(root: str, offset: int, token: str | None = None) -> str:
    """One look at the job: its status, a pending request, a saved snapshot, new metrics.

    Each file is read once, its length counted from what was read: the runner replaces
    ``machine.json`` with each sample, and a second read could give other bytes than
    the length printed (the output then misread, the metrics read again from the start).

    Output: a ``status`` line; ``request <reason>`` when ``snapshot.request`` exists;
    ``snapshot <n>`` followed by n bytes of ``snapshot.json`` (at most 64 KiB + 1, so a
    larger file shows as too large); ``machine <n>`` followed by n bytes of the
    runner's latest ``machine.json`` (at most 64 KiB); ``metrics <size>`` then the bytes of
    ``metrics.jsonl`` from ``offset`` (at most 1 MiB) to the end of the output. A group
    that does not carry ``token`` (without one: none of whose processes runs in ``root``)
    is not the job's: without an exit code, it is lost.
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
  s=$(head -c {SNAPSHOT_CAP + 1} snapshot.json; echo x); s=${{s%x}}
  echo "snapshot $(printf '%s' "$s" | wc -c)"; printf '%s' "$s"
fi
if [ -f machine.json ]; then
  m=$(head -c {MACHINE_CAP} machine.json; echo x); m=${{m%x}}
  echo "machine $(printf '%s' "$m" | wc -c)"; printf '%s' "$m"
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
    record) or, without a token, none of whose processes runs in the job's directory.
    Exits ``CANCEL_NO_PID``, ``CANCEL_SURVIVED_KILL`` or ``CANCEL_NOT_THE_JOB`` (above) when
    it cannot.
    """
    stop = ""
    if container is not None:
        engine, name = container
        stop = f"{q(engine)} stop -t 30 {q(name)} >/dev/null 2>&1\n"
    # No token (the reference tool's records, older or edited ones): a pid is reused, so
    # the group is signalled only if one of its processes runs in the job's directory.
    proof = _TIED + f"""\
if group_alive "$pid" && ! {{ [ -r /proc/self/stat ] && tied "$pid"; }}; then
  if [ -r /proc/self/stat ]; then
    where=$(group_dirs "$pid" | sort -u | head -n 5 \\
      | {{ w=; while IFS= read -r d; do w="${{w:+$w, }}$d"; done; printf '%s' "$w"; }})
    echo "process group $pid is not this job's: its run record has no job token and none \\
of its processes runs in the job's directory (they run in $where); nothing was signalled"
  else
    echo "process group $pid cannot be tied to this job: its run record has no job token \\
and /proc is not readable; nothing was signalled. If it is the job, stop it by hand: \\
kill -TERM -$pid"
  fi
  exit {CANCEL_NOT_THE_JOB}
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
  exit {CANCEL_NOT_THE_JOB}
fi
"""
    # Whatever still carries the token once the group is gone (ranks in sessions of their
    # own) is the job's too: killed, as the group was.
    sweep = "" if not token else _CARRIERS + f"""\
i=0
while left=$(carriers {q(token)}); [ -n "$left" ]; do
  [ $i -ge {WAIT_KILL_S * 10} ] && {{ echo "the job survived KILL"; exit {CANCEL_SURVIVED_KILL}; }}
  kill -KILL $left 2>/dev/null
  sleep 0.1; i=$((i + 1))
done
"""
    return f"""\
if ! cd {q(root)} 2>/dev/null; then echo "status lost"; exit 0; fi
if [ -f cancelled ]; then echo "status cancelled"; exit 0; fi
if [ -f exit_code ]; then echo "status exited $(cat exit_code)"; exit 0; fi
pid={pid if pid is not None else "$(cat job.pid 2>/dev/null)"}
case $pid in ''|*[!0-9]*) echo "no job.pid"; exit {CANCEL_NO_PID};; esac
if [ "$pid" -le 1 ]; then echo "invalid job.pid"; exit {CANCEL_NO_PID}; fi
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
    if ! wait_gone {WAIT_KILL_S * 10}; then
      echo "the job survived KILL"; exit {CANCEL_SURVIVED_KILL}
    fi
  fi
fi
{sweep}\
: > cancelled.tmp && mv -f cancelled.tmp cancelled
echo "status cancelled"
"""


def status_line(line: str) -> JobStatus:
    """The status of a ``status`` line (``status_script``'s first, ``cancel_script``'s last)."""
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


def parse_status(
    output: bytes,
) -> tuple[JobStatus, str | None, str | None, str | None, int, bytes]:
    """Split ``status_script``'s output into the status, a pending request, a saved snapshot,
    the latest machine sample, the size of ``metrics.jsonl`` and its new bytes (-1 and none
    when the output has no ``metrics`` line: nothing to say of the metrics this time)."""
    rest = output
    line, _, rest = rest.partition(b"\n")
    status = status_line(line.decode("ascii", "replace"))
    request = snapshot = machine = None
    size = 0
    while rest:
        line, _, rest = rest.partition(b"\n")
        word, _, value = line.decode("ascii", "replace").partition(" ")
        if word == "request":
            request = value.strip()
        elif word == "snapshot":
            length = int(value)
            snapshot, rest = rest[:length].decode("utf-8", "replace"), rest[length:]
        elif word == "machine" and value.strip().isdigit():
            length = int(value)
            machine, rest = rest[:length].decode("utf-8", "replace"), rest[length:]
        elif word == "metrics":
            size = int(value) if value.strip().isdigit() else 0
            return status, request, snapshot, machine, size, rest
    return status, request, snapshot, machine, -1, b""
