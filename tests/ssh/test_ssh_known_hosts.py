"""Host keys checked as OpenSSH checks them: the files UserKnownHostsFile and
GlobalKnownHostsFile name (in place of the default ones), and StrictHostKeyChecking, against
the real sshd. Nothing here reads the real ~/.ssh: $HOME is the test's own."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from loguru import logger

from overbrainer.errors import UserError
from overbrainer_ssh.host import SshHost


@pytest.fixture
def ssh(sshd, isolated_env, monkeypatch):
    """Writes ``~/.ssh/config`` for the alias ``box`` with the given extra lines, and
    returns a function connecting to it (``None`` when it connected, else the refusal)."""
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    ssh_dir = isolated_env / ".ssh"
    ssh_dir.mkdir(mode=0o700, exist_ok=True)
    key = ssh_dir / "overbrainer_test_key"
    shutil.copyfile(sshd.keys.client_key, key)
    key.chmod(0o600)

    def configure(*lines: str) -> None:
        (ssh_dir / "config").write_text(
            f"Host box\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User {sshd.user}\n"
            f"  IdentityFile {key}\n  IdentitiesOnly yes\n"
            + "".join(f"  {line}\n" for line in lines)
        )

    return configure


def connect() -> str | None:
    host = SshHost("gpu", "box")
    try:
        host.connect()
        assert host.check("echo reached\n") == "reached\n"
    except UserError as refused:
        return str(refused)
    finally:
        host.close()
    return None


def other_key_line(sshd, tmp_path) -> str:
    """A known_hosts line for the server's address with a key that is not its own."""
    other = tmp_path / "other_host_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    public = " ".join(other.with_suffix(".pub").read_text().split()[:2])
    return f"[127.0.0.1]:{sshd.port} {public}\n"


def not_known(sshd) -> str:
    return f"cannot reach target `gpu`: the host key of [127.0.0.1]:{sshd.port} is not known"


def test_the_default_file_is_not_read_when_the_config_names_another(
    ssh, sshd, isolated_env, tmp_path
):
    (isolated_env / ".ssh" / "known_hosts").write_text(sshd.host_key_line())
    named = tmp_path / "named_known_hosts"
    named.write_text("")
    ssh(f"UserKnownHostsFile {named}")
    refused = connect()
    assert refused is not None
    assert refused.startswith(not_known(sshd))
    assert f">> {named}`" in refused  # how to trust it names the file that is read
    assert "Accepted publickey" not in sshd.log.read_text()


def test_a_key_only_in_the_named_file_is_trusted_whatever_the_default_file_says(
    ssh, sshd, isolated_env, tmp_path
):
    (isolated_env / ".ssh" / "known_hosts").write_text(other_key_line(sshd, tmp_path))
    named = tmp_path / "named_known_hosts"
    named.write_text("# the pod of this run\n" + sshd.host_key_line())
    ssh(f"UserKnownHostsFile {named}")
    assert connect() is None


def test_several_named_files_with_tokens_and_hashed_names(ssh, sshd, isolated_env, tmp_path):
    second = isolated_env / ".ssh" / "second_known_hosts"
    second.write_text(sshd.host_key_line())
    subprocess.run(["ssh-keygen", "-q", "-H", "-f", str(second)], check=True)
    assert "127.0.0.1" not in second.read_text()  # hashed
    ssh('UserKnownHostsFile ~/.ssh/missing "%d/.ssh/second_known_hosts"')
    assert connect() is None


def test_no_user_file_at_all(ssh, sshd, isolated_env):
    (isolated_env / ".ssh" / "known_hosts").write_text(sshd.host_key_line())
    ssh("UserKnownHostsFile none")
    assert (connect() or "").startswith(not_known(sshd))


def test_the_global_file_the_config_names_is_read(ssh, sshd, tmp_path):
    global_file = tmp_path / "ssh_known_hosts"
    global_file.write_text(f"other.example,[127.0.0.1]:{sshd.port} " + sshd.host_key_line().split(
        " ", 1)[1])
    ssh(f"UserKnownHostsFile {tmp_path / 'empty'}", f"GlobalKnownHostsFile {global_file}")
    assert connect() is None


def test_a_changed_key_in_the_named_file_is_refused(ssh, sshd, isolated_env, tmp_path):
    (isolated_env / ".ssh" / "known_hosts").write_text(sshd.host_key_line())
    named = tmp_path / "named_known_hosts"
    named.write_text(other_key_line(sshd, tmp_path))
    ssh(f"UserKnownHostsFile {named}")
    refused = connect() or ""
    assert refused.startswith(
        f"cannot reach target `gpu`: the host key of [127.0.0.1]:{sshd.port} changed"
    )


def test_a_revoked_key_is_refused(ssh, sshd, tmp_path):
    named = tmp_path / "named_known_hosts"
    line = sshd.host_key_line()
    named.write_text(line + "@revoked * " + line.split(" ", 1)[1])
    ssh(f"UserKnownHostsFile {named}")
    assert (connect() or "").startswith(
        f"cannot reach target `gpu`: the host key of [127.0.0.1]:{sshd.port} is revoked"
    )


@pytest.mark.parametrize("strict", [None, "yes", "ask"])
def test_an_unknown_key_is_refused_unless_the_config_says_otherwise(
    ssh, sshd, isolated_env, strict
):
    (isolated_env / ".ssh" / "known_hosts").write_text("")
    ssh(*([f"StrictHostKeyChecking {strict}"] if strict else []))
    assert (connect() or "").startswith(not_known(sshd))
    assert (isolated_env / ".ssh" / "known_hosts").read_text() == ""


def test_accept_new_adds_an_unknown_key_to_the_first_named_file(
    ssh, sshd, isolated_env, tmp_path
):
    (isolated_env / ".ssh" / "known_hosts").write_text("")
    named = tmp_path / "pods" / "known_hosts"
    ssh(f"UserKnownHostsFile {named} {tmp_path / 'second'}", "StrictHostKeyChecking accept-new",
        "HashKnownHosts no")
    said: list[str] = []
    logger.add(said.append, format="{message}", level="WARNING")
    assert connect() is None
    assert said[0].startswith(
        f"the host key of [127.0.0.1]:{sshd.port} (ssh-ed25519 SHA256:"
    )
    assert said[0].endswith(
        f") was not known: added to {named} (StrictHostKeyChecking accept-new)\n"
    )
    assert named.read_text() == sshd.host_key_line()
    assert (isolated_env / ".ssh" / "known_hosts").read_text() == ""
    assert not (tmp_path / "second").exists()
    assert connect() is None  # known now
    named.write_text(other_key_line(sshd, tmp_path))  # a new key for the same address
    assert "changed" in (connect() or "")


def test_a_key_added_is_hashed_when_the_config_says_so(ssh, sshd, tmp_path):
    named = tmp_path / "known_hosts"
    ssh(f"UserKnownHostsFile {named}", "StrictHostKeyChecking accept-new", "HashKnownHosts yes")
    assert connect() is None
    name, key = named.read_text().split(" ", 1)
    assert name.startswith("|1|")
    assert key == sshd.host_key_line().split(" ", 1)[1]
    ssh(f"UserKnownHostsFile {named}", "StrictHostKeyChecking yes")
    assert connect() is None


def test_no_checking_for_a_throwaway_machine(ssh, sshd):
    # The usual recipe for a machine made for one run.
    ssh("UserKnownHostsFile /dev/null", "StrictHostKeyChecking no")
    assert connect() is None
