"""A cluster on a PostgreSQL that fails over (tools/pgha.py: pg_auto_failover's monitor, a
primary and a synchronous secondary, reached with a multi-host DSN and
target_session_attrs=read-write). kill -9 of the primary under load (bots at 100 tables,
people playing): nothing acknowledged is lost or taken twice, the nodes fail-stop while there
is no primary and serve again by themselves once the secondary is promoted, and every table
finishes. Runs wherever Debian's postgresql-15-auto-failover is installed (make test installs
it: tools/needs.sh); without it the test fails, it is never skipped."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc
import psycopg
import pytest
from copas.v1 import copas_pb2, copas_pb2_grpc
from psycopg.conninfo import conninfo_to_dict

from engine import Rules, replay
from server.store import Node, PgStore, StoreUnusable, TableMeta
from server.store.pg_connection import conninfo
from server.tables.log_entries import LOG_FORMAT
from tests.helpers.calls import auth, join_all, new_table
from tests.helpers.failover import CHANNEL_OPTIONS, TRANSIENT, People, until_acked
from tests.helpers.servers import ServerProcess, free_port, fresh_database, run_server
from tools.pgha import FAST, Formation
from tools.testrun import holders

ROOT = Path(__file__).resolve().parent.parent

LEASE = 2.0
META = TableMeta(name="t", preset="online", rules=Rules(), seed=1, bot_seats=0, order=1)
BOT_TABLES = 100
PEOPLE_TABLES = 4
NODE_FLAGS = ("--lease", str(LEASE), "--trick-pause", "0", "--hand-pause", "0",
              "--play-timeout", "0", "--pass-timeout", "0", "--moon-timeout", "0",
              "--unlimited-quotas", "--bot-table-pace", "0.3", "--bot-policy", "auto",
              "--bot-workers", "0", "--log-format", "json", "--allow-seed",
              "--cluster-lookups-per-second", "0")


# ------------------------------------------------------------------ how a node connects

def test_a_node_adds_keepalives_and_asks_several_hosts_for_the_writable_one() -> None:
    """Every connection gets TCP keepalives and a user timeout (a lost machine sends no reset)
    and a connect timeout per host; several hosts get target_session_attrs=read-write; what
    the DSN says itself wins."""
    added = conninfo_to_dict(conninfo("postgresql://u@h1:5432,h2:5433/db", 5))
    assert added["target_session_attrs"] == "read-write"
    assert (added["keepalives"], added["keepalives_idle"], added["keepalives_interval"],
            added["keepalives_count"]) == ("1", "5", "2", "3")
    assert (added["tcp_user_timeout"], added["connect_timeout"]) == ("10000", "5")
    own = conninfo_to_dict(conninfo(
        "postgresql://u@h/db?keepalives_idle=30&connect_timeout=3", 10))
    assert (own["keepalives_idle"], own["connect_timeout"]) == ("30", "3")
    assert "target_session_attrs" not in own  # one host: nothing to choose
    kept = conninfo_to_dict(conninfo("host=h1,h2 port=1,2 target_session_attrs=primary", 5))
    assert kept["target_session_attrs"] == "primary"
    for attrs in ("any", "read-only", "standby", "prefer-standby"):
        with pytest.raises(ValueError, match="target_session_attrs=read-write"):
            conninfo(f"postgresql://u@h1,h2/db?target_session_attrs={attrs}", 5)


def test_several_hosts_that_may_be_standbys_are_refused_at_start() -> None:
    done = run_server("--database", "postgresql://postgres@127.0.0.1:1,127.0.0.1:2/copas"
                      "?target_session_attrs=any")
    assert done.returncode == 2, done.stderr
    assert "use target_session_attrs=read-write" in done.stderr
    with pytest.raises(StoreUnusable, match="could connect to a standby"):
        PgStore.open("postgresql://postgres@127.0.0.1:1,127.0.0.1:2/copas"
                     "?target_session_attrs=prefer-standby", Node("n", "", log_format=LOG_FORMAT))


async def test_the_stores_connections_carry_the_keepalives(postgres: Any) -> None:
    store = PgStore.open(fresh_database(postgres.dsn), Node("n", "", log_format=LOG_FORMAT))
    try:
        with store.reading() as reader:
            for connection in (store.writer, reader):
                parameters = connection.info.get_parameters()
                assert parameters["keepalives_idle"] == "5", parameters
                assert parameters["tcp_user_timeout"] == "10000", parameters
    finally:
        await store.close()


async def test_a_store_commits_on_a_new_connection_when_its_idle_one_was_closed(
        postgres: Any) -> None:
    """The database closed the writer's connection while it had nothing to commit (a
    restart, a failover, an operator): the next commit is made on a new connection, and the
    node does not fail-stop for a connection it was not using."""
    store = PgStore.open(fresh_database(postgres.dsn), Node("n", "", log_format=LOG_FORMAT))
    try:
        store.create_table("t1", 1.0, META)
        store.append("t1", json.dumps({"kind": "first"}))
        await store.sync()
        old = store.writer.info.backend_pid
        with psycopg.connect(postgres.dsn, autocommit=True) as db:
            db.execute("SELECT pg_terminate_backend(%s)", (old,))
            while db.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s",
                             (old,)).fetchone():
                await asyncio.sleep(0.02)
        store.append("t1", json.dumps({"kind": "second"}))
        await store.sync()
        assert store.failure is None and store.writer.info.backend_pid != old
        with store.reading() as db:
            assert [json.loads(e) for (e,) in db.execute(
                "SELECT entry FROM log WHERE table_id = 't1' ORDER BY n")] == [
                {"kind": "first"}, {"kind": "second"}]
    finally:
        await store.close()


# ------------------------------------------------------------------ a failover under load

def _ports_in_a_row(count: int) -> int:
    """The first of ``count`` free ports in a row (a base + i: the workers' own public
    ports, the formation of `make cluster-ha`)."""
    while True:
        ports = [free_port() for _ in range(count)]
        if ports == list(range(ports[0], ports[0] + count)):
            return ports[0]


async def _serving(stubs: list[Any], people: list[People], since: float) -> float:
    """Until every people's table answers a GetView through every stub; seconds from
    ``since``."""
    while True:
        try:
            for stub in stubs:
                for p in people:
                    await stub.GetView(copas_pb2.GetViewRequest(table_id=p.table_id),
                                       metadata=auth(p.tokens[0]), timeout=3)
            return time.monotonic() - since
        except grpc.aio.AioRpcError:
            await asyncio.sleep(0.1)


async def _record(stub: Any, table_id: str) -> dict[str, Any]:
    """The finished game's record (asked again until the table finished)."""
    while True:
        try:
            answer = await stub.GetGameRecord(
                copas_pb2.GetGameRecordRequest(record_id=table_id), timeout=5)
            data: dict[str, Any] = json.loads(answer.record.record_json)
            return data
        except grpc.aio.AioRpcError as error:
            if error.code() not in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.UNAVAILABLE,
                                    grpc.StatusCode.DEADLINE_EXCEEDED):
                raise
            await asyncio.sleep(0.5)


