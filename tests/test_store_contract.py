"""One contract, every durable store: the same checks against SQLite and PostgreSQL, so the two
explicit commit bodies cannot drift apart. A table's log, in order, with a deleted entry gone
and its shown sequence kept; finished tables and their records (served as GetGameRecord
answers, listed newest first, paged); a record written twice keeps the second; retention by
count and by age; a released table's log going while its record stays; fail-stop: once a
commit fails, nothing more is queued; and the group commit's hand-off: writes queued during a
commit go in the next, each sync waits for its own."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from copas.v1 import copas_pb2

from engine import Game, Rules
from server.cluster.queries import PgClusterQueries
from server.games.hearts.result import GameResult
from server.store import GameRecord, Node, PgStore, SqliteStore, StorageFailed, TableMeta
from server.store.base import RecordSummary, SeatRecord
from server.tables.log_entries import LOG_FORMAT
from tests.helpers.servers import fresh_database

Store = SqliteStore | PgStore


def meta(order: int, name: str = "a table") -> TableMeta:
    return TableMeta(name=name, preset="quick", rules=Rules.preset("quick"), seed=f"s{order}",
                     bot_seats=4, order=order, request_key="rk", fingerprint="fp",
                     bot_policy="auto")


def record(table_id: str, finished: float, name: str = "a table") -> GameRecord:
    """A finished game of four bots, as a table writes it."""
    game = Game(Rules.preset("quick"), table_id)
    while not game.is_over:
        game.apply(game.auto_action(game.to_act()[0]))
    summary = RecordSummary(
        record_id=table_id, table_id=table_id, display_name=name, preset="quick",
        created=finished - 10, finished=finished, seed=table_id, rules=game.rules,
        seats=tuple(SeatRecord(s, f"Bot {s + 1}", True) for s in range(4)),
        result=GameResult.of(game))
    return GameRecord(summary, tuple(game.actions))


@pytest.fixture(params=["sqlite", "postgresql"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    opened: Store
    if request.param == "sqlite":
        opened = SqliteStore.open(tmp_path / "copas.db")
    else:
        postgres: Any = request.getfixturevalue("postgres")
        node = Node("n1", "n1:1", 30.0, log_format=LOG_FORMAT)
        opened = PgStore.open(fresh_database(postgres.dsn), node)
        PgClusterQueries(opened).heartbeat()
    yield opened
    await opened.close()


async def reopen(store: Store, tmp_path: Path) -> Store:
    """The same database after a clean stop (a restart of the same node)."""
    await store.close()
    if isinstance(store, SqliteStore):
        return SqliteStore.open(tmp_path / "copas.db")
    again = PgStore.open(store.dsn, store.node)
    PgClusterQueries(again).heartbeat()
    return again


async def test_a_tables_log_comes_back_in_order_with_its_meta_and_sequence(
        store: Store, tmp_path: Path) -> None:
    store.create_table("t1", 10.0, meta(1, "Ana's table"))
    first = store.append("t1", '{"k":"one"}')
    second = store.append("t1", '{"k":"two"}')
    store.append("t1", '{"k":"three"}')
    store.delete_entry("t1", second)  # a seat given up before the game
    store.note_sequence("t1", 7)
    store.create_table("t2", 20.0, meta(2))
    await store.sync()
    assert first == 1 and second == 2
    store = await reopen(store, tmp_path)
    try:
        loaded = {t.table_id: t for t in store.load_tables()}
        assert set(loaded) == {"t1", "t2"}
        t1 = loaded["t1"]
        assert t1.meta == meta(1, "Ana's table") and t1.created == 10.0
        assert [e for _, e in t1.entries] == ['{"k":"one"}', '{"k":"three"}']
        assert [n for n, _ in t1.entries] == [1, 3]
        assert t1.sequence == 7 and not t1.is_finished and t1.error is None
        assert store.append("t1", '{"k":"four"}') == 4  # positions go on after a restart
    finally:
        await store.close()


async def test_records_are_served_listed_newest_first_paged_and_replaced(
        store: Store) -> None:
    for i, finished in enumerate((100.0, 300.0, 200.0)):
        store.create_table(f"t{i}", finished - 10, meta(i))
        store.finish_table(f"t{i}", record(f"t{i}", finished))
    await store.sync()
    served = copas_pb2.GameRecord.FromString(store.get_record("t1") or b"")
    assert served.record_id == "t1" and served.display_name == "a table"
    assert served.action_count == len(record("t1", 300.0).actions)
    assert GameRecord.from_json(served.record_json) == record("t1", 300.0)
    assert store.get_record("nobody") is None
    assert [r.record_id for r in store.list_records(10, None)] == ["t1", "t2", "t0"]
    assert [r.record_id for r in store.list_records(1, (300.0, "t1"))] == ["t2"]
    assert store.list_records(10, None)[0] == record("t1", 300.0).summary
    # Written again (a replayed finish), the record is the second one, in both databases.
    store.finish_table("t1", record("t1", 300.0, name="renamed"))
    await store.sync()
    again = copas_pb2.GameRecord.FromString(store.get_record("t1") or b"")
    assert again.display_name == "renamed"
    assert store.list_records(1, None)[0].display_name == "renamed"
    finished = {t.table_id: t for t in store.load_tables()}
    assert all(t.is_finished and t.finished is not None for t in finished.values())


async def test_retention_keeps_the_newest_and_the_young_and_a_release_keeps_the_record(
        store: Store) -> None:
    for i, finished in enumerate((100.0, 200.0, 300.0, 400.0)):
        store.create_table(f"t{i}", finished - 10, meta(i))
        store.finish_table(f"t{i}", record(f"t{i}", finished))
    store.create_table("open", 50.0, meta(9))
    store.append("open", "{}")
    await store.sync()
    assert store.prune_records(keep=0, max_age=150.0, now=360.0) == 2  # older than 210
    assert [r.record_id for r in store.list_records(10, None)] == ["t3", "t2"]
    assert store.prune_records(keep=1, max_age=0.0, now=360.0) == 1
    assert [r.record_id for r in store.list_records(10, None)] == ["t3"]
    store.release_table("t3")
    store.release_table("open")
    await store.sync()
    assert {t.table_id for t in store.load_tables()} == {"t0", "t1", "t2"}
    assert store.get_record("t3") is not None  # the record outlives its table


async def test_after_a_failed_commit_nothing_more_is_queued(store: Store) -> None:
    def refuse(batch: object) -> None:
        raise OSError("disk full")

    store.create_table("t1", 1.0, meta(1))
    store._commit = refuse  # type: ignore[method-assign]
    with pytest.raises(StorageFailed):
        await store.sync()
    assert store.failure is not None
    with pytest.raises(StorageFailed):
        store.append("t1", "{}")
    with pytest.raises(StorageFailed):
        store.create_table("t2", 2.0, meta(2))
    assert (await store.failed()) is store.failure


async def test_writes_queued_during_a_commit_go_in_the_next_and_each_sync_waits_for_its_own(
        store: Store, tmp_path: Path) -> None:
    """Group commit's hand-off: while the writer thread commits one batch, what the tables
    queue waits for the next; a sync returns only once its own writes are durable, and a
    sync asked while nothing new is queued waits for the batch in flight."""
    gates, entered = [threading.Event(), threading.Event()], threading.Event()
    real = store._commit
    batches: list[int] = []

    def held(batch: Any) -> None:
        batches.append(len(batch.writes))
        entered.set()
        assert gates[len(batches) - 1].wait(30), "the test never opened the gate"
        real(batch)

    store._commit = held  # type: ignore[method-assign]
    store.create_table("t1", 1.0, meta(1))
    store.append("t1", '{"k":"one"}')
    first = asyncio.ensure_future(store.sync())
    assert await asyncio.to_thread(entered.wait, 30)
    in_flight = asyncio.ensure_future(store.sync())  # nothing new queued: the first's
    await asyncio.sleep(0)
    store.append("t1", '{"k":"two"}')
    store.append("t1", '{"k":"three"}')
    second = asyncio.ensure_future(store.sync())
    await asyncio.sleep(0)
    assert not first.done() and not in_flight.done() and not second.done()
    commits = store.commits
    gates[0].set()
    await asyncio.wait_for(asyncio.gather(first, in_flight), 30)
    assert not second.done()  # its writes are in the batch the thread holds at its gate
    gates[1].set()
    await asyncio.wait_for(second, 30)
    assert batches == [2, 2] and store.commits == commits + 2
    store = await reopen(store, tmp_path)
    try:
        entries = {t.table_id: t.entries for t in store.load_tables()}["t1"]
        assert [e for _, e in entries] == ['{"k":"one"}', '{"k":"two"}', '{"k":"three"}']
    finally:
        await store.close()


async def test_a_commit_that_fails_after_one_that_held_fails_only_its_own_waiters(
        store: Store) -> None:
    gate = threading.Event()
    real = store._commit
    calls: list[int] = []

    def second_refused(batch: Any) -> None:
        calls.append(1)
        if len(calls) == 1:
            assert gate.wait(30), "the test never opened the gate"
            real(batch)
            return
        raise OSError("disk full")

    store._commit = second_refused  # type: ignore[method-assign]
    store.create_table("t1", 1.0, meta(1))
    first = asyncio.ensure_future(store.sync())
    await asyncio.sleep(0)
    store.append("t1", "{}")
    second = asyncio.ensure_future(store.sync())
    gate.set()
    await asyncio.wait_for(first, 30)  # durable: its waiter is answered
    with pytest.raises(StorageFailed):
        await asyncio.wait_for(second, 30)
    assert store.failure is not None and len(calls) == 2
    with pytest.raises(StorageFailed):
        await store.sync()


async def test_the_writer_thread_lives_as_long_as_the_store(tmp_path: Path) -> None:
    """One writer thread per store, started by its first commit, gone once it is closed."""
    store = SqliteStore.open(tmp_path / "copas.db")
    before = {t for t in threading.enumerate() if t.name == "copas-db"}
    for i in range(20):  # twenty commits, one thread
        store.create_table(f"t{i}", 1.0, meta(i))
        await store.sync()
    writers = {t for t in threading.enumerate() if t.name == "copas-db"} - before
    assert len(writers) == 1 and store.commits == 20
    await store.close()
    (writer,) = writers
    assert not writer.is_alive()
