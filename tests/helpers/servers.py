"""Servers for the tests: in this process (``serving``, with ``config_for_tests``), as a
process of its own started the way a user starts one (``ServerProcess``, ``run_server``: the
one place that launches ``python -m server.main``), or just a registry of tables on a manual
clock (``registry_for_tests``). Every server listens on loopback, on a free port; with
``COPAS_TEST_DATABASE`` set, the in-process ones keep their store on that PostgreSQL."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import itertools
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import IO, Any

import grpc
from copas.v1 import copas_pb2_grpc

ROOT = Path(__file__).resolve().parent.parent.parent


# Ports for the tests' servers come from below the kernel's ephemeral range (32768-60999 on
# Linux), a block of its own for each pytest-xdist worker: a port handed out here is never
# one the kernel gives to another socket's bind(0) or connect() in the moment before the
# server binds it (which made "Address already in use" now and then).
_PORT_BLOCK = 4000
_WORKER = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0) % 5
# Two runs on one machine (a developer's and CI's) start at different places of the block,
# by process id, so that they do not walk the same ports in step.
_START = 10000 + _WORKER * _PORT_BLOCK
_FIRST = os.getpid() % _PORT_BLOCK
_ports = itertools.cycle([*range(_START + _FIRST, _START + _PORT_BLOCK),
                          *range(_START, _START + _FIRST)])


def free_port() -> int:
    """A loopback port nobody holds now, of this worker's block (see above)."""
    for _ in range(_PORT_BLOCK):
        port = next(_ports)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue  # held (by another run on this machine): the next one
            return port
    raise RuntimeError("this test worker has used every port of its block")


def config_for_tests(**options: Any) -> Any:
    """A configuration for tests: loopback, any free port, no metrics, no web page, the
    in-memory store, no per-client quotas (a test of quotas sets its own), bots at full
    speed (a test of their pace sets ``bot_pace``), cheap password hashes, every event
    sent to spectators as it comes (a test of coalescing sets ``spectator_tick``) and games
    between people of one network rated (the tests' people all come from loopback; a test
    of that rule sets ``rate_one_network=False``), and quick matches that wait for people
    only (a test of the bots that fill them sets ``quick_match_bots_after``)."""
    from server.config import Config, unlimited

    base = unlimited(Config(listen="127.0.0.1:0", metrics_port=0, web_port=0, data_dir="memory",
                            bot_table_pace=0.0005, bot_pace=0.0, quota_penalty=0.0,
                            min_timeout=0.01, bot_policy="auto", bot_workers=0, spectator_tick=0.0,
                            password_time_cost=1, password_memory_kib=8,
                            rate_one_network=True, quick_match_bots_after=0.0))
    server_dsn = os.environ.get(TEST_DATABASE)
    if server_dsn and "database" not in options:  # the suite run against PostgreSQL
        data_dir = options.get("data_dir", "memory")
        name = (f"copas_{secrets.token_hex(6)}" if data_dir == "memory" else
                "copas_" + hashlib.sha256(str(Path(data_dir).resolve()).encode()).hexdigest()[:16])
        options["database"] = fresh_database(server_dsn, name)
        options.setdefault("node_id", name)  # a restart on the same "data" is the same node
    return dataclasses.replace(base, **options)


TEST_DATABASE = "COPAS_TEST_DATABASE"  # a PostgreSQL server: the suite's stores live there


def fresh_database(server_dsn: str, name: str | None = None) -> str:
    """A database of its own on the PostgreSQL server ``server_dsn`` (created unless it
    exists); returns its DSN."""
    import psycopg

    name = name or f"copas_{secrets.token_hex(6)}"
    with psycopg.connect(server_dsn, autocommit=True) as db:
        if db.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
            db.execute(f'CREATE DATABASE "{name}"')
    return f"{server_dsn.rsplit('/', 1)[0]}/{name}"


@contextlib.asynccontextmanager
async def serving(**options: Any) -> AsyncIterator[tuple[Any, copas_pb2_grpc.CopasServiceStub]]:
    """A server of its own for a test that needs other settings (see ``config_for_tests``), with
    a stub on a channel to it."""
    from server.main import shutdown, start

    running = await start(config_for_tests(**options))
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            yield running, copas_pb2_grpc.CopasServiceStub(channel)
    finally:
        await shutdown(running, 0)


def registry_for_tests(clock: Any, **options: Any) -> Any:
    """A registry of tables in memory on ``clock`` (a ``ManualScheduler``), no server: the
    settings of ``config_for_tests`` with ``options``."""
    from server.observability import Metrics
    from server.store import MemoryStore
    from server.tables.ownership import LocalOwnership
    from server.tables.registry import TableRegistry

    thinker = options.pop("thinker", None)
    config = config_for_tests(**options)
    return TableRegistry(config.registry_settings(), config.table_settings(), Metrics(),
                         MemoryStore(), clock, LocalOwnership(), thinker)