def _count(dsn: str, query: str) -> int:
    with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as db:
        row = db.execute(query).fetchone()
    return int(row[0]) if row else 0


# What the nodes hold on the new primary once they serve again: every worker's lease renewed
# there, and its championship notices' LISTEN connection made there.
LEASES_HELD = "SELECT count(*) FROM nodes WHERE lease_until > now()"
LISTENING = ("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
             "AND query ILIKE 'LISTEN%'")


async def _until_count(dsn: str, query: str, count: int) -> None:
    while await asyncio.to_thread(_count, dsn, query) < count:
        await asyncio.sleep(0.2)


@pytest.mark.timeout(300)
async def test_kill_9_of_the_primary_under_load_loses_nothing_acknowledged(
        tmp_path: Path) -> None:
    base = Path(tempfile.mkdtemp(prefix="copas-pgha-"))
    base.chmod(0o755)  # the postgres user (when run as root) reaches its directories
    formation = Formation(base / "formation", timings=FAST,
                          ports=(free_port(), free_port(), free_port()))  # this worker's
    nodes: ServerProcess | None = None
    channels: list[grpc.aio.Channel] = []
    try:
        await asyncio.to_thread(formation.create)
        # Synchronous replication: a commit waits for the standby (checked on the primary).
        assert await asyncio.to_thread(formation.in_sync)
        with psycopg.connect(formation.dsn, autocommit=True) as db:
            db.execute("CREATE DATABASE copas")
        dsn = formation.dsn_of("copas")
        public = _ports_in_a_row(2)
        nodes = ServerProcess("--database", dsn, "--workers", "2", *NODE_FLAGS,
                              "--worker-public-port-base", str(public), log_dir=tmp_path)
        addresses = [nodes.address, f"127.0.0.1:{public}", f"127.0.0.1:{public + 1}"]
        channels = [grpc.aio.insecure_channel(a, options=CHANNEL_OPTIONS) for a in addresses]
        shared, *workers = [copas_pb2_grpc.CopasServiceStub(c) for c in channels]
        load_began = time.monotonic()  # the bots play from their table's creation
        bots = [(await new_table(workers[i % 2], preset="quick", seed=str(1000 + i),
                                 bots=4)).table_id for i in range(BOT_TABLES)]
        people: list[People] = []
        for i in range(PEOPLE_TABLES):  # made on either node, played through the shared port
            table = await new_table(workers[i % 2], preset="online", seed=str(i), max_hands=2)
            joins = await join_all(shared, table.table_id, 4)
            people.append(People(shared, table.table_id,
                                 {j.seat: j.player_token for j in joins}, pace=0.1))
        load = [asyncio.create_task(p.run()) for p in people]
        await asyncio.wait_for(until_acked(people, 40), 60)
        await asyncio.wait_for(_until_count(dsn, "SELECT count(*) FROM log", 1000), 60)

        acked_before = sum(len(p.acked) for p in people)
        records_before = await asyncio.to_thread(_count, dsn, "SELECT count(*) FROM records")
        actions_before = await asyncio.to_thread(_count, dsn, "SELECT count(*) FROM log")
        load_seconds = time.monotonic() - load_began
        killed_at = time.monotonic()
        lost = await asyncio.to_thread(formation.kill_primary)
        back = asyncio.create_task(_serving([shared, *workers], people, killed_at))
        failover = await asyncio.to_thread(formation.wait_new_primary, lost, 60)
        served_again = await asyncio.wait_for(back, 60)
        acked_at_service = sum(len(p.acked) for p in people)
        await asyncio.wait_for(until_acked(people, acked_at_service + 20), 60)
        # (an answer between the kill and the failover is of a commit made before the kill)
        first_move_after = min(a.at for p in people for a in p.acked
                               if a.at > killed_at + failover) - killed_at
        # Every connection a node opens followed the primary: both leases are renewed on the
        # new one, both workers' notices listen there.
        await asyncio.wait_for(_until_count(dsn, LEASES_HELD, 2), 30)
        await asyncio.wait_for(_until_count(dsn, LISTENING, 2), 30)

        # Every table finishes: the people's games, and every bot table.
        await asyncio.wait_for(asyncio.gather(*load), 120)
        records = dict(zip(bots + [p.table_id for p in people], await asyncio.wait_for(
            asyncio.gather(*(_record(shared, t) for t in bots + [p.table_id for p in people])),
            120), strict=True))
        # No action lost or taken twice in any game: each record replays through the engine
        # to the result it states.
        for data in records.values():
            replay(data)
            assert data["result"]["is_over"]
        # The people's games are exactly what they were told was done: every acknowledged
        # action once, in the order of its sequence, and nothing else.
        for p in people:
            sequences = [a.sequence for a in p.acked]
            assert len(set(sequences)) == len(sequences), "one sequence acknowledged twice"
            told = [a.action for a in sorted(p.acked, key=lambda a: a.sequence)]
            assert records[p.table_id]["actions"] == told, p.table_id

        assert records_before < BOT_TABLES, "the bots' games were over before the kill"
        supervisor = nodes.log()
        fail_stops = supervisor.count("exited (3)")
        refused_starts = supervisor.count("exited (2)")
        # The workers fail-stopped, waited for the database with their code loaded, and
        # started once it answered: no start was refused.
        assert fail_stops >= 1 and "waits for the database" in supervisor, supervisor[-3000:]
        assert refused_starts == 0, supervisor[-3000:]
        refusals: dict[tuple[str, str], int] = {}
        for p in people:
            for kind, n in p.refusals.items():
                refusals[kind] = refusals.get(kind, 0) + n
        # Only an outage's answers, never a refusal for good (a seat or table lost, a retried
        # request not recognised).
        lasting = {kind: [p.examples.get(kind) for p in people] for kind in refusals
                   if grpc.StatusCode[kind[0]] not in TRANSIENT}
        assert not lasting, lasting
        print(f"\nkill -9 of the primary ({lost}) under load ({actions_before} log entries "
              f"in {load_seconds:.1f} s, bots at {BOT_TABLES} tables and people at "
              f"{PEOPLE_TABLES}): {acked_before} people's actions "
              f"and {records_before} finished games before; the standby took writes "
              f"{failover:.1f} s after, every table was served again {served_again:.1f} s "
              f"after the kill ({served_again - failover:.1f} s after the failover; lease "
              f"{LEASE:g} s), the first move on the new primary was acknowledged "
              f"{first_move_after:.1f} s after the kill; {fail_stops} fail-stops (exit 3), "
              f"{refused_starts} starts refused (exit 2); {sum(p.retried for p in people)} "
              f"requests sent again; refusals {refusals}, "
              f"{sum(p.unreachable for p in people)} calls found no node listening; "
              f"{sum(len(p.acked) for p in people)} people's actions acknowledged, all in the "
              f"records; {len(records)} games finished")
        # The outage was one: the nodes fail-stopped (or waited) and came back by themselves.
        assert served_again < failover + 30, (served_again, failover)
    finally:
        for channel in channels:
            await channel.close()
        if nodes is not None:
            with contextlib.suppress(Exception):
                nodes.stop(30)
        await asyncio.to_thread(formation.stop)
        shutil.rmtree(base, ignore_errors=True)


