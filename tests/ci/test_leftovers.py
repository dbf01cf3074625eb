"""``.ci/leftovers``: CI fails a tier whose tests leave a process running, even one that
started a session of its own, as a training job does."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LEFTOVERS = Path(__file__).parents[2] / ".ci" / "leftovers"


@contextmanager
def leaving(script: str, named: str) -> Iterator[tuple[subprocess.CompletedProcess[str], bool]]:
    """``.ci/leftovers sh -c SCRIPT`` (a 2 s grace), and whether it named a process left as
    ``named``; that process is killed, by the pid it gave, once the block is done."""
    done = subprocess.run(
        [str(LEFTOVERS), "sh", "-c", script],
        capture_output=True,
        text=True,
        env={**os.environ, "CI_LEFTOVERS_GRACE_S": "2"},
        timeout=60,
        check=False,
    )
    found = re.search(rf"^  (\d+) {re.escape(named)}$", done.stderr, re.MULTILINE)
    try:
        yield done, found is not None
    finally:
        if found:
            os.kill(int(found[1]), signal.SIGKILL)


def test_a_process_left_behind_fails_the_command_and_is_named():
    script = "setsid sleep 61 </dev/null >/dev/null 2>&1 & exit 0"
    with leaving(script, "sleep 61") as (done, named):
        assert done.returncode == 1
        assert done.stderr.startswith("processes left running by: sh -c setsid sleep 61")
        assert named, done.stderr


def test_without_leftovers_the_command_s_own_exit_code_is_kept():
    for script, code in (("exit 0", 0), ("exit 3", 3), ("sleep 0.2 & wait", 0)):
        done = subprocess.run(
            [str(LEFTOVERS), "sh", "-c", script], capture_output=True, text=True, check=False
        )
        assert (done.returncode, done.stderr) == (code, "")


def test_a_process_seen_without_a_command_line_is_still_named_as_left():
    """A process caught between fork and exec, or one that blanked its argv, has an empty
    ``/proc/PID/cmdline``; it is still in the cgroup, so it is reported, not overlooked (the
    group then stays busy, and removing it would fail with a traceback instead)."""
    script = "setsid perl -e '$0 = \"\"; sleep 61' </dev/null >/dev/null 2>&1 & sleep 0.5; exit 0"
    with leaving(script, "[no command line]") as (done, named):
        assert done.returncode == 1, done.stderr
        assert done.stderr.startswith("processes left running by: sh -c setsid perl"), done.stderr
        assert named, done.stderr
