"""Issue 39, "a cluster knows the versions of its nodes": a rolling upgrade from the previous
release (1c5f50a, extracted from git and run beside this checkout) on a real PostgreSQL. The
old node runs when the first new node migrates the database under it, and serves on. The new
node's tables, whose logs the old release cannot read (log format 2: a join's network, and a
championship's table held by its pause, an entry kind the old release quarantines, its
players then told BAD_TOKEN), are never taken over by the old node when the new one is
killed -9: the database refuses its claims, its calls for them are told to retry, nothing is
quarantined. A new node takes them over at the sequences they had and plays them to their
end; and the old node's table goes to a new node (new reads old). Also, on stores in this
process: the rule as the database enforces it for a node of any release, this one facing a
newer log than its own; and the migration's bounded wait for its locks."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import psycopg
import pytest
from copas.admin.v1 import admin_pb2, admin_pb2_grpc
from copas.v1 import (
    accounts_pb2,
    accounts_pb2_grpc,
    championships_pb2,
    championships_pb2_grpc,
    copas_pb2,
    copas_pb2_grpc,
)

import server.store.postgres
from clients.common import error_reason
from engine import Rules
from server.cluster.queries import PgClusterQueries
from server.store import Node, PgStore, StoreUnusable, TableMeta
from server.store.postgres import PG_SCHEMA_VERSION
from server.tables.log_entries import LOG_FORMAT
from tests.helpers.calls import auth
from tests.helpers.championships import OPERATOR, OPERATOR_CALL
from tests.helpers.releases import extract_release, play_by_views, refused, release_server
from tests.helpers.servers import ServerProcess, fresh_database

RELEASE = "1c5f50a"  # the previous release (tests/fixtures/release-1c5f50a/)
LEASE = 2.0  # seconds: takeovers within the test; a node sweeps every LEASE / 2
NO_CLOCKS = copas_pb2.RulesOverrides(play_timeout_seconds=0, pass_timeout_seconds=0,
                                     moon_timeout_seconds=0, trick_pause_seconds=0,
                                     hand_pause_seconds=0)
CLOCKS = copas_pb2.RulesOverrides(play_timeout_seconds=60, pass_timeout_seconds=60,
                                  moon_timeout_seconds=60, trick_pause_seconds=0,
                                  hand_pause_seconds=0)  # a championship's games have clocks


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return extract_release(RELEASE, tmp_path_factory.mktemp("release") / RELEASE)


def flags(dsn: str, node_id: str, tmp: Path) -> tuple[str, ...]:
    return ("--database", dsn, "--node-id", node_id, "--lease", str(LEASE), "--allow-seed",
            "--unlimited-quotas", "--bot-workers", "0", "--log-format", "json",
            "--admin-token-file", str(tmp / "operator"), "--championship-interval", "0.1")


def row(dsn: str, sql: str, *args: Any) -> Any:
    with psycopg.connect(dsn, autocommit=True) as db:
        return db.execute(sql, args).fetchone()


async def until(check: Callable[[], bool], what: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.05)


def events(server: ServerProcess, name: str) -> list[dict[str, Any]]:
    """The server's JSON log lines of event ``name``."""
    found = []
    for line in server.log().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("event") == name:
            found.append(entry)
    return found


async def new_table(stub: copas_pb2_grpc.CopasServiceStub, seed: str) -> str:
    return str((await stub.CreateTable(copas_pb2.CreateTableRequest(
        preset="quick", seed=seed, display_name=seed, rules=NO_CLOCKS), timeout=10)
                ).table.table_id)


async def views(stub: copas_pb2_grpc.CopasServiceStub, table_id: str,
                tokens: list[str]) -> list[tuple[Any, ...]]:
    """What each seat's GetView shows of the game, and at which sequence (what both releases
    show alike: a newer one shows more)."""
    found = []
    for token in tokens:
        answer = await stub.GetView(copas_pb2.GetViewRequest(table_id=table_id),
                                    metadata=auth(token), timeout=10)
        view = answer.view
        found.append((answer.sequence, view.seat, view.phase, view.hand_number,
                      view.trick_number, [c.text for c in view.hand],
                      [c.card.text for c in view.trick.cards], list(view.to_act),
                      [c.text for c in view.legal_cards], view.is_held))
    return found


