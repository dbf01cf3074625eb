"""``overbrainer.files``: the rule every project file goes through, on real files, links
and FIFOs (a FIFO nobody writes to: a blocking open would never return)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from overbrainer import files
from overbrainer.errors import UserError


def test_appends_never_follow_a_link_and_only_go_to_a_regular_file(tmp_path):
    target = tmp_path / "target"
    target.write_bytes(b"kept")
    (tmp_path / "link").symlink_to(target)
    with pytest.raises(UserError, match=r"^x is a symbolic link: refusing to write through it$"):
        files.open_append(tmp_path / "link", "x")
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(UserError, match=r"^x is a FIFO: refusing to write to it$"):
        files.open_append(tmp_path / "fifo", "x")
    assert target.read_bytes() == b"kept"
    fd = files.open_append(tmp_path / "new" / "log", "new/log")
    os.write(fd, b"line\n")
    os.close(fd)
    assert (tmp_path / "new" / "log").read_bytes() == b"line\n"


def test_reads_refuse_fifos_and_devices_and_bound_the_size(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(UserError, match=r"^f is a FIFO: refusing to read it$"):
        files.read_regular(tmp_path / "fifo", "f")
    (tmp_path / "zero").symlink_to("/dev/zero")
    with pytest.raises(UserError, match=r"^z is a device: refusing to read it$"):
        files.read_regular(tmp_path / "zero", "z")
    (tmp_path / "big").write_bytes(b"x" * 11)
    with pytest.raises(UserError, match=r"^b is larger than 10 bytes: refusing to read it$"):
        files.read_regular(tmp_path / "big", "b", limit=10)
    assert files.read_regular(tmp_path / "big", "b", limit=11) == b"x" * 11
    assert files.read_regular(tmp_path / "missing", "m") is None
    (tmp_path / "link").symlink_to(tmp_path / "big")
    assert files.read_regular(tmp_path / "link", "l") == b"x" * 11
    with pytest.raises(UserError, match=r"^l is a symbolic link: refusing to read it$"):
        files.read_regular(tmp_path / "link", "l", follow=False)


def test_an_atomic_write_replaces_a_link_and_refuses_a_linked_directory(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "card").write_bytes(b"theirs")
    project = tmp_path / "project"
    (project / "hub").mkdir(parents=True)
    (project / "hub" / "card").symlink_to(outside / "card")
    files.write_atomic(project / "hub" / "card", b"ours", "hub/card")
    assert (outside / "card").read_bytes() == b"theirs"
    assert (project / "hub" / "card").read_bytes() == b"ours"
    assert stat.S_ISREG(os.lstat(project / "hub" / "card").st_mode)
    (project / "linked").symlink_to(outside, target_is_directory=True)
    with pytest.raises(UserError, match=r"^linked is a symbolic link: refusing to write"):
        files.write_atomic(project / "linked" / "card", b"ours", "linked/card")
    assert sorted(p.name for p in outside.iterdir()) == ["card"]


def test_directories_are_made_without_following_a_link(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "exports").symlink_to(outside, target_is_directory=True)
    with pytest.raises(UserError, match="is a symbolic link: refusing to write through it"):
        files.mkdir_nofollow(tmp_path / "exports" / "job", "exports/job", levels=2)
    assert list(outside.iterdir()) == []
    files.mkdir_nofollow(tmp_path / "a" / "b" / "c", "a/b/c", levels=2)
    assert (tmp_path / "a" / "b" / "c").is_dir()


def test_a_path_from_a_record_must_be_inside_the_root(tmp_path):
    root = tmp_path / "runs"
    (root / "r1").mkdir(parents=True)
    assert files.own_path(str(root / "r1"), root, "remote_dir") == (root / "r1").resolve()
    assert files.own_path("r1", root, "remote_dir") == (root / "r1").resolve()
    for path in (str(tmp_path / "other"), "../other", "/etc"):
        with pytest.raises(UserError, match=r"is not inside .*: refusing to use it$"):
            files.own_path(path, root, "remote_dir")
    (root / "escape").symlink_to(tmp_path, target_is_directory=True)
    with pytest.raises(UserError):
        files.own_path(str(root / "escape"), root, "remote_dir")


def test_check_dir_refuses_a_link_or_a_file(tmp_path: Path):
    files.check_dir(tmp_path / "missing", "m")
    (tmp_path / "file").write_text("")
    with pytest.raises(UserError, match=r"^f is not a directory: refusing to use it$"):
        files.check_dir(tmp_path / "file", "f")
    (tmp_path / "link").symlink_to(tmp_path, target_is_directory=True)
    with pytest.raises(UserError, match=r"^l is a symbolic link: refusing to use it$"):
        files.check_dir(tmp_path / "link", "l")
