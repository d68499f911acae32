"""``copas-server --workers N``: N nodes on one machine, one process each, sharing one port
(SO_REUSEPORT: the kernel spreads connections over them) and one PostgreSQL.

Each worker is a full node (``--node-id <id>-w<i>``, stable across restarts so a restarted
worker takes its own tables back at once) with a second, private gRPC port that the other
nodes forward calls to (``--internal-listen``; advertised on loopback, or on the host named by
``--advertise``), and a public port of its own beside the shared one (``--public-listen``, on
the same TLS settings): the address clients are told to call for its tables. Worker 0 also
serves the web page; worker i serves metrics on the metrics port + i. The supervisor restarts
a worker that dies (its tables wait for it, or for another node once its lease runs out) and
passes SIGTERM/SIGINT on, then waits for all of them.

A worker that exits (a fail-stop when PostgreSQL restarts or fails over: exit 3; a start
refused while it is still down: exit 2) is started again after ``RESTART_PAUSE`` seconds,
doubled after each start that did not last ``STABLE_SECONDS``, at most
``RESTART_PAUSE_MAX``. After an exit 2 or 3 it is started to wait for the database
(``server.main.WAIT_FOR_DATABASE``): it loads its code (about a second of CPU) while the
database is away, tries a connection every 0.25 s, and starts as soon as one is made: within
a probe of the database's return (of a failover's new primary), not after a pause that grew
while starts were refused, and with its code already loaded. The other workers are never
held up meanwhile.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time

from server.config import Config

RESTART_PAUSE = 0.5  # seconds before a dead worker is started again (then doubled)
RESTART_PAUSE_MAX = 2.0  # the longest pause between two starts of one worker
STABLE_SECONDS = 30.0  # a worker up this long starts its next restart from RESTART_PAUSE
WAITS_FOR_DATABASE = (2, 3)  # the exits after which a worker starts by waiting for it
# Set ("1") in the environment of a worker started to wait for the database (server.main).
WAIT_FOR_DATABASE = "COPAS_WAIT_FOR_DATABASE"


def _strip(argv: list[str], flags: tuple[str, ...], switches: tuple[str, ...] = ()
           ) -> list[str]:
    """argv without ``flags`` (with their values) and ``switches`` (flags without one)."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in switches:
            continue
        if name in flags:
            skip = "=" not in arg
            continue
        out.append(arg)
    return out


def _shared_port(host: str, port: int) -> int:
    """The port the workers share: ``port``, or a free one when it is 0."""
    if port:
        return port
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.bind((host.strip("[]") or "0.0.0.0", 0))
        return int(s.getsockname()[1])