async def signed_in(channel: grpc.aio.Channel, name: str) -> list[str]:
    """Four accounts signed in: their access tokens."""
    accounts = accounts_pb2_grpc.AccountServiceStub(channel)
    return [(await accounts.SignInDevice(accounts_pb2.SignInDeviceRequest(
        device_secret=f"mixed-versions-{name}-device-secret-{i:04}", display_name=f"{name}{i}"),
        timeout=10)).session.access_token for i in range(4)]


async def championship_table(channel: grpc.aio.Channel) -> tuple[str, str, list[str]]:
    """A championship of one round for four people, started when full: its id, its table
    and the seats' player tokens."""
    admin = admin_pb2_grpc.AdminServiceStub(channel)
    cid = (await admin.CreateChampionship(admin_pb2.CreateChampionshipRequest(
        settings=championships_pb2.ChampionshipSettings(
            display_name="Mixed cup", rounds=1, max_players=4, start_when_full=True,
            preset="quick", rules=CLOCKS), reason="test"), metadata=OPERATOR_CALL,
        timeout=10)).championship.championship_id
    champs = championships_pb2_grpc.ChampionshipServiceStub(channel)
    tokens = []
    for access in await signed_in(channel, "C"):
        await champs.Register(championships_pb2.RegisterRequest(championship_id=cid),
                              metadata=auth(access), timeout=10)
        tokens.append(access)
    seats = []
    for access in tokens:
        watch = champs.WatchChampionship(championships_pb2.WatchChampionshipRequest(
            championship_id=cid), metadata=auth(access), timeout=20)
        async for message in watch:
            if message.your_table.table_id:
                seats.append(message.your_table)
                break
        watch.cancel()
    (table_id,) = {seat.table_id for seat in seats}
    return cid, table_id, [seat.player_token for seat in sorted(seats, key=lambda s: s.seat)]


async def pause(channel: grpc.aio.Channel, cid: str, is_paused: bool) -> None:
    await admin_pb2_grpc.AdminServiceStub(channel).PauseChampionship(
        admin_pb2.PauseChampionshipRequest(championship_id=cid, is_paused=is_paused,
                                           reason="test"), metadata=OPERATOR_CALL, timeout=10)


