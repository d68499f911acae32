"""Committed, then shown: ``Delivery`` is the one barrier (``committed``) and the one that shows
what a commit holds. A store whose commit waits for the test lets each test look between
"staged" and "committed"; an ownership port the test fills says which tables another node took.
No sleeps: every wait is on an event."""

from __future__ import annotations

import asyncio

import pytest
from copas.v1 import copas_pb2

from server.errors import ServiceError
from server.observability import Metrics
from server.store import MemoryStore
from server.store.base import StorageFailed
from server.tables.clock import ManualScheduler
from server.tables.lobby import ANY_TABLE
from server.tables.ownership import LocalOwnership
from server.tables.registry import TableRegistry
from server.tables.table import Table
from tests.helpers.servers import config_for_tests

WAIT = 5.0  # a safety net only: every wait below ends on an event


class HeldStore(MemoryStore):
    """The memory store, whose commits wait until the test lets them through (``gate``)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()  # clear: commits wait
        self.entered = asyncio.Event()  # a commit is waiting at the gate
        self.refused = asyncio.Event()  # a commit failed (the store had failed)

    async def sync(self) -> None:
        self.entered.set()
        await self.gate.wait()
        try:
            await super().sync()
        except StorageFailed:
            self.refused.set()
            raise


class TakenTables(LocalOwnership):
    """One process, except that the test says which tables another node took."""

    def __init__(self) -> None:
        self.lost: set[str] = set()

    def take_lost(self) -> set[str]:
        lost, self.lost = self.lost, set()
        return lost


def node(store: HeldStore, ownership: LocalOwnership | None = None) -> TableRegistry:
    config = config_for_tests(database="")
    return TableRegistry(config.registry_settings(), config.table_settings(), Metrics(),
                         store, ManualScheduler(), ownership or LocalOwnership())


def new_table(registry: TableRegistry) -> Table:
    return registry.create(preset="online", overrides={}, bot_seats=0, name="", seed=None)


async def test_a_tables_events_reach_its_watcher_only_after_their_commit() -> None:
    store = HeldStore()
    registry = node(store)
    table = new_table(registry)
    watcher = table.add_watcher(None, None)  # a spectator
    table.join("Ann", None)
    await asyncio.wait_for(store.entered.wait(), WAIT)  # the delivery waits for the commit
    assert not watcher.queue  # staged, not committed: not shown
    assert table.fanout.outbox

    store.gate.set()
    await asyncio.wait_for(watcher.wakeup.wait(), WAIT)
    assert [sequence for sequence, _, _ in watcher.queue] == [table.sequence]
    assert not table.fanout.outbox
    registry.close_all()


async def test_the_barrier_evicts_a_lost_table_and_refuses_an_answer_for_it() -> None:
    store, taken = HeldStore(), TakenTables()
    store.gate.set()
    registry = node(store, taken)
    kept, lost = new_table(registry), new_table(registry)
    watcher = lost.add_watcher(None, None)
    lost.join("Ann", None)  # staged: it must never be shown (its commit was refused)
    taken.lost = {lost.id}

    with pytest.raises(ServiceError) as refused:
        await registry.delivery.committed(lost)
    assert refused.value.reason == "TABLE_MOVED"
    assert not registry.holds(lost.id) and registry.holds(kept.id)
    assert lost.is_lost
    assert watcher.is_closed and watcher.close_error is not None
    assert watcher.close_error.reason == "TABLE_MOVED"
    assert not watcher.queue

    taken.lost = {kept.id}  # evicted by a barrier that names no table, without a refusal
    await registry.delivery.committed()
    assert not registry.holds(kept.id)
    with pytest.raises(ServiceError) as again:
        await registry.delivery.committed(kept)
    assert again.value.reason == "TABLE_MOVED"
    registry.close_all()


async def test_the_lobbys_changes_are_shown_by_the_delivery_after_their_commit() -> None:
    store = HeldStore()
    store.gate.set()
    registry = node(store)
    lobby = registry.lobby
    stream = lobby.watch(ANY_TABLE)
    first = await asyncio.wait_for(anext(stream), WAIT)
    assert not isinstance(first, bytes) and first.HasField("snapshot")
    (watcher,) = lobby.watchers

    store.gate.clear()
    store.entered.clear()
    table = new_table(registry)
    assert lobby.has_staged  # the lobby staged the change; it does not show it itself
    await asyncio.wait_for(store.entered.wait(), WAIT)  # the delivery took it, and waits
    assert not lobby.has_staged
    assert not watcher.queue

    store.gate.set()
    added = await asyncio.wait_for(anext(stream), WAIT)
    assert isinstance(added, bytes)
    assert copas_pb2.WatchLobbyResponse.FromString(added).table_added.table_id == table.id
    await stream.aclose()
    registry.close_all()


async def test_a_failed_commit_shows_nothing() -> None:
    store = HeldStore()
    registry = node(store)
    table = new_table(registry)
    watcher = table.add_watcher(None, None)
    stream = registry.lobby.watch(ANY_TABLE)
    store.gate.set()
    await asyncio.wait_for(anext(stream), WAIT)  # the lobby's snapshot
    (lobby_watcher,) = registry.lobby.watchers
    await registry.delivery.committed()

    store.gate.clear()
    store.entered.clear()
    watcher.wakeup.clear()
    table.join("Ann", None)
    new_table(registry)  # a lobby change too
    await asyncio.wait_for(store.entered.wait(), WAIT)
    store.fail(OSError("the disk said no"))
    store.gate.set()
    await asyncio.wait_for(store.refused.wait(), WAIT)  # the delivery's commit failed

    assert not watcher.queue and not watcher.wakeup.is_set()
    assert not lobby_watcher.queue
    with pytest.raises(StorageFailed):
        await registry.delivery.committed(table)
    await stream.aclose()
    registry.close_all()
