"""A real OpenSSH server for this user on 127.0.0.1 and a spare port (Debian's openssh-server),
with its own host key and a throwaway client key in a temp dir: the remote tests' and the play
bench's "server". Nothing outside the temp dir is read or written (/run/sshd, as root: sshd's
privilege separation directory)."""
from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.helpers import wait_for
from tests.plugins.base import die_with_parent, free_port

SSHD = "/usr/sbin/sshd"


@contextlib.contextmanager
def running_sshd():
    """A real sshd on 127.0.0.1:<spare port> for this user, with its own host key and a throwaway
    client key in a temp dir; yields (ssh config file, host alias, process); stopped after."""
    d = Path(tempfile.mkdtemp(prefix="msshd-", dir="/tmp"))
    os.chmod(d, 0o700)
    for name in ("host_key", "client_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / name)], check=True)
    shutil.copy(d / "client_key.pub", d / "authorized_keys")
    os.chmod(d / "authorized_keys", 0o600)
    port = free_port()
    (d / "sshd_config").write_text(f"""
Port {port}
ListenAddress 127.0.0.1
HostKey {d / 'host_key'}
AuthorizedKeysFile {d / 'authorized_keys'}
PidFile {d / 'sshd.pid'}
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin prohibit-password
UsePAM no
StrictModes no
AllowStreamLocalForwarding yes
AllowTcpForwarding yes
""")
    if os.getuid() == 0:
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)   # the privilege separation directory sshd needs as root
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(d / "sshd_config")],
                            stdout=subprocess.DEVNULL, stderr=open(d / "sshd.log", "wb"), preexec_fn=die_with_parent)
    config = d / "ssh_config"
    config.write_text(f"""
Host server
  HostName 127.0.0.1
  Port {port}
  User {os.environ.get('USER') or __import__('pwd').getpwuid(os.getuid()).pw_name}
  IdentityFile {d / 'client_key'}
  IdentitiesOnly yes
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  LogLevel ERROR
""")
    try:
        def up():
            return subprocess.run(["ssh", "-F", str(config), "-o", "BatchMode=yes", "server", "true"],
                                  capture_output=True, timeout=20).returncode == 0
        wait_for(up, 30, 0.2, "sshd to accept the test key")
        yield str(config), "server", proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(d, ignore_errors=True)