def _database_of(store: Any) -> Any:
    """A connection of the test's own to a running server's database."""
    if hasattr(store, "dsn"):
        import psycopg

        return psycopg.connect(store.dsn, autocommit=True)
    import sqlite3

    return sqlite3.connect(store.path, isolation_level=None)


def store_rows(store: Any, kind: str, table_id: str) -> int:
    """How many rows of ``kind`` (log, tokens, records) a table has in a server's store."""
    column = "record_id" if kind == "records" else "table_id"
    mark = "%s" if hasattr(store, "dsn") else "?"
    db = _database_of(store)
    try:
        return int(db.execute(f"SELECT count(*) FROM {kind} WHERE {column} = {mark}",
                              (table_id,)).fetchone()[0])
    finally:
        db.close()


def delete_rows(store: Any, kind: str, table_id: str) -> None:
    """Delete a table's rows of ``kind`` behind a running server's back."""
    column = "record_id" if kind == "records" else "table_id"
    mark = "%s" if hasattr(store, "dsn") else "?"
    db = _database_of(store)
    try:
        db.execute(f"DELETE FROM {kind} WHERE {column} = {mark}", (table_id,))
    finally:
        db.close()


# ---------------------------------------------------------------- a server process

def _environment(extra: dict[str, str] | None) -> dict[str, str]:
    """The tests' environment (conftest turns the web page off: COPAS_WEB_PORT=0), and
    ``extra``: every flag also reads COPAS_<FLAG>."""
    return {**os.environ, "PYTHONUNBUFFERED": "1", **(extra or {})}


def server_command(*flags: str, port: int | None = None) -> list[str]:
    """``python -m server.main`` on loopback (``port``, or a free one) with no metrics port,
    then ``flags`` (later flags win)."""
    port = port if port is not None else free_port()
    return [sys.executable, "-m", "server.main", "--listen", f"127.0.0.1:{port}",
            "--metrics-port", "0", *flags]


class ServerProcess:
    """A copas-server process, as a user starts one: ``flags`` beneath the defaults of
    ``server_command``, its first line ("listening ...") awaited, its stderr kept in
    ``log_path`` (or dropped). ``stop`` sends SIGTERM and waits; ``kill9`` does not. ``cwd``:
    the checkout whose ``server.main`` runs (another release's: tests/helpers/releases.py)."""

    def __init__(self, *flags: str, port: int | None = None, log_dir: Path | None = None,
                 env: dict[str, str] | None = None, wrapper: Sequence[str] = (),
                 cwd: Path = ROOT) -> None:
        self.port = port if port is not None else free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.metrics_port = 0
        self.log_path: Path | None = None
        log_file: IO[str] | int = subprocess.DEVNULL
        if log_dir is not None:
            self.log_path = log_dir / f"server-{self.port}-{time.monotonic_ns()}.log"
            log_file = self.log_path.open("w")
        self.proc = subprocess.Popen(
            [*wrapper, *server_command(*flags, port=self.port)], cwd=cwd,
            env=_environment(env), stdout=subprocess.PIPE, stderr=log_file, text=True)
        if not isinstance(log_file, int):
            log_file.close()
        assert self.proc.stdout is not None
        self.first_line = self.proc.stdout.readline()
        assert "listening" in self.first_line, self.first_line + self.log()

    def next_line(self) -> str:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline()

    def log(self) -> str:
        return self.log_path.read_text() if self.log_path is not None else ""

    def stop(self, timeout: float = 15) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            raise

    def kill9(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def pause(self) -> None:
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.proc.send_signal(signal.SIGCONT)

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *_: object) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def clients_server(data_dir: Path) -> ServerProcess:
    """The server the reference clients' tests play against: no pauses, no per-client
    quotas (the tests' clients all come from loopback), warnings only, metrics on
    ``server.metrics_port``."""
    metrics = free_port()
    server = ServerProcess("--trick-pause", "0", "--hand-pause", "0", "--log-level", "warning",
                           "--data-dir", str(data_dir), "--unlimited-quotas",
                           "--metrics-port", str(metrics), "--metrics-host", "127.0.0.1")
    server.metrics_port = metrics
    return server


def metric(server: ServerProcess, name: str, **labels: str) -> float:
    """The sum of a server process's samples of ``name`` that have ``labels`` (0 when it
    has none yet)."""
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics",
                                timeout=10) as answer:
        text = answer.read().decode()
    wanted = [f'{k}="{v}"' for k, v in labels.items()]
    total = 0.0
    for line in text.splitlines():
        key, _, value = line.rpartition(" ")
        metric_name, _, rest = key.partition("{")
        if metric_name == name and all(w in rest.rstrip("}").split(",") for w in wanted):
            total += float(value)
    return total


def run_server(*flags: str, timeout: float = 60, wrapper: Sequence[str] = (),
               env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run a server that is expected to stop on its own (it refuses to start): its exit
    code and output."""
    return subprocess.run([*wrapper, *server_command(*flags)], cwd=ROOT,
                          env=_environment(env), capture_output=True, text=True,
                          timeout=timeout)
