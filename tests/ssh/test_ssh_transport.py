"""Connecting over SSH (addresses, the SSH config, host keys, failures) and the transport's
primitives, against a real sshd."""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from overbrainer.plugin import Project, UserError
from overbrainer.plugin.host import HostError, HostExecutor
from overbrainer_ssh import SshTarget, create_executor
from overbrainer_ssh.host import SshHost


def executor_for(address: str | None, **target: str) -> HostExecutor:
    """The hook's executor for the target ``gpu`` at ``address`` (only the project's
    environment is used)."""
    model = SshTarget(kind="ssh", host=address, **target)
    project = Project(dir=Path("/nonexistent"), settings=None, env={})  # type: ignore[arg-type]
    return create_executor(name="gpu", target=model, project=project, run=None)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_the_plugin_does_not_import_fabric_until_a_target_is_used():
    code = "import overbrainer_ssh, sys; print('fabric' in sys.modules, 'paramiko' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_an_unset_host_says_how_to_set_it():
    message = r"^targets\.gpu\.host is not set: set OVERBRAINER_TARGETS__GPU__HOST$"
    with pytest.raises(UserError, match=message):
        executor_for(None)


def test_the_alias_of_the_ssh_config_is_honoured(ssh_alias, sshd):
    # HostName, Port, User and IdentityFile (a key no default name would find) all come
    # from ~/.ssh/config, with no agent.
    executor = executor_for(ssh_alias)
    try:
        assert executor.host.check("id -un; echo $HOME\n").split() == [sshd.user, str(sshd.home)]
        assert executor.root == f"{sshd.home}/overbrainer"  # workdir relative to the remote home
    finally:
        executor.close()


def test_the_user_of_the_alias_is_the_one_used(client_config, sshd, isolated_env):
    client_config("ghost-box")
    config = isolated_env / ".ssh" / "config"
    config.write_text(
        config.read_text().replace(
            f"Host ghost-box\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User {sshd.user}",
            f"Host ghost-box\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User ghost",
        )
    )
    with pytest.raises(UserError, match=r"cannot reach target `gpu`: authentication as ghost"):
        executor_for("ghost-box")


def test_user_at_host_and_port_with_a_default_key(client_config, sshd, isolated_env):
    client_config()
    key = isolated_env / ".ssh" / "id_ed25519"
    key.write_bytes(sshd.keys.client_key.read_bytes())
    key.chmod(0o600)
    executor = executor_for(f"{sshd.user}@127.0.0.1:{sshd.port}", workdir="/tmp")
    try:
        assert executor.host.check("echo ok\n") == "ok\n"
    finally:
        executor.close()


def test_an_ssh_config_file_of_its_own_replaces_the_users(ssh_alias, sshd, isolated_env):
    # How a machine made for one run is reached: its own config, known_hosts and key.
    ssh_dir = isolated_env / ".ssh"
    own = isolated_env / "run-ssh"
    own.mkdir()
    (ssh_dir / "known_hosts").rename(own / "known_hosts")
    (ssh_dir / "overbrainer_test_key").rename(own / "key")
    (ssh_dir / "config").write_text("Host pod\n  HostName 192.0.2.1\n")  # must not be read
    (own / "config").write_text(
        f"Host pod\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User {sshd.user}\n"
        f"  IdentityFile {own / 'key'}\n  UserKnownHostsFile {own / 'known_hosts'}\n"
    )
    host = SshHost("gpu", "pod", ssh_config=own / "config")
    try:
        assert host.check("echo reached\n") == "reached\n"
    finally:
        host.close()


def test_a_proxyjump_in_the_ssh_config_is_followed(ssh_alias, sshd, isolated_env):
    with (isolated_env / ".ssh" / "config").open("a") as config:
        config.write(
            f"Host far\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User {sshd.user}\n"
            f"  IdentityFile {isolated_env / '.ssh' / 'overbrainer_test_key'}\n"
            f"  ProxyJump {ssh_alias}\n"
        )
    host = SshHost("gpu", "far")
    try:
        host.connect()
        assert host.check("echo $SSH_CONNECTION\n").split()[0] == "127.0.0.1"
        assert host._connection.gateway.is_connected
    finally:
        host.close()


def test_an_unknown_host_key_is_refused_and_never_added(client_config, sshd, isolated_env):
    client_config(known=False)
    with pytest.raises(UserError) as caught:
        executor_for("box")
    message = str(caught.value)
    where = f"[127.0.0.1]:{sshd.port}"
    assert message.startswith(f"cannot reach target `gpu`: the host key of {where} is not known")
    assert "ssh-ed25519 SHA256:" in message
    assert f"`ssh-keyscan -p {sshd.port} 127.0.0.1 >> ~/.ssh/known_hosts`" in message
    assert message.endswith("(or connect once with `ssh box`)")
    assert (isolated_env / ".ssh" / "known_hosts").read_text() == ""
    assert "Accepted publickey" not in sshd.log.read_text()


