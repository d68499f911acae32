"""Nodes sharing one PostgreSQL (a real one, started by the ``postgres`` fixture): fencing by
ownership epoch, one winner per takeover, kill -9 and SIGSTOP of a table's owner with real
server processes, calls through any node. (The table-behaviour suite on PostgreSQL is a step
of `make test`: ``POSTGRESQL_TESTS`` in the Makefile.)"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import psycopg
import pytest
from copas.v1 import copas_pb2, copas_pb2_grpc

import server.cluster.routing
from engine import Game, Phase, Rules, action_to_json, replay, result_of
from server.cluster.queries import PgClusterQueries
from server.store import Node, PgStore, StoreUnusable, TableMeta
from server.store.base import StoreUnreachable
from server.tables.log_entries import LOG_FORMAT
from tests.helpers.calls import (
    PlayStream,
    Watch,
    auth,
    card_pb,
    drive,
    is_over,
    join_all,
    new_table,
    quota_details,
)
from tests.helpers.games import rules_of
from tests.helpers.servers import (
    ServerProcess,
    free_port,
    fresh_database,
    metric,
    serving,
)
from tests.helpers.terminal import PROMPT, Terminal
from tools.pglocal import LocalPostgres

ROOT = Path(__file__).resolve().parent.parent
LEASE = 2.0  # seconds: short, so that takeovers happen within a test


# ------------------------------------------------------------------ the store, in-process

META = TableMeta(name="t", preset="online", rules=Rules(), seed=1, bot_seats=0, order=1)


def _open(dsn: str, node_id: str, lease: float = LEASE) -> PgStore:
    return PgStore.open(dsn, Node(node_id, f"{node_id}:1", lease, log_format=LOG_FORMAT))


def _expire(dsn: str, node_id: str) -> None:
    """As if ``node_id`` stopped renewing long ago."""
    with psycopg.connect(dsn, autocommit=True) as db:
        db.execute("UPDATE nodes SET lease_until = now() - interval '1 hour' "
                   "WHERE node_id = %s", (node_id,))


async def test_a_node_that_lost_its_table_can_never_write_for_it_again(postgres: Any) -> None:
    dsn = fresh_database(postgres.dsn)
    a, b = _open(dsn, "a"), _open(dsn, "b")
    try:
        PgClusterQueries(a).heartbeat()
        b_asks = PgClusterQueries(b)
        b_asks.heartbeat()
        a.create_table("t1", 1.0, META)
        a.append("t1", json.dumps({"kind": "first"}))
        a.register_token("hash-1", "t1", 0)
        await a.sync()
        _expire(dsn, "a")
        taken = await asyncio.to_thread(b_asks.claim)
        assert [t.table_id for t in taken] == ["t1"] and b.epochs["t1"] == 2
        assert [json.loads(e) for _, e in taken[0].entries] == [{"kind": "first"}]
        # a wakes up late and writes for the table: nothing reaches the log, a is told.
        a.append("t1", json.dumps({"kind": "from the past"}))
        a.note_sequence("t1", 99)
        a.forget_token("hash-1", "t1")  # a's timer gives the seat up, too late
        await a.sync()
        assert a.take_fenced() == {"t1"} and "t1" not in a.epochs
        assert a.take_fenced() == set()  # told once
        b.append("t1", json.dumps({"kind": "second"}))
        await b.sync()
        with psycopg.connect(dsn) as db:
            entries = [json.loads(e) for (e,) in db.execute(
                "SELECT entry FROM log WHERE table_id = 't1' ORDER BY n")]
            owner = db.execute("SELECT owner, epoch, seq FROM tables").fetchone()
        assert entries == [{"kind": "first"}, {"kind": "second"}]
        assert owner == ("b", 2, 0)
        assert b_asks.table_of_token("hash-1") == ("t1", 0)  # the player's token still works
    finally:
        await a.close()
        await b.close()


class _CountingConnection:
    """The writer's connection, counting the statements sent on it (each a round trip)."""

    def __init__(self, db: Any) -> None:
        self.db = db
        self.statements = 0

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        self.statements += 1
        return self.db.execute(*args, **kwargs)

    def cursor(self, *args: Any, **kwargs: Any) -> Any:
        counting = self

        class Cursor:
            def __init__(self, cur: Any) -> None:
                self._cur = cur

            def __enter__(self) -> Cursor:
                return self

            def __exit__(self, *exc: object) -> None:
                self._cur.close()

            def execute(self, *a: Any, **k: Any) -> Any:
                counting.statements += 1
                return self._cur.execute(*a, **k)

            def executemany(self, query: Any, params: Any, **k: Any) -> Any:
                params = list(params)
                counting.statements += len(params)
                return self._cur.executemany(query, params, **k)

        return Cursor(self.db.cursor(*args, **kwargs))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.db, name)