async def test_an_old_node_never_takes_a_new_node_s_table_mid_roll(
        postgres: Any, release: Path, tmp_path: Path) -> None:
    dsn = fresh_database(postgres.dsn)
    (tmp_path / "operator").write_text(OPERATOR + "\n")
    # The old release first, as in a roll; it drives no championship here (the championships'
    # own compatibility is not this test's subject).
    a = release_server(release, *flags(dsn, "a", tmp_path), "--championship-interval", "3600",
                       log_dir=tmp_path)
    nodes = [a]
    try:
        async with grpc.aio.insecure_channel(a.address) as to_a:
            stub_a = copas_pb2_grpc.CopasServiceStub(to_a)
            old_table = await new_table(stub_a, "old")
            old_tokens = [(await stub_a.JoinTable(copas_pb2.JoinTableRequest(
                table_id=old_table, display_name=f"O{i}"), timeout=10)).player_token
                for i in range(4)]
            await play_by_views(stub_a, old_table, old_tokens, cards=4)
            assert row(dsn, "SELECT value FROM copas WHERE key = 'schema_version'") == ("7",)

            b = ServerProcess(*flags(dsn, "b", tmp_path), log_dir=tmp_path)  # migrates under a
            nodes.append(b)
            assert row(dsn, "SELECT value FROM copas WHERE key = 'schema_version'") == (
                str(PG_SCHEMA_VERSION),)
            # The old node serves on, on the migrated schema, and writes its own format.
            await play_by_views(stub_a, old_table, old_tokens, cards=8)
            assert row(dsn, "SELECT log_format FROM tables WHERE table_id = %s",
                       old_table) == (1,)
            async with grpc.aio.insecure_channel(b.address) as to_b:
                stub_b = copas_pb2_grpc.CopasServiceStub(to_b)
                assert await views(stub_b, old_table, old_tokens[:1]) == \
                    await views(stub_a, old_table, old_tokens[:1])  # relayed to a
                # The new node's tables: signed-in people's joins (with their network), and
                # a championship's table held by its pause (a kind the old release quarantines).
                network = await new_table(stub_b, "new")
                tokens = [(await stub_b.JoinTable(copas_pb2.JoinTableRequest(
                    table_id=network), metadata=auth(access), timeout=10)).player_token
                    for access in await signed_in(to_b, "N")]
                await play_by_views(stub_b, network, tokens, cards=6)
                cid, held, held_tokens = await championship_table(to_b)
                await play_by_views(stub_b, held, held_tokens, cards=5)
                await pause(to_b, cid, True)
                await until(lambda: row(dsn, "SELECT count(*) FROM log WHERE table_id = %s "
                                        "AND entry LIKE '{\"k\":\"hold\"%%'", held) == (1,),
                            "the championship's table is held")
                before = {network: await views(stub_b, network, tokens),
                          held: await views(stub_b, held, held_tokens)}
            seats = {network: tokens, held: held_tokens}
            owned = "SELECT owner, epoch, log_format FROM tables WHERE table_id = %s"
            rows = {t: row(dsn, owned, t) for t in seats}
            assert {t: r[::2] for t, r in rows.items()} == {t: ("b", LOG_FORMAT) for t in seats}
            b.kill9()
            await until(lambda: row(dsn, "SELECT lease_until < now() FROM nodes "
                                    "WHERE node_id = 'b'") == (True,), "b's lease runs out")
            # A call through the old node: it tries to claim the table and the database
            # refuses; the player is told to retry, not that their seat is gone.
            for table_id, its_tokens in seats.items():
                error = await refused(stub_a.GetView(copas_pb2.GetViewRequest(
                    table_id=table_id), metadata=auth(its_tokens[0]), timeout=10))
                assert (error.code(), error_reason(error)) == (
                    grpc.StatusCode.UNAVAILABLE, "TABLE_MOVED"), error
            # Its sweeps (every LEASE / 2) leave them too: b's, as they were.
            watched_until = time.monotonic() + 2 * LEASE
            while time.monotonic() < watched_until:
                assert {t: row(dsn, owned, t) for t in seats} == rows
                await asyncio.sleep(0.1)
            assert a.proc.poll() is None
            assert not events(a, "table_quarantined") and not events(a, "takeover_failed")

            # A new node takes them over: the same seats, tokens and sequences; played to
            # their end (the championship resumed by its operator).
            c = ServerProcess(*flags(dsn, "c", tmp_path), log_dir=tmp_path)
            nodes.append(c)
            async with grpc.aio.insecure_channel(c.address) as to_c:
                stub_c = copas_pb2_grpc.CopasServiceStub(to_c)
                await until(lambda: {row(dsn, owned, t)[0] for t in seats} == {"c"},
                            "c takes the new node's tables over")
                assert {t: await views(stub_c, t, its) for t, its in seats.items()} == before
                await pause(to_c, cid, False)
                for table_id, its_tokens in seats.items():
                    await play_by_views(stub_c, table_id, its_tokens)
                    assert (await views(stub_c, table_id, its_tokens[:1]))[0][2] == \
                        copas_pb2.PHASE_GAME_OVER
                told = events(c, "node_runs_older_copas")
                assert [(e["node_id"], e["log_format"]) for e in told] == [("a", 1)], told

                # New reads old: the old node killed -9, its table goes on on a new node.
                old_before = await views(stub_a, old_table, old_tokens)
                a.kill9()
                await until(lambda: row(dsn, owned, old_table)[0] == "c",
                            "c takes the old node's table over", timeout=30)
                assert await views(stub_c, old_table, old_tokens) == old_before
                await play_by_views(stub_c, old_table, old_tokens)
            assert row(dsn, owned, old_table)[2] == LOG_FORMAT
            assert not events(c, "table_quarantined")
    finally:
        for node in nodes:
            if node.proc.poll() is None:
                node.stop()


# ------------------------------------------------------------------ the rule, in-process

META = TableMeta(name="t", preset="online", rules=Rules(), seed=1, bot_seats=0, order=1)


