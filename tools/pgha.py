"""A PostgreSQL that fails over, for `make cluster-ha` and the tests: Debian's pg_auto_failover
(package postgresql-15-auto-failover, its `pg_autoctl`): a monitor, a primary and a
synchronous secondary, each a PostgreSQL of its own in a directory of ``base``, on loopback
ports, with trust authentication and no TLS (one machine, development and tests only).

Nodes of Copas reach it with libpq's multi-host connection string (``Formation.dsn``)::

    postgresql://postgres@127.0.0.1:P1,127.0.0.1:P2/DB?target_session_attrs=read-write

so every connection they open goes to whichever data node accepts writes now: after a
failover, their next connection finds the new primary.

Replication is synchronous: the formation's defaults (number_sync_standbys 0, every node
with replication-quorum true) make the monitor set ``synchronous_standby_names`` to ``ANY 1
(the standby)`` on the primary, with ``synchronous_commit`` on, as long as the standby is in
sync: a commit is answered only once the standby has it on disk. While the standby is lost,
the primary goes to ``wait_primary`` and commits without it.

How fast a failover is: the monitor's health checks (GUCs of the monitor's PostgreSQL) and
the keepers' timeouts (``pg_autoctl config``), ``Timings`` below. pg_auto_failover's own
defaults take about 30 s to 60 s from a primary's loss to its standby's promotion; ``FAST``
takes about 6 s to 9 s on loopback: the primary is unhealthy once a health check failed
(``health_check_period`` + ``health_check_timeout``, retried ``health_check_max_retries``
times after ``health_check_retry_delay``) and its keeper has not reported for
``node_considered_unhealthy_timeout``; the standby is then promoted, but takes writes only
once the old primary reported itself demoted or ``primary_demote_timeout`` ran out (a dead
one never reports: this is most of the time). ``network_partition_timeout`` (a keeper's) is
how long a primary cut off from both the monitor and its standby keeps serving before it
demotes itself: it must stay below ``primary_demote_timeout``, so that two primaries never
take writes at once.

PostgreSQL and pg_autoctl refuse to run as root: when run by root, every directory belongs to
the ``postgres`` system user and every command runs through ``runuser``, as in
tools/pglocal.py.

    python -m tools.pgha run [--dir DIR]            # a formation in the foreground (Ctrl-C)
    python -m tools.pgha state|kill-primary|switchover [--dir DIR]    # beside a running one
    python -m tools.pgha rejoin NAME [--dir DIR]   # a node killed: back as a secondary
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.pglocal import PostgresMissing, free_port, tool

NODE_NAMES = ("node1", "node2")
STATE_FILE = "formation.ports"  # the ports chosen at creation: "monitor node1 node2"


@dataclass(frozen=True)
class Timings:
    """The failover's knobs (see the module's doc): the monitor's GUCs in milliseconds, the
    keepers' timeout in seconds."""

    health_check_period_ms: int = 5000
    health_check_timeout_ms: int = 5000
    health_check_max_retries: int = 2
    health_check_retry_delay_ms: int = 2000
    node_considered_unhealthy_timeout_ms: int = 20000
    primary_demote_timeout_ms: int = 30000
    startup_grace_period_ms: int = 10000
    network_partition_timeout_s: int = 20

    def monitor_settings(self) -> dict[str, int]:
        return {"pgautofailover.health_check_period": self.health_check_period_ms,
                "pgautofailover.health_check_timeout": self.health_check_timeout_ms,
                "pgautofailover.health_check_max_retries": self.health_check_max_retries,
                "pgautofailover.health_check_retry_delay": self.health_check_retry_delay_ms,
                "pgautofailover.node_considered_unhealthy_timeout":
                    self.node_considered_unhealthy_timeout_ms,
                "pgautofailover.primary_demote_timeout": self.primary_demote_timeout_ms,
                "pgautofailover.startup_grace_period": self.startup_grace_period_ms}