async def test_a_commits_statements_do_not_grow_with_the_tables_it_writes_for(
        postgres: Any) -> None:
    """Issue 27, finding 8: every statement of a commit is a round trip of the writer thread,
    and each waits for the GIL while the event loop is busy: per-row statements made one
    commit of a thousand tables' moves cost a second on a loaded machine, the commits fell
    behind and the cluster served no moves. A commit now sends the same statements for 5
    tables as for 200 (what each kind of write needs once), and writes exactly the same."""
    from server.store.postgres import LobbyEntry

    dsn = fresh_database(postgres.dsn)
    store = _open(dsn, "a")
    counting = _CountingConnection(store.writer)
    store.writer = counting
    try:
        PgClusterQueries(store).heartbeat()

        async def one_commit(tables: list[str], first: bool) -> int:
            for table_id in tables:
                if first:
                    store.create_table(table_id, 1.0, META)
                    for seat in range(4):
                        store.register_token(f"{table_id}-{seat}", table_id, seat,
                                             f"join-{table_id}-{seat}")
                for _ in range(2):
                    store.append(table_id, json.dumps({"kind": "move", "table": table_id}))
                store.update_lobby(LobbyEntry(table_id, b"old", "joinable", "online", 4))
                store.update_lobby(LobbyEntry(table_id, table_id.encode(), "playing",
                                              "online", 4))
                store.note_sequence(table_id, 7 if first else 9)
            before = counting.statements
            await store.sync()
            return counting.statements - before

        few, many = [f"f{i}" for i in range(5)], [f"m{i}" for i in range(200)]
        made = [await one_commit(few, True), await one_commit(many, True)]
        moved = [await one_commit(few, False), await one_commit(many, False)]
        assert made[0] == made[1] and moved[0] == moved[1], (made, moved)
        assert moved[1] <= 8  # begin, lock and check the owners, entries, lobby, seq, commit
        with psycopg.connect(dsn) as db:
            rows = db.execute("SELECT table_id, owner, epoch, seq, summary, lobby, players "
                              "FROM tables ORDER BY table_id").fetchall()
            entries = db.execute("SELECT table_id, count(*), max(n) FROM log "
                                 "GROUP BY table_id").fetchall()
            tokens = db.execute("SELECT count(*), count(join_key) FROM tokens").fetchone()
        assert len(rows) == 205
        assert all(owner == "a" and epoch == 1 and seq == 9 and bytes(summary) == t.encode()
                   and lobby == "playing" and players == 4
                   for t, owner, epoch, seq, summary, lobby, players in rows)
        assert sorted(entries) == sorted((t, 4, 4) for t, *_ in rows)
        assert tokens == (820, 820)
        assert PgClusterQueries(store).table_of_token("m7-2") == ("m7", 2)
    finally:
        store.writer = counting.db
        await store.close()


def _cut_off(dsn: str) -> None:
    """Every other connection to the database ends (as in an outage, or a restart)."""
    with psycopg.connect(dsn, autocommit=True) as db:
        db.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                   "WHERE datname = current_database() AND pid <> pg_backend_pid()")


async def test_a_lookup_that_finds_the_database_away_is_store_unreachable(
        postgres: Any) -> None:
    """Each routing lookup refuses the call that needed it (StoreUnreachable: STORAGE_FAILED,
    retry shortly) and the next one connects again; public_owners_of too."""
    dsn = fresh_database(postgres.dsn)
    store = _open(dsn, "a")
    asks = PgClusterQueries(store)
    try:
        asks.heartbeat()
        lookups: list[Callable[[], object]] = [
            lambda: asks.public_owners_of(["t1"]), lambda: asks.owner_of("t1"),
            lambda: asks.epochs_of(["t1"]), lambda: asks.table_of_token("h"),
            lambda: asks.table_of_request("k", ""), lambda: asks.nodes()]
        for lookup in lookups:
            _cut_off(dsn)
            with pytest.raises(StoreUnreachable):
                lookup()
            lookup()  # connected again
    finally:
        await store.close()


