"""The watchdog of a served engine: runs on the target, beside it, with python3 alone.

    python3 watchdog.py --port P --idle SECONDS --pid-file FILE -- ENGINE ARGV...

Started in a session of its own, it writes its pid (the session's process group, which the
engine joins), starts the engine and waits. It ends the engine, and itself, when the engine
ends, on TERM/INT/HUP, and when no connection to the engine's port on 127.0.0.1 has been
open for ``--idle`` seconds (the established TCP connections of ``/proc/net/tcp*``), so a
serve whose command was killed, or that a user forgot, stops costing.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time

CHECK_S = 5.0
GRACE_S = 10.0
ESTABLISHED = "01"


def connected(port: int) -> bool:
    """Whether a TCP connection to ``port`` on this machine is established."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as lines:
                next(lines, None)
                for line in lines:
                    fields = line.split()
                    if (
                        len(fields) > 3
                        and fields[3] == ESTABLISHED
                        and int(fields[1].rsplit(":", 1)[1], 16) == port
                    ):
                        return True
        except OSError:
            continue
    return False


class Stop(Exception):
    """TERM, INT or HUP arrived."""


def stop(signum: int, frame: object) -> None:
    raise Stop


def end(engine: subprocess.Popen[bytes]) -> None:
    """TERM the engine, KILL it after ``GRACE_S``."""
    if engine.poll() is None:
        engine.terminate()
        try:
            engine.wait(GRACE_S)
        except subprocess.TimeoutExpired:
            engine.kill()
            engine.wait()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--idle", type=float, required=True)
    parser.add_argument("--pid-file", required=True)
    parser.add_argument("argv", nargs=argparse.REMAINDER)
    options = parser.parse_args()
    argv = options.argv[1:] if options.argv[:1] == ["--"] else options.argv
    temp = options.pid_file + ".tmp"
    with open(temp, "w", encoding="ascii") as file:
        file.write(f"{os.getpid()}\n")
    os.replace(temp, options.pid_file)
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, stop)
    try:
        engine = subprocess.Popen(argv)
    except OSError as error:
        print(f"watchdog: cannot start {argv[0]}: {error}", flush=True)
        return 127
    try:
        return watch(engine, options.port, options.idle)
    except Stop:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the group's TERM reached us first
        print("watchdog: asked to stop: ending the engine", flush=True)
        end(engine)
        return 0


def watch(engine: subprocess.Popen[bytes], port: int, idle: float) -> int:
    """Until the engine ends, or no connection for ``idle`` seconds."""
    last = time.monotonic()
    while engine.poll() is None:
        if connected(port):
            last = time.monotonic()
        elif time.monotonic() - last > idle:
            print(f"watchdog: no connection for {idle:.0f} s: ending the engine", flush=True)
            end(engine)
            return 0
        time.sleep(min(CHECK_S, max(0.2, idle / 10)))
    print(f"watchdog: the engine ended with status {engine.returncode}", flush=True)
    return engine.returncode


if __name__ == "__main__":
    sys.exit(main())