DEFAULTS = Timings()  # pg_auto_failover's own
# One machine, loopback: a failover in seconds. Keep network_partition_timeout below the
# demote timeout (see above).
FAST = Timings(health_check_period_ms=1000, health_check_timeout_ms=1000,
               health_check_max_retries=1, health_check_retry_delay_ms=500,
               node_considered_unhealthy_timeout_ms=2000, primary_demote_timeout_ms=4000,
               startup_grace_period_ms=2000, network_partition_timeout_s=3)


@dataclass(frozen=True)
class NodeState:
    """A data node as the monitor sees it."""

    name: str
    port: int
    reported: str  # the state its keeper last reported (primary, secondary, wait_primary...)
    assigned: str  # the state the monitor wants it in
    healthy: bool  # the monitor's last health check of its PostgreSQL succeeded


def _descendants(root: int) -> list[int]:
    """``root``'s children, their children and so on (from /proc)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            parents.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _parent(pid: int) -> tuple[int, str]:
    """A process's parent: its pid and its name ((0, "") when gone)."""
    with contextlib.suppress(OSError, IndexError, ValueError):
        ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        return ppid, Path(f"/proc/{ppid}/comm").read_text().strip()
    return 0, ""


def kill_tree(root: int) -> int:
    """kill -9 of ``root`` and everything under it, all frozen first (SIGSTOP), so that no
    process of it reacts to another's death (a supervisor restarting its child, a keeper
    telling the monitor): as a machine lost at once. The ``runuser`` that started ``root``
    goes too (it would stop itself when its child stops, and then never reap it: a zombie
    that pg_autoctl takes for a node still running). Returns how many were killed."""
    pids = [root, *_descendants(root)]
    parent, name = _parent(root)
    if name == "runuser":
        pids.insert(0, parent)
    for signum in (signal.SIGSTOP, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signum)
    return len(pids)


def _alive(pid: int) -> bool:
    """A process runs as ``pid`` (a zombie, dead but not yet reaped, does not count)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _running_for(pid_file: Path, directory: Path) -> int | None:
    """The process a pid file names, if it runs and is about ``directory`` (its command line
    names it: a pid left by a killed process may have been given to another one since)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        pid = int(pid_file.read_text().split()[0])
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        if _alive(pid) and str(directory) in command:
            return pid
    return None