async def test_the_database_gives_no_node_a_table_newer_than_it_reads(postgres: Any) -> None:
    """A node of a newer format (3) writes a table and dies: a node of this release's
    format neither claims it (by its sweep or for a call) nor is let by the database; the
    table is named as left; a drain's hand-over and the newer node coming back still work."""
    dsn = fresh_database(postgres.dsn)
    newer = PgStore.open(dsn, Node("newer", "newer:1", LEASE, log_format=LOG_FORMAT + 1))
    this = PgStore.open(dsn, Node("this", "this:1", LEASE, log_format=LOG_FORMAT))
    try:
        newer_asks, this_asks = PgClusterQueries(newer), PgClusterQueries(this)
        newer_asks.heartbeat()
        this_asks.heartbeat()
        assert set(this_asks.node_formats()) == {("newer", LOG_FORMAT + 1, True),
                                                 ("this", LOG_FORMAT, True)}
        for table_id in ("t-new", "t-empty"):
            newer.create_table(table_id, 1.0, META)
        newer.append("t-new", json.dumps({"k": "from the future", "seq": 0}))
        await newer.sync()
        assert row(dsn, "SELECT array_agg(log_format ORDER BY table_id) FROM tables") == (
            [1, LOG_FORMAT + 1],)  # (t-empty, t-new): a table with no entry: any node reads it
        with psycopg.connect(dsn, autocommit=True) as db:
            db.execute("UPDATE nodes SET lease_until = now() - interval '1 hour' "
                       "WHERE node_id = 'newer'")
        assert [t.table_id for t in this_asks.claim(table_id="t-new")] == []
        assert [t.table_id for t in this_asks.claim()] == ["t-empty"]
        assert this_asks.unreadable_orphans(None, 10) == [("t-new", "newer", LOG_FORMAT + 1)]
        # The trigger, for any release's claim (an older one asks without the filter).
        with psycopg.connect(dsn, autocommit=True) as db:
            assert db.execute("UPDATE tables SET owner = 'this', epoch = epoch + 1 "
                              "WHERE table_id = 't-new' RETURNING 1").fetchall() == []
            assert db.execute("UPDATE tables SET owner = 'nobody' "
                              "WHERE table_id = 't-new' RETURNING 1").fetchall() == []
            assert db.execute("UPDATE tables SET owner = NULL WHERE table_id = 't-new' "
                              "RETURNING 1").fetchall() == [(1,)]  # a hand-over
        assert this_asks.unreadable_orphans("t-new", 1) == [("t-new", "", LOG_FORMAT + 1)]
        assert this_asks.claim() == []
        newer_asks.heartbeat()  # the newer node is back: it takes its table
        assert [t.table_id for t in newer_asks.claim()] == ["t-new"]
    finally:
        await newer.close()
        await this.close()


async def test_the_migration_under_running_nodes_waits_for_its_locks_a_bounded_time(
        postgres: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first new node's migration asks for the tables' locks; a session holding them (a
    pg_dump) makes the start fail after a bounded wait, changing nothing, instead of queueing
    every node's commits behind it until it ends; once it ended, the start migrates."""
    dsn = fresh_database(postgres.dsn)
    store = PgStore.open(dsn, Node("n", "n:1", LEASE, log_format=LOG_FORMAT))
    await store.close()
    with psycopg.connect(dsn, autocommit=True) as db:  # back to the schema before formats
        db.execute("DROP TRIGGER tables_owner_reads_log ON tables")
        db.execute("DROP FUNCTION copas_owner_reads_log()")
        db.execute("ALTER TABLE tables DROP COLUMN log_format")
        db.execute("ALTER TABLE nodes DROP COLUMN log_format")
        db.execute("UPDATE copas SET value = %s WHERE key = 'schema_version'",
                   (str(PG_SCHEMA_VERSION - 1),))
    monkeypatch.setattr(server.store.postgres, "MIGRATION_LOCK_SECONDS", 0.3)
    with psycopg.connect(dsn) as dump:  # a transaction reading the tables, as pg_dump's
        dump.execute("SELECT count(*) FROM tables")
        with pytest.raises(StoreUnusable, match="in use by another session"):
            PgStore.open(dsn, Node("n", "n:1", LEASE, log_format=LOG_FORMAT))
    assert row(dsn, "SELECT value FROM copas WHERE key = 'schema_version'") == (
        str(PG_SCHEMA_VERSION - 1),)
    store = PgStore.open(dsn, Node("n", "n:1", LEASE, log_format=LOG_FORMAT))
    await store.close()
    assert row(dsn, "SELECT value FROM copas WHERE key = 'schema_version'") == (
        str(PG_SCHEMA_VERSION),)
