"""A local PostgreSQL for `make cluster` and the tests: Debian's postgresql server
(`initdb`, `pg_ctl`), a cluster in a directory of its own, created on first use, listening
on loopback only, with trust authentication for the local `postgres` user.

PostgreSQL refuses to run as root: when run by root, the cluster belongs to the `postgres`
system user and its commands run through `runuser`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path


def _bin_dirs() -> list[str]:
    """Debian's versioned directories (newest first), then the PATH's usual places."""
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin"),
                      key=lambda d: int(d.parent.name) if d.parent.name.isdigit() else 0,
                      reverse=True)
    return [str(d) for d in versions] + ["/usr/local/bin", "/usr/bin"]


class PostgresMissing(RuntimeError):
    """No PostgreSQL server on this machine (install Debian's `postgresql` package)."""


def tool(name: str) -> str:
    """The path of a PostgreSQL program (initdb, pg_ctl, psql, pg_dump), Debian's newest."""
    for directory in _bin_dirs():
        path = Path(directory) / name
        if path.exists():
            return str(path)
    found = shutil.which(name)
    if found is None:
        raise PostgresMissing(f"{name} not found: install the postgresql package "
                              "(apt-get install -y postgresql)")
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalPostgres:
    """One PostgreSQL cluster in ``directory`` on ``port`` (loopback)."""

    def __init__(self, directory: Path, port: int) -> None:
        self.directory = directory.resolve()
        self.port = port
        self.as_postgres = os.geteuid() == 0

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        full = list(command)
        if self.as_postgres:
            full = ["runuser", "-u", "postgres", "--", *full]
        return subprocess.run(full, capture_output=True, text=True, check=check, timeout=120)

    def create(self) -> None:
        """initdb, unless the cluster exists."""
        if (self.directory / "PG_VERSION").exists():
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        if self.as_postgres:
            shutil.chown(self.directory, "postgres", "postgres")
        self.directory.chmod(0o700)
        done = self._run(tool("initdb"), "-D", str(self.directory), "-U", "postgres",
                         "--auth=trust", "-E", "UTF8", "--no-instructions", check=False)
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed: {done.stderr.strip()[:500]}")

    def start(self) -> None:
        """Start the server (and wait until it accepts connections)."""
        options = (f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.directory} "
                   "-c max_connections=200 -c shared_buffers=64MB")
        done = self._run(tool("pg_ctl"), "-D", str(self.directory), "-l",
                         str(self.directory / "server.log"), "-o", options, "-w", "-t", "60",
                         "start", check=False)
        if done.returncode != 0:
            log = (self.directory / "server.log")
            tail = log.read_text()[-800:] if log.exists() else ""
            raise RuntimeError(f"pg_ctl start failed: {done.stderr.strip()[:300]} {tail}")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("PostgreSQL did not start listening")

    def is_running(self) -> bool:
        return self._run(tool("pg_ctl"), "-D", str(self.directory), "status",
                         check=False).returncode == 0

    def stop(self) -> None:
        """Stop the server, whatever it is doing: a fast shutdown (clients disconnected), and
        if that did not end it in time, an immediate one, and then SIGKILL of its postmaster
        (the server of a test that failed must not outlive the test run)."""
        for mode in ("fast", "immediate"):
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._run(tool("pg_ctl"), "-D", str(self.directory), "-m", mode, "-w",
                          "-t", "30", "stop", check=False)
            if not self.is_running():
                return
        pid_file = self.directory / "postmaster.pid"
        with contextlib.suppress(OSError, ValueError, IndexError):
            os.kill(int(pid_file.read_text().split()[0]), signal.SIGKILL)