class Supervisor:
    def __init__(self, config: Config, argv: list[str]) -> None:
        self.config = config
        host, _, port = config.listen.rpartition(":")
        self.host = host
        self.port = _shared_port(host, int(port))
        if host.strip("[]") in ("", "0.0.0.0", "::") and not (
                config.advertise or config.public_address):
            raise ValueError(f"--listen {config.listen} with --workers: the other nodes and the "
                             "clients told to call a worker cannot reach it there: give "
                             "--advertise HOST (and --public-address HOST when clients reach "
                             "this machine at another name)")
        self.base = _strip(argv, ("--workers", "--listen", "--node-id", "--web-port",
                                  "--metrics-port", "--internal-listen", "--advertise",
                                  "--public-listen", "--public-address",
                                  "--worker-public-port-base", "--worker-internal-port-base"),
                           ("--reuse-port",))
        self.node_prefix = config.node_id or f"{socket.gethostname()}-{self.port}"
        self.procs: list[subprocess.Popen[str] | None] = [None] * config.workers
        self.started = [0.0] * config.workers  # monotonic: each worker's last start
        self.pauses = [0.0] * config.workers  # each worker's pause before its next start
        self.due = [0.0] * config.workers  # monotonic: when an exited worker starts again
        self.stopping = False

    def command(self, i: int) -> list[str]:
        config = self.config
        advertise = config.advertise.rsplit(":", 1)[0] if config.advertise else ""
        internal_port = config.worker_internal_port_base + i \
            if config.worker_internal_port_base else 0
        internal = f"{advertise or '127.0.0.1'}:{internal_port}"  # never all interfaces
        public_port = config.worker_public_port_base + i if config.worker_public_port_base \
            else 0
        metrics = config.metrics_port + i if config.metrics_port else 0
        web = config.web_port if i == 0 else 0
        public = config.public_address.rsplit(":", 1)[0] if config.public_address \
            else advertise  # a host: each worker adds its own public port
        return [sys.executable, "-m", "server.main", *self.base,
                "--listen", f"{self.host}:{self.port}", "--reuse-port", "--workers", "0",
                "--node-id", f"{self.node_prefix}-w{i}", "--internal-listen", internal,
                "--public-listen", f"{self.host}:{public_port}",
                *(["--advertise", advertise] if advertise else []),
                *(["--public-address", public] if public else []),
                "--metrics-port", str(metrics), "--web-port", str(web)]

    def launch(self, i: int, *, wait_for_database: bool = False) -> list[str]:
        """Start worker i (``wait_for_database``: once a connection to it is made); returns
        the lines it printed on start (or raises)."""
        proc = subprocess.Popen(self.command(i), stdout=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1",
                                     WAIT_FOR_DATABASE: "1" if wait_for_database else "0"})
        self.procs[i] = proc
        self.started[i] = time.monotonic()
        assert proc.stdout is not None
        first = proc.stdout.readline()
        if "listening" not in first:
            proc.wait(30)
            raise RuntimeError(f"worker {i} did not start (exit {proc.returncode})")
        lines = [first.rstrip()]
        threading.Thread(target=self._relay, args=(i, proc), daemon=True).start()
        return lines

    @staticmethod
    def _relay(i: int, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            print(f"[worker {i}] {line.rstrip()}", flush=True)

    def stop(self, *_: object) -> None:
        self.stopping = True
        for proc in self.procs:
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self.stop)
        signal.signal(signal.SIGINT, self.stop)
        try:
            for i in range(self.config.workers):
                self.launch(i)
        except (RuntimeError, OSError) as exc:
            print(f"copas-server: {exc}", file=sys.stderr)
            self.stop()
            for proc in self.procs:
                if proc is not None:
                    proc.wait()
            return 2
        scheme = "TLS" if self.config.tls_cert else "plaintext"
        print(f"copas-server listening on {self.host}:{self.port} (gRPC over {scheme}, "
              f"{self.config.workers} workers sharing the port, reflection and health on)",
              flush=True)
        if self.config.metrics_port:
            last = self.config.metrics_port + self.config.workers - 1
            print(f"metrics on http://{self.config.metrics_host}:{self.config.metrics_port}"
                  f"..{last}/metrics (one port per worker)", flush=True)
        if self.config.web_port:
            print(f"web page on http://{self.config.web_host}:{self.config.web_port}/",
                  flush=True)
        while not self.stopping:
            for i in range(len(self.procs)):
                self._restart_if_exited(i)
            time.sleep(0.1)
        codes = [proc.wait() for proc in self.procs if proc is not None]
        return max(codes, default=0)


    def _restart_if_exited(self, i: int) -> None:
        """Worker i, when it exited: its next start scheduled, or made when it is due."""
        proc = self.procs[i]
        if proc is None or proc.poll() is None or self.stopping or self.due[i] < 0:
            return  # (due < 0: being started)
        now = time.monotonic()
        if not self.due[i]:
            lasted = now - self.started[i]
            self.pauses[i] = RESTART_PAUSE if lasted >= STABLE_SECONDS or not self.pauses[i] \
                else min(RESTART_PAUSE_MAX, self.pauses[i] * 2)
            self.due[i] = now + self.pauses[i]
            print(f"copas-server: worker {i} exited ({proc.returncode}) after {lasted:.1f} s; "
                  f"starting it again in {self.pauses[i]:g} s", file=sys.stderr, flush=True)
            return
        if now < self.due[i]:
            return
        self.due[i] = -1.0
        threading.Thread(target=self._start_again, args=(i,), daemon=True).start()

    def _start_again(self, i: int) -> None:
        """Start worker i again (on a thread: its start-up, and its wait for the database
        when it stopped for the database's sake, hold up no other worker)."""
        try:
            proc = self.procs[i]
            self.launch(i, wait_for_database=proc is not None
                        and proc.returncode in WAITS_FOR_DATABASE)
        except (RuntimeError, OSError) as exc:
            if not self.stopping:
                print(f"copas-server: {exc}", file=sys.stderr, flush=True)
        finally:
            self.due[i] = 0.0


def supervise(config: Config, argv: list[str]) -> int:
    try:
        supervisor = Supervisor(config, argv)
    except ValueError as exc:  # a setup that cannot work: exit 2, as a node's would
        print(f"copas-server: {exc}", file=sys.stderr)
        return 2
    return supervisor.run()
