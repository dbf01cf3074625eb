"""The project lock, held by one real process while another tries to take it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

from overbrainer.errors import UserError
from overbrainer.runs.lock import LockHeld, ProjectLock

HOLDER = """
import sys
from pathlib import Path
from overbrainer.runs.lock import ProjectLock

lock = ProjectLock(Path(sys.argv[1]))
lock.acquire()
print("held", flush=True)
sys.stdin.readline()
lock.release()
print("released", flush=True)
"""


@pytest.fixture
def holder(project_dir) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the project's lock until a line reaches its stdin."""
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(project_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout.readline() == "held\n"
        yield process
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
        process.stdin.close()
        process.stdout.close()


def test_a_second_writer_is_refused_with_the_holders_pid(project_dir, holder):
    lock = ProjectLock(project_dir)
    with pytest.raises(LockHeld) as caught:
        lock.acquire()
    assert str(caught.value) == f"another overbrainer (pid {holder.pid}) is using this project"
    assert lock.holder() == holder.pid
    # Refused again, and the holder still has it.
    with pytest.raises(LockHeld):
        lock.acquire()
    assert lock.holder() == holder.pid


def test_the_lock_is_free_once_the_holder_releases_it(project_dir, holder):
    holder.stdin.write("\n")
    holder.stdin.flush()
    assert holder.stdout.readline() == "released\n"
    assert holder.wait(timeout=10) == 0
    lock = ProjectLock(project_dir)
    assert lock.holder() is None
    with lock:
        assert (project_dir / ".overbrainer" / "lock").read_text() == f"{os.getpid()}\n"
    assert (project_dir / ".overbrainer" / "lock").read_text() == ""


def test_a_killed_holder_leaves_the_lock_free(project_dir, holder):
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait(timeout=10)
    lock = ProjectLock(project_dir)
    assert lock.holder() is None
    with lock:
        assert lock.holder() == os.getpid()


def test_two_locks_in_one_process_exclude_each_other(project_dir):
    with ProjectLock(project_dir):
        with pytest.raises(LockHeld) as caught:
            ProjectLock(project_dir).acquire()
        assert caught.value.pid == os.getpid()
    with ProjectLock(project_dir):
        pass


def test_a_symlinked_lock_file_is_refused(project_dir, tmp_path):
    state = project_dir / ".overbrainer"
    state.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("")
    (state / "lock").symlink_to(elsewhere)
    with pytest.raises(UserError) as caught:
        ProjectLock(project_dir).acquire()
    assert str(caught.value) == f"{state / 'lock'} is a symbolic link: refusing to lock through it"
    assert elsewhere.read_text() == ""


def test_a_dangling_symlink_is_refused_and_not_created(project_dir, tmp_path):
    state = project_dir / ".overbrainer"
    state.mkdir()
    (state / "lock").symlink_to(tmp_path / "target")
    with pytest.raises(UserError, match="is a symbolic link: refusing to lock through it"):
        ProjectLock(project_dir).acquire()
    assert not (tmp_path / "target").exists()


def test_a_symlinked_state_directory_is_refused(project_dir, tmp_path):
    (tmp_path / "shared").mkdir()
    (project_dir / ".overbrainer").symlink_to(tmp_path / "shared")
    with pytest.raises(UserError) as caught:
        ProjectLock(project_dir).acquire()
    assert str(caught.value) == (
        f"{project_dir / '.overbrainer'} is a symbolic link: refusing to lock through it"
    )


def test_a_hard_linked_lock_file_is_refused(project_dir, tmp_path):
    state = project_dir / ".overbrainer"
    state.mkdir()
    (state / "lock").write_text("")
    os.link(state / "lock", tmp_path / "other-name")
    with pytest.raises(UserError) as caught:
        ProjectLock(project_dir).acquire()
    assert (
        str(caught.value) == f"{state / 'lock'} has other hard links: refusing to lock through it"
    )


def test_a_state_directory_that_is_a_file_is_refused(tmp_path):
    (tmp_path / ".overbrainer").write_text("not a directory")
    with pytest.raises(UserError, match=r"cannot use .*\.overbrainer: File exists"):
        ProjectLock(tmp_path).acquire()