# ------------------------------------------------------------------ make cluster-ha

def test_make_cluster_ha_serves_a_load_test_and_stops_everything(tmp_path: Path) -> None:
    """`make cluster-ha`'s command (a formation under --pg-dir on the ports given, two workers
    on its multi-host DSN): `copas loadtest` plays whole games through it; Ctrl-C stops every
    node, then every part of the formation."""
    port, pg_port = free_port(), _ports_in_a_row(3)
    # Not under tmp_path: the postgres user must reach it, and pytest keeps its own base
    # directory private (0700, set again by any pytest session that starts meanwhile).
    base = Path(tempfile.mkdtemp(prefix="copas-pgha-"))
    base.chmod(0o755)
    pg_dir = base / "pgha"
    errors = (tmp_path / "stderr").open("w")
    cluster = subprocess.Popen(
        [sys.executable, "-m", "tools.cluster", "--ha", "--workers", "2", "--pg-dir",
         str(pg_dir), "--pg-port", str(pg_port), "--listen", f"127.0.0.1:{port}",
         "--metrics-port", "0", "--web-port", "0", "--unlimited-quotas", "--log-level",
         "warning", "--trick-pause", "0", "--hand-pause", "0"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=errors, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    errors.close()
    try:
        assert cluster.stdout is not None
        lines: list[str] = []
        while not any("listening on" in line for line in lines):
            line = cluster.stdout.readline()
            assert line, "\n".join([*lines, (tmp_path / "stderr").read_text()[-3000:], *(
                f"{log.name}: {log.read_text()[-1500:]}" for log in pg_dir.glob("*.log"))])
            lines.append(line)
        dsn = (f"postgresql://postgres@127.0.0.1:{pg_port + 1},127.0.0.1:{pg_port + 2}"
               "/postgres?target_session_attrs=read-write")
        assert any(line.startswith(f"PostgreSQL with failover on {dsn} ") for line in lines)
        assert Formation(pg_dir).in_sync()
        done = subprocess.run(
            [sys.executable, "-m", "clients.cli", "loadtest", "--server", f"127.0.0.1:{port}",
             "--tables", "2", "--games", "2", "--json"], cwd=ROOT, capture_output=True,
            text=True, timeout=300)
        report = json.loads(done.stdout.strip().splitlines()[-1])
        assert report["games_finished"] == 2 and not report["errors"], report
        cluster.send_signal(signal.SIGINT)
        assert cluster.wait(90) == 0
        assert "PostgreSQL (the formation) stopped" in cluster.stdout.read()
    finally:
        if cluster.poll() is None:  # a failed or interrupted test: Ctrl-C stops it all
            cluster.send_signal(signal.SIGINT)
            try:
                cluster.wait(90)
            except subprocess.TimeoutExpired:
                cluster.kill()
                cluster.wait()
    left = holders(str(pg_dir))
    shutil.rmtree(base, ignore_errors=True)
    assert not left, left  # no keeper, no PostgreSQL left