def test_refused_connections_leave_no_thread_behind(client_config, sshd):
    client_config(known=False)
    address = f"{sshd.user}@127.0.0.1:{sshd.port}"
    before = threading.active_count()
    for _ in range(3):
        with pytest.raises(UserError, match=rf"`ssh -p {sshd.port} {sshd.user}@127.0.0.1`"):
            SshHost("gpu", address).connect()
    deadline = time.monotonic() + 5
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() <= before


def test_a_changed_host_key_is_refused(client_config, sshd, isolated_env, tmp_path):
    client_config(known=False)
    other = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    line = f"[127.0.0.1]:{sshd.port} " + " ".join(other.with_suffix(".pub").read_text().split()[:2])
    (isolated_env / ".ssh" / "known_hosts").write_text(line + "\n")
    with pytest.raises(UserError, match=rf"the host key of \[127.0.0.1\]:{sshd.port} changed"):
        executor_for("box")


def test_an_unreachable_port_says_so():
    port = free_port()
    refused = rf"^cannot reach target `gpu`: 127\.0\.0\.1 port {port}: connection refused$"
    with pytest.raises(UserError, match=refused):
        executor_for(f"127.0.0.1:{port}")


def test_an_unknown_host_name_says_so():
    unknown = r"^cannot reach target `gpu`: no-such-host\.invalid: unknown host name"
    with pytest.raises(UserError, match=unknown):
        executor_for("no-such-host.invalid")


# The primitives.


@pytest.fixture
def host(ssh_alias):
    host = SshHost("box", ssh_alias)
    yield host
    host.close()


def test_stdout_and_stderr_are_both_read_however_much_comes(host):
    script = "head -c 5000000 /dev/zero | tr '\\0' e >&2; head -c 5000000 /dev/zero; echo end >&2"
    done = host.run(script)
    assert done.code == 0
    assert len(done.stdout) == 5_000_000
    assert done.stderr.endswith(b"eeeend\n")  # the tail is kept


def test_a_large_input_is_fed_while_output_is_read(host):
    data = os.urandom(6_000_000)
    done = host.run("cat; cat /dev/null", input=data)
    assert done.stdout == data


def test_a_slow_script_times_out_and_the_next_call_works(host):
    started = time.monotonic()
    with pytest.raises(HostError, match="took more than 1 s"):
        host.run("sleep 30", timeout=1)
    assert time.monotonic() - started < 5
    assert host.check("echo again\n") == "again\n"


def test_a_failed_stream_raises_with_its_error(host):
    script = "echo out; echo no such thing >&2; exit 2"
    with pytest.raises(HostError, match="no such thing"), host.stream_out(script) as stream:
        assert stream.read() == b"out\n"


def test_a_stream_in_that_the_script_refuses_reports_its_error(host):
    def write(stream):
        stream.write(b"x" * 10_000_000)

    done = host.stream_in("echo refused >&2; exit 5", write)
    assert done.code == 5
    assert b"refused" in done.stderr


def test_a_bulk_download_survives_the_server_rekeying_often(host, sshd):
    # paramiko's own rekeys can stall a busy channel (paramiko#822): the transport leaves
    # rekeying to the server, and those must work mid-stream (4 MB: 5 rekeys here).
    sshd.stop()
    sshd.options.append("RekeyLimit 4M")
    sshd.start()
    digest = hashlib.sha256()
    with host.stream_out("head -c 20000000 /dev/zero") as stream:
        while block := stream.read(1 << 20):
            digest.update(block)
    assert digest.hexdigest() == hashlib.sha256(bytes(20_000_000)).hexdigest()
    assert host.check("echo still here\n") == "still here\n"
    assert host._connection.transport.packetizer.REKEY_BYTES >= 1 << 60


def test_a_connection_dropped_while_a_script_runs_says_so(host, sshd):
    # The server's end goes away mid-script: the channel closes with no exit status,
    # which is a lost connection (not a script that failed), and the next call reconnects.
    stopper = threading.Timer(0.5, sshd.stop)
    stopper.start()
    try:
        with pytest.raises(HostError, match="lost the connection to target `box`"):
            host.run("sleep 30")
    finally:
        stopper.join()
    sshd.start()
    assert host.check("echo again\n") == "again\n"
    assert host.run("kill -KILL $$").code == -1  # killed by a signal: no status, no error