class Formation:
    """A monitor and two data nodes under ``base`` (made on first use, kept across runs:
    ``create`` again starts what exists). ``ports``: (monitor, node1, node2), free ones when
    not given (kept in ``base/formation.ports`` for the next start)."""

    def __init__(self, base: Path, *, ports: tuple[int, int, int] | None = None,
                 timings: Timings = FAST, database: str = "postgres") -> None:
        self.base = base.resolve()
        self.timings = timings
        self.database = database
        self.as_postgres = os.geteuid() == 0
        saved = self.base / STATE_FILE
        if saved.exists():
            kept = tuple(int(p) for p in saved.read_text().split())
            if ports is not None and ports != kept:
                raise RuntimeError(f"{self.base} was made with ports {kept}, not {ports}: "
                                   "delete it to start from nothing")
            ports = (kept[0], kept[1], kept[2])
        self.ports = ports or (free_port(), free_port(), free_port())
        self.socket_dir = self.base / "sockets"
        self.monitor_dir = self.base / "monitor"
        self.node_dirs = {name: self.base / name for name in NODE_NAMES}
        self.node_ports = dict(zip(NODE_NAMES, self.ports[1:], strict=True))
        self._started: dict[Path, subprocess.Popen[bytes]] = {}  # reaped once they end

    # ------------------------------------------------------------------ addresses

    @property
    def dsn(self) -> str:
        """The multi-host DSN of ``database`` that follows the primary."""
        return self.dsn_of(self.database)

    def dsn_of(self, database: str) -> str:
        hosts = ",".join(f"127.0.0.1:{port}" for port in self.node_ports.values())
        return f"postgresql://postgres@{hosts}/{database}?target_session_attrs=read-write"

    @property
    def monitor_uri(self) -> str:
        """What the keepers connect to (as pg_autoctl's own user)."""
        return (f"postgres://autoctl_node@127.0.0.1:{self.ports[0]}/pg_auto_failover"
                "?sslmode=disable")

    def _monitor_conninfo(self) -> str:
        return (f"host={self.socket_dir} port={self.ports[0]} user=postgres "
                "dbname=pg_auto_failover connect_timeout=5")

    def node_conninfo(self, name: str) -> str:
        """One data node, whatever its role (for checks: its role, its settings)."""
        return (f"host=127.0.0.1 port={self.node_ports[name]} user=postgres "
                f"dbname={self.database} connect_timeout=3")

    # ------------------------------------------------------------------ running pg_autoctl

    def _environment(self) -> dict[str, str]:
        """pg_autoctl's files (its configuration, state and pid files) under ``base``, and
        every PostgreSQL's Unix socket in ``base/sockets`` (PG_REGRESS_SOCK_DIR: pg_autoctl
        starts its PostgreSQL with -k there), not in /var/run/postgresql."""
        bin_dir = str(_bin_dir())
        return {"XDG_CONFIG_HOME": str(self.base / "config"),
                "XDG_DATA_HOME": str(self.base / "share"),
                "XDG_RUNTIME_DIR": str(self.base / "run"),
                "PG_REGRESS_SOCK_DIR": str(self.socket_dir), "PGHOST": str(self.socket_dir),
                "PG_CONFIG": str(Path(bin_dir) / "pg_config"),
                "PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}"}

    def _command(self, *args: str) -> list[str]:
        environment = [f"{k}={v}" for k, v in self._environment().items()]
        full = ["env", *environment, _pg_autoctl(), *args]
        if self.as_postgres:
            full = ["runuser", "-u", "postgres", "--", *full]
        return full

    def _run(self, *args: str, timeout: float = 120) -> str:
        try:
            done = subprocess.run(self._command(*args), capture_output=True, text=True,
                                  timeout=timeout, check=False)
        except subprocess.TimeoutExpired as exc:
            said = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) \
                else exc.stderr or ""
            raise RuntimeError(f"pg_autoctl {' '.join(args[:2])} took more than {timeout:.0f} "
                               f"s: {said.strip()[-1500:]}") from None
        if done.returncode != 0:
            raise RuntimeError(f"pg_autoctl {args[0]} {args[1] if len(args) > 1 else ''} "
                               f"failed ({done.returncode}): {done.stderr.strip()[-1500:]}")
        return done.stdout

    def _serve(self, directory: Path) -> None:
        """``pg_autoctl run`` for ``directory``, detached (a session of its own), its output
        in ``base/<name>.log``; its pid file says where it runs."""
        log = (self.base / f"{directory.name}.log").open("a")
        with log:
            self._started[directory] = subprocess.Popen(
                self._command("run", "--pgdata", str(directory)), stdin=subprocess.DEVNULL,
                stdout=log, stderr=log, start_new_session=True)

    def _reap(self) -> None:
        """Collect the exit of what this object started and has ended (no zombie left)."""
        for directory, process in list(self._started.items()):
            if process.poll() is not None:
                del self._started[directory]

    def _pid_file(self, directory: Path) -> Path:
        return self.base / "run" / "pg_autoctl" / str(directory).lstrip("/") / "pg_autoctl.pid"

    def service_pid(self, directory: Path) -> int | None:
        """The running ``pg_autoctl run`` of ``directory``, if any."""
        return _running_for(self._pid_file(directory), directory)

    # ------------------------------------------------------------------ life

    def create(self, timeout: float = 180) -> None:
        """Make what does not exist yet (the monitor, then node1, then node2, which copies
        node1 and follows it), start every part, and wait until the formation has a
        primary with a synchronous secondary in sync."""
        _pg_autoctl()  # fails early with what to install
        self.base.mkdir(parents=True, exist_ok=True)
        for sub in ("config", "share", "run", "sockets"):
            (self.base / sub).mkdir(exist_ok=True)
        (self.base / "run").chmod(0o700)
        (self.base / STATE_FILE).write_text(" ".join(map(str, self.ports)) + "\n")
        if self.as_postgres:
            self.base.chmod(0o755)
            for path in [self.base, *self.base.rglob("*")]:
                with contextlib.suppress(OSError):
                    shutil.chown(path, "postgres", "postgres")
            reach = subprocess.run(["runuser", "-u", "postgres", "--", "test", "-w",
                                    str(self.base)], capture_output=True, check=False)
            if reach.returncode != 0:
                raise RuntimeError(f"the postgres user cannot reach {self.base}: make its "
                                   "parent directories traversable (chmod o+x)")
        if not (self.monitor_dir / "PG_VERSION").exists():
            self._run("create", "monitor", "--pgdata", str(self.monitor_dir),
                      "--pgport", str(self.ports[0]), "--hostname", "127.0.0.1",
                      "--auth", "trust", "--no-ssl", "--ssl-mode", "disable",
                      "--pgctl", str(_bin_dir() / "pg_ctl"))
            self._run("config", "set", "--pgdata", str(self.monitor_dir),
                      "postgresql.listen_addresses", "127.0.0.1")
        self._start_service(self.monitor_dir)
        self._wait_monitor(timeout)
        self.apply_timings()
        for name, directory in self.node_dirs.items():
            if not (directory / "PG_VERSION").exists():
                self._run("create", "postgres", "--pgdata", str(directory),
                          "--pgport", str(self.node_ports[name]), "--hostname", "127.0.0.1",
                          "--listen", "127.0.0.1", "--name", name,
                          "--dbname", self.database, "--username", "postgres",
                          "--auth", "trust", "--no-ssl", "--ssl-mode", "disable",
                          "--monitor", self.monitor_uri, "--pgctl", str(_bin_dir() / "pg_ctl"))
                self._run("config", "set", "--pgdata", str(directory),
                          "timeout.network_partition_timeout",
                          str(self.timings.network_partition_timeout_s))
            self._start_service(directory)
            if name == NODE_NAMES[0]:  # the second copies a first that runs
                self._until(lambda: any(n.reported in ("single", "primary", "wait_primary")
                                        for n in self.state()), timeout, "a first primary")
        self.wait_in_sync(timeout)

    def _start_service(self, directory: Path) -> None:
        self._reap()
        if self.service_pid(directory) is None:
            self._serve(directory)

    def _wait_monitor(self, timeout: float) -> None:
        import psycopg

        def answers() -> bool:
            try:
                with psycopg.connect(self._monitor_conninfo()) as db:
                    db.execute("SELECT 1 FROM pgautofailover.formation")
                return True
            except psycopg.Error:
                return False

        self._until(answers, timeout, "the monitor")

    def apply_timings(self) -> None:
        """The monitor's failover GUCs (``Timings``), reloaded at once."""
        import psycopg

        with psycopg.connect(self._monitor_conninfo(), autocommit=True) as db:
            for name, value in self.timings.monitor_settings().items():
                db.execute(f"ALTER SYSTEM SET {name} = {int(value)}")
            db.execute("SELECT pg_reload_conf()")

    def state(self) -> list[NodeState]:
        """The data nodes as the monitor sees them now ([] while it does not answer)."""
        import psycopg

        try:
            with psycopg.connect(self._monitor_conninfo()) as db:
                rows = db.execute(
                    "SELECT nodename, nodeport, reportedstate::text, goalstate::text, "
                    "health = 1 FROM pgautofailover.node WHERE formationid = 'default' "
                    "ORDER BY nodeid").fetchall()
        except psycopg.Error:
            return []
        return [NodeState(r[0], int(r[1]), r[2], r[3], bool(r[4])) for r in rows]

    def primary(self) -> str | None:
        """The data node that takes writes now (as the monitor sees it), if one does."""
        for node in self.state():
            if node.reported == node.assigned and node.reported in (
                    "single", "primary", "wait_primary"):
                return node.name
        return None

    def in_sync(self) -> bool:
        """A primary, a secondary, both where the monitor wants them, and the primary's
        commits waiting for that secondary (``synchronous_standby_names`` naming a standby
        streaming in quorum or sync, ``synchronous_commit`` on)."""
        import psycopg

        nodes = self.state()
        states = sorted((n.reported, n.assigned) for n in nodes)
        if states != [("primary", "primary"), ("secondary", "secondary")]:
            return False
        primary = next(n.name for n in nodes if n.reported == "primary")
        try:
            with psycopg.connect(self.node_conninfo(primary)) as db:
                names = db.execute("SHOW synchronous_standby_names").fetchone()
                commit = db.execute("SHOW synchronous_commit").fetchone()
                standbys = db.execute("SELECT count(*) FROM pg_stat_replication WHERE "
                                      "sync_state IN ('sync', 'quorum')").fetchone()
        except psycopg.Error:
            return False
        return (names is not None and names[0] not in ("", "*")
                and commit is not None and commit[0] in ("on", "remote_apply")
                and standbys is not None and int(standbys[0]) >= 1)

    def wait_in_sync(self, timeout: float = 120) -> None:
        self._until(self.in_sync, timeout, "a primary with its synchronous secondary")

    def takes_writes(self) -> bool:
        """A connection on ``dsn`` (read-write) is made now and a write commits."""
        import psycopg

        try:
            with psycopg.connect(self.dsn + "&connect_timeout=3", autocommit=True) as db:
                db.execute("SELECT txid_current()")
            return True
        except psycopg.Error:
            return False

    def kill_primary(self) -> str:
        """kill -9 of the primary's pg_autoctl and its PostgreSQL (every process of that node
        at once, as if its machine were lost); returns its name."""
        name = self.primary()
        if name is None:
            raise RuntimeError(f"no primary to kill: {self.state()}")
        self.kill(name)
        return name

    def kill(self, name: str) -> None:
        directory = self.node_dirs[name]
        pid_file = self._pid_file(directory)
        pid = self.service_pid(directory)
        semaphore = _semaphore_of(pid_file)
        if pid is not None:
            kill_tree(pid)
            # What pg_autoctl would have cleaned at its exit: its log semaphore (SysV, left
            # forever once killed) and its pid file (whose next reader would remove that
            # semaphore's id again, by then perhaps another process's).
            if semaphore is not None:
                subprocess.run(["ipcrm", "-s", str(semaphore)], capture_output=True,
                               check=False)
            pid_file.unlink(missing_ok=True)
        postmaster = _postmaster(directory)
        if postmaster is not None:  # a PostgreSQL that outlived its pg_autoctl
            kill_tree(postmaster)
        process = self._started.get(directory)
        if process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(10)
        self._reap()

    def wait_new_primary(self, lost: str, timeout: float = 120) -> float:
        """Until a node other than ``lost`` is primary and ``dsn`` takes writes; the seconds
        it took."""
        start = time.monotonic()
        self._until(lambda: self.primary() not in (None, lost) and self.takes_writes(),
                    timeout, f"a primary other than {lost}")
        return time.monotonic() - start

    def rejoin(self, name: str) -> None:
        """Start a lost node again: its keeper asks the monitor, which makes it the new
        primary's secondary (pg_rewind if needed); ``wait_in_sync`` waits for it."""
        self._start_service(self.node_dirs[name])

    def switchover(self) -> str:
        """A planned switchover: the primary hands over to its secondary (pg_autoctl perform
        switchover, which waits until it is done); returns the new primary."""
        self._run("perform", "switchover", "--monitor", self.monitor_uri, timeout=180)
        self._until(lambda: self.primary() is not None and self.takes_writes(), 120,
                    "a primary after the switchover")
        return self.primary() or ""

    def stop(self) -> None:
        """Stop every part (data nodes, then the monitor); any part that does not stop in
        time is killed, so nothing outlives a test run."""
        for directory in [*self.node_dirs.values(), self.monitor_dir]:
            pid = self.service_pid(directory)
            if pid is None:
                continue
            with contextlib.suppress(subprocess.TimeoutExpired, RuntimeError):
                self._run("stop", "--pgdata", str(directory), "--fast", timeout=30)
            deadline = time.monotonic() + 30
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            if _alive(pid):
                kill_tree(pid)
        for directory in [*self.node_dirs.values(), self.monitor_dir]:
            postmaster = _postmaster(directory)
            if postmaster is not None:
                kill_tree(postmaster)
        for process in self._started.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(10)
        self._reap()

    @staticmethod
    def _until(condition: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise RuntimeError(f"pg_auto_failover: no {what} within {timeout:.0f} s")
            time.sleep(0.2)


def _semaphore_of(pid_file: Path) -> int | None:
    """The id of the SysV semaphore a pg_autoctl pid file names (its fifth line)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int(pid_file.read_text().splitlines()[4])
    return None


def _postmaster(directory: Path) -> int | None:
    return _running_for(directory / "postmaster.pid", directory)


def _bin_dir() -> Path:
    """The programs of the PostgreSQL that has pg_auto_failover's extension (Debian's
    postgresql-N-auto-failover: the newest such N), else of the newest PostgreSQL."""
    extensions = sorted(Path("/usr/lib/postgresql").glob("*/lib/pgautofailover.so"),
                        key=lambda p: int(p.parent.parent.name)
                        if p.parent.parent.name.isdigit() else 0, reverse=True)
    if extensions:
        return extensions[0].parent.parent / "bin"
    return Path(tool("pg_ctl")).parent


def _pg_autoctl() -> str:
    found = shutil.which("pg_autoctl") or next(
        (str(p) for p in Path("/usr/lib/postgresql").glob("*/bin/pg_autoctl")), None)
    extension = any(Path("/usr/lib/postgresql").glob("*/lib/pgautofailover.so"))
    if found is None or not extension:
        raise PostgresMissing("pg_auto_failover not found: install it (apt-get install -y "
                              "postgresql-15-auto-failover, for PostgreSQL 15)")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.pgha", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=("run", "state", "kill-primary", "rejoin",
                                           "switchover"))
    parser.add_argument("name", nargs="?", help="the node to rejoin (node1, node2)")
    parser.add_argument("--dir", default="data/pgha", help="the formation's directory")
    parser.add_argument("--ports", default="", help="monitor,node1,node2 (on creation)")
    args = parser.parse_args(argv)
    ports = tuple(int(p) for p in args.ports.split(",")) if args.ports else None
    if ports is not None and len(ports) != 3:
        parser.error("--ports takes three ports: monitor,node1,node2")
    formation = Formation(Path(args.dir), ports=ports)
    if args.action != "run" and not (formation.base / STATE_FILE).exists():
        print(f"tools.pgha: no formation in {formation.base} (make cluster-ha, or python -m "
              "tools.pgha run, makes one)", file=sys.stderr)
        return 2
    try:
        return _act(formation, args.action, args.name, parser)
    except (RuntimeError, PostgresMissing) as exc:
        print(f"tools.pgha: {exc}", file=sys.stderr)
        return 1


def _act(formation: Formation, action: str, name: str | None,
         parser: argparse.ArgumentParser) -> int:
    if action == "state":
        for node in formation.state():
            print(" ".join(f"{k}={v}" for k, v in dataclasses.asdict(node).items()))
        return 0
    if action == "kill-primary":
        print(f"killed {formation.kill_primary()}")
        return 0
    if action == "switchover":
        print(f"the primary is now {formation.switchover()}")
        return 0
    if action == "rejoin":
        if name not in NODE_NAMES:
            parser.error(f"rejoin which node: {', '.join(NODE_NAMES)}")
        formation.rejoin(name)
        return 0
    formation.create()
    print(f"PostgreSQL with failover on {formation.dsn}", flush=True)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        formation.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