def test_a_foreign_or_newer_database_is_refused(postgres: Any) -> None:
    foreign = fresh_database(postgres.dsn)
    with psycopg.connect(foreign, autocommit=True) as db:
        db.execute("CREATE TABLE tables (id integer)")
    with pytest.raises(StoreUnusable, match="another program"):
        _open(foreign, "a")
    newer = fresh_database(postgres.dsn)
    asyncio.run(_open(newer, "a").close())  # migrated to this version
    with psycopg.connect(newer, autocommit=True) as db:
        db.execute("UPDATE copas SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(StoreUnusable, match="schema version 99"):
        _open(newer, "a")
    with pytest.raises(StoreUnusable, match="cannot connect"):
        _open(postgres.dsn.rsplit(":", 1)[0] + ":1/none", "a")


def test_two_nodes_racing_for_an_expired_table_exactly_one_owns_it(postgres: Any) -> None:
    dsn = fresh_database(postgres.dsn)
    dead = _open(dsn, "dead")
    racers = [_open(dsn, f"r{i}") for i in range(2)]
    try:
        PgClusterQueries(dead).heartbeat()
        asks = {racer.node.node_id: PgClusterQueries(racer) for racer in racers}
        for racer_asks in asks.values():
            racer_asks.heartbeat()
        for round_ in range(20):
            table_id = f"t{round_}"
            for racer_asks in asks.values():  # live nodes renew their leases (a busy machine
                racer_asks.heartbeat()  # may take longer than a lease over the 20 rounds)
            with psycopg.connect(dsn, autocommit=True) as db:
                db.execute("INSERT INTO tables (table_id, created, meta, owner, epoch) VALUES "
                           "(%s, %s, '{}', 'dead', 1)", (table_id, float(round_)))
            _expire(dsn, "dead")
            start = threading.Barrier(len(racers))
            won: dict[str, list[str]] = {}

            def race(racer: PgStore, table_id: str = table_id,
                     start: threading.Barrier = start, won: dict[str, list[str]] = won) -> None:
                start.wait()
                won[racer.node.node_id] = [t.table_id for t in
                                          asks[racer.node.node_id].claim(table_id=table_id)]

            threads = [threading.Thread(target=race, args=(r,)) for r in racers]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(30)
            winners = [node for node, tables in won.items() if tables == [table_id]]
            assert len(won) == 2 and len(winners) == 1, won
            with psycopg.connect(dsn) as db:
                assert db.execute("SELECT owner, epoch FROM tables WHERE table_id = %s",
                                  (table_id,)).fetchone() == (winners[0], 2)
            # A live owner's table is nobody else's to claim.
            loser = next(r for r in racers if r.node.node_id != winners[0])
            assert asks[loser.node.node_id].claim(table_id=table_id) == []
    finally:
        for store in (dead, *racers):
            asyncio.run(store.close())


# ------------------------------------------------------------------ nodes as processes

class NodeProcess:
    """A server process, a node of the cluster on ``dsn``; its log goes to a file."""

    def __init__(self, directory: Path, dsn: str, node_id: str, port: int | None = None,
                 metrics_port: int = 0) -> None:
        self.node_id = node_id
        metrics = ("--metrics-port", str(metrics_port), "--metrics-host", "127.0.0.1") \
            if metrics_port else ()
        self.server = ServerProcess(*metrics,
            "--database", dsn, "--node-id", node_id, "--lease", str(LEASE), "--allow-seed",
            "--trick-pause", "0", "--hand-pause", "0", "--play-timeout", "0",
            "--pass-timeout", "0", "--moon-timeout", "0", "--log-format", "json",
            "--unlimited-quotas", "--bot-table-pace", "0.001", "--bot-policy", "auto",
            "--bot-workers", "0", port=port, log_dir=directory)
        self.port = self.server.port
        self.server.metrics_port = metrics_port
        self.channel = grpc.aio.insecure_channel(self.server.address)
        self.stub = copas_pb2_grpc.CopasServiceStub(self.channel)

    def signal(self, number: int) -> None:
        self.server.proc.send_signal(number)

    def kill9(self) -> None:
        self.server.kill9()

    async def stop(self) -> str:
        await self.channel.close()
        if self.server.proc.poll() is None:
            self.server.resume()
            await asyncio.to_thread(self.server.stop)
        return self.server.log()


async def _until_served(stub: copas_pb2_grpc.CopasServiceStub, table_id: str,
                        timeout: float) -> float:
    """Call GetTable until the table answers (it moves to a live node); returns the time."""
    began = time.monotonic()
    while True:
        try:
            await stub.GetTable(copas_pb2.GetTableRequest(table_id=table_id), timeout=10)
            return time.monotonic() - began
        except grpc.aio.AioRpcError as error:
            assert error.code() == grpc.StatusCode.UNAVAILABLE, error
            assert time.monotonic() - began < timeout, "the table never moved"
            await asyncio.sleep(0.1)


def _same_history(*streams: list[copas_pb2.TableEvent]) -> None:
    """Every sequence number means the same event in every stream that has it (a snapshot
    and presence repeat the latest number: they are not numbered events)."""
    seen: dict[int, tuple[str, str]] = {}
    for messages in streams:
        for m in messages:
            kind = m.WhichOneof("kind")
            if kind in ("snapshot", "player_connection"):
                continue
            what = (kind, str(getattr(m, kind)))
            assert seen.setdefault(m.sequence, what) == what, (m.sequence, seen[m.sequence], what)


async def test_kill_9_of_the_owner_mid_trick_another_node_takes_over(
        postgres: Any, tmp_path: Path) -> None:
    dsn = fresh_database(postgres.dsn)
    a = NodeProcess(tmp_path, dsn, "a")
    b = NodeProcess(tmp_path, dsn, "b")
    try:
        # Tables on a: one stopped mid-trick by its players, others played by bots (load).
        table = await new_table(a.stub, preset="quick", seed="42")
        busy = [await new_table(a.stub, preset="quick", seed=str(i), bots=4, max_hands=50)
                for i in range(3)]
        tokens = {j.seat: j.player_token for j in await join_all(b.stub, table.table_id, 4)}
        watches = {s: Watch(a.stub, table.table_id, t) for s, t in tokens.items()}
        game = Game(rules_of(table), "42")
        answers = await drive(a.stub, table.table_id, tokens, watches, game,
                              stop=lambda g: g.phase is Phase.PLAYING and g.trick_number == 1
                              and len(g.trick_cards) == 2)
        acknowledged = answers[-1].sequence
        seen_on_a = {s: list(w.messages) for s, w in watches.items()}
        for w in watches.values():
            await w.close()
        a.kill9()
        # b serves the table within the lease plus the replay, with the same tokens.
        took = await _until_served(b.stub, table.table_id, timeout=LEASE * 3 + 10)
        assert took < LEASE * 3 + 10
        watches = {s: Watch(b.stub, table.table_id, t, after_sequence=acknowledged)
                   for s, t in tokens.items()}
        head = await watches[0].wait_for(lambda m: True)
        assert head.WhichOneof("kind") == "snapshot" and head.sequence >= acknowledged
        assert len(head.view.trick.cards) == 2  # nothing acknowledged was lost
        await drive(b.stub, table.table_id, tokens, watches, game)
        record = await b.stub.GetGameRecord(copas_pb2.GetGameRecordRequest(
            record_id=table.table_id), timeout=15)
        data = json.loads(record.record.record_json)
        assert data["actions"] == [action_to_json(x) for x in game.actions]
        assert data["result"] == result_of(game) == result_of(replay(data))
        _same_history(*seen_on_a.values(), *(w.messages for w in watches.values()))
        # The bots' tables went on too (taken over by the sweep, not by a call).
        for other in busy:
            await _until_served(b.stub, other.table_id, timeout=LEASE * 3 + 10)
        for w in watches.values():
            await w.close()
    finally:
        await a.stop()
        log = await b.stop()
    assert "tables_taken_over" in log or "table_taken_over" in log


async def test_sigstop_past_the_lease_the_old_owner_drops_the_table(
        postgres: Any, tmp_path: Path) -> None:
    dsn = fresh_database(postgres.dsn)
    a = NodeProcess(tmp_path, dsn, "a")
    b = NodeProcess(tmp_path, dsn, "b")
    try:
        table = await new_table(a.stub, preset="quick", seed="9")
        tokens = {j.seat: j.player_token for j in await join_all(a.stub, table.table_id, 4)}
        on_a = {s: Watch(a.stub, table.table_id, t) for s, t in tokens.items()}
        game = Game(rules_of(table), "9")
        await drive(a.stub, table.table_id, tokens, on_a, game,
                    stop=lambda g: g.phase is Phase.PLAYING and len(g.trick_cards) == 1)
        a.signal(signal.SIGSTOP)
        await asyncio.sleep(LEASE * 1.5)  # a's lease runs out (a cannot renew it)
        await _until_served(b.stub, table.table_id, timeout=LEASE * 3 + 10)
        on_b = {s: Watch(b.stub, table.table_id, t) for s, t in tokens.items()}
        await drive(b.stub, table.table_id, tokens, on_b, game,
                    stop=lambda g: g.phase is Phase.PLAYING and g.trick_number == 2)
        a.signal(signal.SIGCONT)
        # a's streams end (the table moved); a call through a reaches the table on b.
        for w in on_a.values():
            await asyncio.wait_for(w.task, 15)
            assert w.error is not None and w.error.code() == grpc.StatusCode.UNAVAILABLE
        seat = game.to_act()[0]
        deadline = time.monotonic() + 15
        while True:
            try:
                view = await a.stub.GetView(copas_pb2.GetViewRequest(
                    table_id=table.table_id), metadata=auth(tokens[seat]), timeout=10)
                break
            except grpc.aio.AioRpcError as error:
                assert error.code() == grpc.StatusCode.UNAVAILABLE
                assert time.monotonic() < deadline
                await asyncio.sleep(0.2)
        assert view.view.trick_number == 2
        await drive(a.stub, table.table_id, tokens, on_b, game)
        _same_history(*(w.messages for w in on_a.values()),
                      *(w.messages for w in on_b.values()))
        record = await a.stub.GetGameRecord(copas_pb2.GetGameRecordRequest(
            record_id=table.table_id), timeout=15)
        assert json.loads(record.record.record_json)["actions"] == \
            [action_to_json(x) for x in game.actions]
        for w in on_b.values():
            await w.close()
    finally:
        log_a = await a.stop()
        await b.stop()
    assert "tables_lost" in log_a or "table_dropped" in log_a


async def test_while_an_owner_is_frozen_every_other_node_serves_its_table(
        postgres: Any, tmp_path: Path) -> None:
    """Issue 19, finding 2: three nodes; c relays a's table (a call and a watching stream)
    when a is SIGSTOPped. c's relayed stream ends (UNAVAILABLE, TABLE_MOVED) instead of
    hanging, and both b and c serve the table within the lease and a few seconds: every
    refusal meanwhile is UNAVAILABLE (retry), none a client's own deadline running out."""
    dsn = fresh_database(postgres.dsn)
    a, b, c = (NodeProcess(tmp_path, dsn, name) for name in "abc")
    try:
        table = await new_table(a.stub, preset="quick", seed="11")
        tokens = {j.seat: j.player_token for j in await join_all(a.stub, table.table_id, 4)}
        view = await c.stub.GetView(copas_pb2.GetViewRequest(table_id=table.table_id),
                                    metadata=auth(tokens[0]), timeout=10)  # relayed by c
        assert len(view.view.hand) == 13
        through_c = Watch(c.stub, table.table_id, tokens[1])
        await through_c.wait_for(lambda m: m.WhichOneof("kind") == "snapshot")
        a.signal(signal.SIGSTOP)
        frozen_at = time.monotonic()
        await asyncio.wait_for(through_c.task, LEASE * 3 + 10)
        assert through_c.error is not None
        assert through_c.error.code() == grpc.StatusCode.UNAVAILABLE, through_c.error
        served = await asyncio.gather(
            _until_served(c.stub, table.table_id, timeout=LEASE * 3 + 10),
            _until_served(b.stub, table.table_id, timeout=LEASE * 3 + 10))
        assert max(served) < LEASE * 3 + 10, served
        for node in (b, c):  # the players' tokens work through either survivor
            answer = await node.stub.GetView(copas_pb2.GetViewRequest(
                table_id=table.table_id), metadata=auth(tokens[2]), timeout=10)
            assert len(answer.view.hand) == 13
        print(f"stream ended, then served by b and c {time.monotonic() - frozen_at:.1f} s "
              f"after the SIGSTOP (lease {LEASE} s)")
    finally:
        for node in (a, b, c):
            await node.stop()


async def test_1600_lobby_streams_with_distinct_filters_leave_the_lease_alone(
        postgres: Any, tmp_path: Path) -> None:
    """Issue 19, finding 4: 1,600 WatchLobby streams on one node, each with a filter of its
    own (players = 1000, 1001, ...), for three leases. The node reads its lobby once a second
    whatever the filters, and renews its lease on a thread of its own: no renewal comes
    later than two thirds of the lease after the one before (nominally a third), and its own
    table is served throughout (no TABLE_MOVED)."""
    dsn = fresh_database(postgres.dsn)
    a = NodeProcess(tmp_path, dsn, "a", metrics_port=free_port())
    channels = [grpc.aio.insecure_channel(a.server.address, options=[  # 20 connections
        ("grpc.use_local_subchannel_pool", 1)]) for _ in range(20)]
    streams: list[Any] = []
    try:
        table = await new_table(a.stub, preset="quick", seed="3")
        token = (await join_all(a.stub, table.table_id, 1))[0].player_token
        for i in range(1600):
            stub = copas_pb2_grpc.CopasServiceStub(channels[i % len(channels)])
            streams.append(stub.WatchLobby(copas_pb2.WatchLobbyRequest(players=1000 + i)))
        firsts = await asyncio.wait_for(asyncio.gather(*(s.read() for s in streams)), 60)
        assert all(f.WhichOneof("event") == "snapshot" for f in firsts)
        oldest, served = 0.0, 0
        end = time.monotonic() + LEASE * 3
        while time.monotonic() < end:
            age = await asyncio.to_thread(metric, a.server, "copas_cluster_lease_age_seconds")
            oldest = max(oldest, age)
            view = await a.stub.GetView(copas_pb2.GetViewRequest(table_id=table.table_id),
                                        metadata=auth(token), timeout=5)
            served += view.view.table_id == table.table_id
            await asyncio.sleep(0.05)
        lookups = await asyncio.to_thread(metric, a.server, "copas_cluster_lobby_reads_cached")
        print(f"1,600 lobby filters: oldest lease {oldest:.2f} s (lease {LEASE} s), "
              f"{served} views served, lobby reads kept {lookups:.0f}")
        assert 0 < oldest <= LEASE * 2 / 3, oldest  # (0: no such metric)
        assert served > 10 and lookups <= 2
    finally:
        for stream in streams:
            stream.cancel()
        for channel in channels:
            await channel.close()
        await a.stop()


# ------------------------------------------------------------------ make cluster

def test_make_cluster_serves_loadtest_and_play_unchanged_and_stops_cleanly(
        tmp_path: Path) -> None:
    """`make cluster`'s command (a PostgreSQL of its own under --pg-dir, two workers sharing
    a port): `copas loadtest` and `copas play` play whole games through it; Ctrl-C stops
    every node and the PostgreSQL."""
    port = free_port()
    pg_dir = tmp_path / "pg"
    cluster = subprocess.Popen(
        [sys.executable, "-m", "tools.cluster", "--workers", "2", "--pg-dir", str(pg_dir),
         "--pg-port", str(free_port()), "--listen", f"127.0.0.1:{port}", "--metrics-port",
         "0", "--web-port", "0", "--unlimited-quotas", "--log-level", "warning",  # short pauses:
         "--trick-pause", "0.05", "--hand-pause", "0.1"],  # the default 2 s a trick
        cwd=ROOT, stdout=subprocess.PIPE, stderr=(tmp_path / "cluster.err").open("w"),
        text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert cluster.stdout is not None
        lines = []
        while not any("listening on" in line for line in lines):
            line = cluster.stdout.readline()
            assert line, "\n".join([*lines, (tmp_path / "cluster.err").read_text()[-3000:]])
            lines.append(line)
        assert any(line.startswith("PostgreSQL on postgresql://") for line in lines)
        assert f"listening on 127.0.0.1:{port}" in lines[-1] and "2 workers" in lines[-1]
        done = subprocess.run(
            [sys.executable, "-m", "clients.cli", "loadtest", "--server", f"127.0.0.1:{port}",
             "--tables", "4", "--games", "4", "--json"], cwd=ROOT, capture_output=True,
            text=True, timeout=300)
        report = json.loads(done.stdout.strip().splitlines()[-1])
        assert report["games_finished"] == 4 and not report["errors"], report
        assert report["server_cpu_ms_per_move"] > 0  # both workers' CPU, read from /proc
        # `copas play` in a terminal, unchanged: a whole game against the server's bots.
        term = Terminal("play", "--server", f"127.0.0.1:{port}", "--name", "Tester",
                        "--preset", "quick")
        term.read_until(r"You are Tester, seat 0")
        while True:
            prompt = term.read_until(PROMPT, timeout=60)
            if prompt.group(1).startswith("final standings"):
                break
            if prompt.group(1).startswith("Choose"):
                term.type("1 2 3\n")
            elif prompt.group(1).startswith("Your turn"):
                term.type(prompt.group(2).split()[0] + "\n")
            else:
                term.type("a\n")
        assert term.exit_code() == 0 and "hand 1 scored" in term.screen
        cluster.send_signal(signal.SIGINT)
        assert cluster.wait(60) == 0
        rest = cluster.stdout.read()
        assert "PostgreSQL stopped" in rest
    finally:
        if cluster.poll() is None:  # a failed or interrupted test: Ctrl-C stops it all
            cluster.send_signal(signal.SIGINT)
            try:
                cluster.wait(60)
            except subprocess.TimeoutExpired:
                cluster.kill()
                cluster.wait()
    assert not LocalPostgres(pg_dir, 0).is_running()


# ------------------------------------------------------------------ any node answers

async def test_any_node_answers_lobby_joins_views_and_records(
        postgres: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two nodes in this process on one database: what one holds, the other lists, watches,
    joins (forwarded), shows and records."""
    dsn = fresh_database(postgres.dsn)
    async with serving(database=dsn, node_id="a", allow_seed=True) as (_, on_a), \
            serving(database=dsn, node_id="b", allow_seed=True) as (node_b, on_b):
        lobby = on_b.WatchLobby(copas_pb2.WatchLobbyRequest(only_joinable=True))
        assert (await asyncio.wait_for(lobby.read(), 10)).WhichOneof("event") == "snapshot"
        table = await new_table(on_a, preset="quick", seed="5")
        added = await asyncio.wait_for(lobby.read(), 10)
        assert added.table_added.table_id == table.table_id
        # The node's one read of its lobby, filtered in memory for each watcher.
        for wanted, shown in ((copas_pb2.WatchLobbyRequest(preset="quick", players=4), True),
                              (copas_pb2.WatchLobbyRequest(preset="classic"), False),
                              (copas_pb2.WatchLobbyRequest(players=3), False),
                              (copas_pb2.WatchLobbyRequest(only_joinable=True,
                                                           preset="quick"), True)):
            other = on_b.WatchLobby(wanted)
            first = await asyncio.wait_for(other.read(), 10)
            other.cancel()
            assert [t.table_id for t in first.snapshot.tables] == \
                ([table.table_id] if shown else []), wanted
        listed = await on_b.ListTables(copas_pb2.ListTablesRequest())
        assert [t.table_id for t in listed.tables] == [table.table_id]
        joins = await join_all(on_b, table.table_id, 4)  # forwarded to a, which owns it
        assert sorted(j.seat for j in joins) == [0, 1, 2, 3]
        removed = await asyncio.wait_for(lobby.read(), 10)
        while removed.WhichOneof("event") != "table_removed":  # full: no longer joinable
            removed = await asyncio.wait_for(lobby.read(), 10)
        lobby.cancel()
        tokens = {j.seat: j.player_token for j in joins}
        views = {s: (await on_b.GetView(copas_pb2.GetViewRequest(table_id=table.table_id),
                                        metadata=auth(t))).view for s, t in tokens.items()}
        assert all(len(v.hand) == 13 for v in views.values())  # each seat its own hand
        assert len({tuple(c.text for c in v.hand) for v in views.values()}) == 4
        # A token works through either node; a wrong one is refused the same way.
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await on_b.GetView(copas_pb2.GetViewRequest(table_id=table.table_id),
                               metadata=auth("not-a-token"))
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        bots = await new_table(on_a, seed="6", bots=4)
        watch = Watch(on_b, bots.table_id)  # a stream through b, relayed from a
        await watch.wait_for(is_over, timeout=60)
        await watch.close()
        record = await on_b.GetGameRecord(copas_pb2.GetGameRecordRequest(
            record_id=bots.table_id))
        assert json.loads(record.record.record_json)["actions"]
        # What the relaying node held for those calls is given back, and what it remembers
        # is bounded (its metrics say).
        held = node_b.metrics.registry.get_sample_value
        assert held("copas_cluster_relayed_calls") == 0
        monkeypatch.setattr(server.cluster.routing, "OWNER_CACHE", 3)
        others = [await new_table(on_a, seed=str(i)) for i in range(6)]
        for other in others:
            await on_b.GetTable(copas_pb2.GetTableRequest(table_id=other.table_id))
        assert (held("copas_cluster_owners_cached") or 0) <= 3
        for other in others:  # a table nobody has: NOT_FOUND, nothing remembered
            with pytest.raises(grpc.aio.AioRpcError) as missing:
                await on_b.GetTable(copas_pb2.GetTableRequest(table_id=other.table_id + "x"))
            assert missing.value.code() == grpc.StatusCode.NOT_FOUND
        assert (held("copas_cluster_owners_cached") or 0) <= 3
        assert held("copas_cluster_claims") == 0
        # Lobby filters varied: the node's lobby keeps one read (two with finished tables).
        for preset in ("a", "b", "c", "d", "e", "f"):
            watch = on_b.WatchLobby(copas_pb2.WatchLobbyRequest(preset=preset))
            first = await asyncio.wait_for(watch.read(), 10)
            assert list(first.snapshot.tables) == []
            watch.cancel()
        assert (held("copas_cluster_lobby_reads_cached") or 0) <= 2


async def test_a_clients_own_hop_mark_changes_nothing(postgres: Any) -> None:
    """Issue 19, finding 5: ``x-copas-hops`` from a client (with no cluster key, or a wrong
    one) is not a relay's mark: the call is relayed to the owner and answered, and the owner
    the relaying node remembers stays remembered (no database read for the next call)."""
    dsn = fresh_database(postgres.dsn)
    async with serving(database=dsn, node_id="a", allow_seed=True) as (_, on_a), \
            serving(database=dsn, node_id="b", allow_seed=True) as (node_b, on_b):
        table = await new_table(on_a, preset="quick", seed="5")
        request = copas_pb2.GetTableRequest(table_id=table.table_id)
        assert (await on_b.GetTable(request)).table.table_id == table.table_id
        held = node_b.metrics.registry.get_sample_value
        assert held("copas_cluster_owners_cached") == 1
        for metadata in ((("x-copas-hops", "1"),),
                         (("x-copas-hops", "1"), ("x-copas-cluster-key", "a guess"))):
            answer = await on_b.GetTable(request, metadata=metadata, timeout=10)
            assert answer.table.table_id == table.table_id
            assert held("copas_cluster_owners_cached") == 1


async def test_unknown_ids_cost_the_database_a_bounded_number_of_reads(
        postgres: Any) -> None:
    """Issue 19, finding 5: 600 GetTable and GetView calls with made-up table ids and tokens
    through one node: it reads the database at most its budget (here 50/s, a bucket as deep)
    and refuses the rest at once (RATE_LIMITED, with a delay); a table whose owner it knows is
    served meanwhile without a read."""
    dsn = fresh_database(postgres.dsn)
    async with serving(database=dsn, node_id="a", allow_seed=True) as (_, on_a), \
            serving(database=dsn, node_id="b", allow_seed=True,
                    cluster_lookups_per_second=50.0) as (node_b, on_b):
        table = await new_table(on_a, preset="quick", seed="5")
        known = copas_pb2.GetTableRequest(table_id=table.table_id)
        await on_b.GetTable(known)  # b remembers a owns it
        sample = node_b.metrics.registry.get_sample_value
        began, reads_before = time.monotonic(), sample("copas_cluster_lookups_total",
                                                       {"outcome": "read"})

        async def unknown(i: int) -> str:
            try:
                if i % 2:
                    await on_b.GetTable(copas_pb2.GetTableRequest(table_id=f"t_nobody{i}"),
                                        timeout=10)
                else:
                    await on_b.GetView(copas_pb2.GetViewRequest(),
                                       metadata=auth(f"made-up-token-{i}"), timeout=10)
                return "OK"
            except grpc.aio.AioRpcError as error:
                if error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
                    assert quota_details(error)[0] == "RATE_LIMITED", error
                if error.code() == grpc.StatusCode.UNAVAILABLE:  # say why, should it happen
                    return f"UNAVAILABLE: {error.details()}"
                return error.code().name

        codes: collections.Counter[str] = collections.Counter()
        for batch in range(12):  # 50 at once: within one connection's concurrent streams
            codes.update(await asyncio.gather(*(unknown(batch * 50 + i) for i in range(50))))
        assert (await on_b.GetTable(known, timeout=5)).table.table_id == table.table_id
        elapsed = time.monotonic() - began
        reads = sample("copas_cluster_lookups_total", {"outcome": "read"}) - reads_before
        shed = sample("copas_cluster_lookups_total", {"outcome": "shed"})
    assert reads <= 50 + 50 * elapsed + 1, (reads, elapsed)
    assert codes["RESOURCE_EXHAUSTED"] == shed > 0, codes
    assert set(codes) <= {"RESOURCE_EXHAUSTED", "NOT_FOUND", "UNAUTHENTICATED"}, codes


async def test_a_clusters_list_pages_show_every_table_once(postgres: Any) -> None:
    """Pages follow the database's own (created, table id) order: no table twice, none
    skipped, also when tables share a creation time or their time does not survive a
    round trip through a Timestamp."""
    dsn = fresh_database(postgres.dsn)
    async with serving(database=dsn, node_id="a") as (_, stub):
        await stub.ListTables(copas_pb2.ListTablesRequest())  # the schema is there
        times = [1764590000.1234567, 1764590000.1234567, 1764590000.7654321,
                 1764590001.3333333, 1764590001.3333333, 1764590001.3333333, 1764590002.9]
        ids = [f"t_page{i}" for i in range(len(times))]
        with psycopg.connect(dsn, autocommit=True) as db:
            for table_id, created in zip(ids, times, strict=True):
                summary = copas_pb2.TableSummary(table_id=table_id, display_name=table_id)
                db.execute("INSERT INTO tables (table_id, created, meta, summary, lobby, "
                           "preset, players) VALUES (%s, %s, '{}', %s, 'joinable', 'online', "
                           "4)", (table_id, created, summary.SerializeToString()))
        seen: list[str] = []
        token = ""
        for _ in range(10):
            page = await stub.ListTables(copas_pb2.ListTablesRequest(page_size=2,
                                                                     page_token=token))
            seen += [t.table_id for t in page.tables]
            token = page.next_page_token
            if not token:
                break
        assert sorted(seen) == sorted(ids) and len(seen) == len(set(seen))
        newest_first = sorted(zip(times, ids, strict=True), key=lambda r: (-r[0], r[1]))
        assert seen == [table_id for _, table_id in newest_first]


async def test_a_play_stream_through_another_node_is_relayed_as_one_stream(
        postgres: Any) -> None:
    """Players whose connection lands on a node that does not own their table play a whole
    game over Play through it: one relayed stream each, the owner's events and results."""
    dsn = fresh_database(postgres.dsn)
    async with serving(database=dsn, node_id="a", allow_seed=True) as (_, on_a), \
            serving(database=dsn, node_id="b", allow_seed=True) as (node_b, on_b):
        table = await new_table(on_a, preset="quick", seed="31")
        joins = await join_all(on_b, table.table_id, 4)
        streams = {j.seat: PlayStream(on_b, table.table_id, j.player_token) for j in joins}
        game = Game(rules_of(table), "31")
        while not game.is_over:
            seat = game.to_act()[0]
            action = game.auto_action(seat)
            request = {"pass_cards": copas_pb2.PassCardsRequest(
                cards=[card_pb(c) for c in action.cards])} if game.phase is Phase.PASSING \
                else {"play_card": copas_pb2.PlayCardRequest(card=card_pb(action.card))}
            assert not (await streams[seat].act(**request)).HasField("error")
            game.apply(action)
        for stream in streams.values():
            await stream.wait_event(lambda e: e.view.phase == copas_pb2.PHASE_GAME_OVER)
        held = node_b.metrics.registry.get_sample_value
        assert held("copas_cluster_relayed_calls") == 4  # one relayed call per stream
        assert held("copas_play_streams") == 0  # none served on b itself
        for stream in streams.values():
            await stream.close()
        await asyncio.sleep(0)
        for _ in range(100):
            if held("copas_cluster_relayed_calls") == 0:
                break
            await asyncio.sleep(0.05)
        assert held("copas_cluster_relayed_calls") == 0  # given back


async def test_a_clean_stop_hands_tables_over_and_the_node_losing_a_claim_forwards(
        postgres: Any) -> None:
    """A node stopping cleanly gives its lease up (no wait); two nodes asked for its table
    at the same moment both answer: one takes it over, the other forwards to it."""
    dsn = fresh_database(postgres.dsn)
    async with serving(database=dsn, node_id="a", allow_seed=True) as (_, on_a):
        table = await new_table(on_a, preset="quick", seed="11")
        joins = await join_all(on_a, table.table_id, 4)
    async with serving(database=dsn, node_id="b") as (_, on_b), \
            serving(database=dsn, node_id="c") as (_, on_c):
        views = await asyncio.gather(*(
            stub.GetView(copas_pb2.GetViewRequest(table_id=table.table_id),
                         metadata=auth(join.player_token), timeout=10)
            for stub in (on_b, on_c) for join in joins))
        assert all(len(v.view.hand) == 13 for v in views)
        with psycopg.connect(dsn) as db:
            owner = db.execute("SELECT owner FROM tables WHERE table_id = %s",
                               (table.table_id,)).fetchone()[0]
        assert owner in ("b", "c")


def _owner_of(dsn: str, table_id: str) -> str:
    with psycopg.connect(dsn) as db:
        row = db.execute("SELECT owner FROM tables WHERE table_id = %s", (table_id,)).fetchone()
    return str(row[0]) if row else ""


async def test_a_relaying_node_lets_go_of_a_node_that_went_away(postgres: Any) -> None:
    """b relays to a; a stops; b's next call fails over (UNAVAILABLE, then the table on b)
    and b keeps no connection to a's old address."""
    dsn = fresh_database(postgres.dsn)
    async with serving(database=dsn, node_id="b") as (node_b, on_b):
        async with serving(database=dsn, node_id="a", allow_seed=True) as (_, on_a):
            table = await new_table(on_a, preset="quick", seed="12")
            joins = await join_all(on_b, table.table_id, 4)  # relayed to a
            held = node_b.metrics.registry.get_sample_value
            assert held("copas_cluster_connections") == 1
        request = copas_pb2.GetViewRequest(table_id=table.table_id)
        failures = 0
        while True:
            try:
                view = await on_b.GetView(request, metadata=auth(joins[0].player_token),
                                          timeout=10)
                break
            except grpc.aio.AioRpcError as error:
                assert error.code() == grpc.StatusCode.UNAVAILABLE and failures < 3, error
                failures += 1
        assert len(view.view.hand) == 13
        owner = await asyncio.to_thread(_owner_of, dsn, table.table_id)
        assert owner == "b"  # b took it over
        assert held("copas_cluster_connections") == 0  # nothing kept for a
