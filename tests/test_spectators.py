"""Spectators cost the players little, and a snapshot cannot be amplified (issue 27, findings 5
and 6): spectators' updates are coalesced per table, an address holds a few spectator streams,
a spectator's snapshot lists a bounded number of missed events, is charged for them, and is
built once per table step for many opens. Each test asserts what the server did (messages,
refusals, a counter it exports), never a latency."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest
from copas.v1 import copas_pb2

from tests.helpers.calls import (
    Watch,
    auth,
    finished_bot_table,
    is_over,
    join_all,
    new_table,
    quota_details,
)
from tests.helpers.servers import serving

PRESENCE = ("snapshot", "player_connection")  # not numbered: they repeat the latest sequence


def numbered(messages: list[copas_pb2.TableEvent]) -> list[int]:
    """The numbered events a stream showed, in order: its own and its snapshots' missed."""
    shown: list[int] = []
    for m in messages:
        if m.WhichOneof("kind") == "snapshot":
            shown += [e.sequence for e in m.snapshot.missed_events]
        elif m.WhichOneof("kind") not in PRESENCE:
            shown.append(m.sequence)
    return shown


def spectator(stub: Any, table_id: str, address: str, after_sequence: int = 0) -> Any:
    """A spectator's WatchTable call from ``address`` (through the trusted proxy)."""
    return stub.WatchTable(copas_pb2.WatchTableRequest(table_id=table_id,
                                                       after_sequence=after_sequence),
                           metadata=(("x-forwarded-for", address),))


@pytest.mark.parametrize("batched", [False, True], ids=["per-event", "batched"])
async def test_spectators_updates_are_coalesced_while_a_player_gets_every_event(
        batched: bool) -> None:
    """Finding 5: on a table that plays fast (bots, and a person whose turns time out), a
    spectator gets fewer messages than there are events (the ones that came within a tick as
    one snapshot), yet every numbered event is shown to it, in order, ending at the game's
    end; the seated player's stream carries every event as its own message (batched, in one
    EventBatch per commit: issue 29)."""
    async with serving(allow_seed=True, spectator_tick=0.2) as (_, stub):
        table = await new_table(stub, seed="8", bots=3, max_hands=1,
                                play_timeout_seconds=0.01, pass_timeout_seconds=0.01,
                                moon_timeout_seconds=0.01)
        token = (await join_all(stub, table.table_id, 1))[0].player_token
        player = Watch(stub, table.table_id, token, is_batched=batched)
        watcher = Watch(stub, table.table_id, is_batched=batched)
        await player.opened()
        await watcher.opened()
        over = await player.wait_for(lambda m: m.WhichOneof("kind") == "game_over",
                                     timeout=30)
        await watcher.wait_for(lambda m: m.sequence >= over.sequence and is_over(m),
                               timeout=30)
        await player.close()
        await watcher.close()
    first = player.messages[0].sequence
    events = list(range(first + 1, over.sequence + 1))
    assert len(events) > 40  # a hand's worth
    assert numbered(player.messages[1:]) == events
    assert not any(m.WhichOneof("kind") == "snapshot" for m in player.messages[1:])
    start = watcher.messages[0].sequence
    assert numbered(watcher.messages[1:]) == list(range(start + 1, over.sequence + 1))
    assert len(watcher.messages) < len(events) / 2, len(watcher.messages)
    if batched:  # a message is a batch: its view once, on its last event
        assert len(watcher.batches) <= len(watcher.messages)
        for batch in (*player.batches, *watcher.batches):
            assert [e.HasField("view") for e in batch.events][-1]
            assert not any(e.HasField("view") for e in batch.events[:-1])
    coalesced = [m for m in watcher.messages[1:] if m.WhichOneof("kind") == "snapshot"]
    assert coalesced and all(m.is_last_in_action and not m.snapshot.has_gap for m in coalesced)
    assert is_over(watcher.messages[-1]) and watcher.messages[-1].sequence == over.sequence
    assert not any(len(m.view.hand) for m in watcher.messages)  # a spectator's view


async def test_an_address_holds_a_few_spectator_streams() -> None:
    """Finding 5: spectator streams are charged to the watching address: beyond
    --max-spectator-streams-per-peer the next is refused at once (RESOURCE_EXHAUSTED, a
    QuotaFailure naming the address), while another address, and the same address's player
    stream, are served; a stream closed gives its slot back."""
    async with serving(allow_seed=True, trusted_proxies="127.0.0.1",
                       max_spectator_streams_per_peer=3) as (_, stub):
        table = await new_table(stub, seed="3", bots=3)
        token = (await join_all(stub, table.table_id, 1))[0].player_token
        calls = [spectator(stub, table.table_id, "198.51.100.9") for _ in range(3)]
        for call in calls:
            assert (await call.read()).event.WhichOneof("kind") == "snapshot"
        refused = spectator(stub, table.table_id, "198.51.100.9")
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await refused.read()
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        reason, subject, _ = quota_details(err.value)
        assert (reason, subject) == ("TOO_MANY_STREAMS", "peer 198.51.100.9")
        assert "spectator" in (err.value.details() or "")
        other = spectator(stub, table.table_id, "198.51.100.10")
        assert (await other.read()).event.WhichOneof("kind") == "snapshot"
        mine = stub.WatchTable(copas_pb2.WatchTableRequest(table_id=table.table_id),
                               metadata=(("x-forwarded-for", "198.51.100.9"), *auth(token)))
        assert len((await mine.read()).event.view.hand) > 0
        calls[0].cancel()
        for _ in range(100):  # the server sees the cancellation soon
            again = spectator(stub, table.table_id, "198.51.100.9")
            try:
                await again.read()
                break
            except grpc.aio.AioRpcError as error:
                assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                await asyncio.sleep(0.02)
        else:
            raise AssertionError("the closed stream's slot did not come back")
        for call in (*calls, other, mine, again):
            call.cancel()


async def test_a_spectators_snapshot_lists_a_bounded_number_of_missed_events() -> None:
    """Finding 6: a spectator asking for the events after sequence 1 of a long game gets the
    latest --snapshot-max-events of them, consecutive and ending at the snapshot's sequence,
    and ``has_gap``; a seated player still gets every kept one."""
    async with serving(allow_seed=True, snapshot_max_events=3) as (_, stub):
        done = await finished_bot_table(stub, seed="5")
        late = Watch(stub, done.table_id, after_sequence=1)
        head = await late.opened()
        await late.close()
        assert head.sequence > 100
        missed = [e.sequence for e in head.snapshot.missed_events]
        assert head.snapshot.has_gap and missed == list(range(head.sequence - 2,
                                                              head.sequence + 1))
        assert head.view.phase == copas_pb2.PHASE_GAME_OVER
        table = await new_table(stub, seed="5", bots=3)
        token = (await join_all(stub, table.table_id, 1))[0].player_token
        first = Watch(stub, table.table_id, token)
        await first.wait_for(lambda m: m.view.phase == copas_pb2.PHASE_PASSING)
        await first.close()
        again = Watch(stub, table.table_id, token, after_sequence=1)
        mine = await again.opened()
        await again.close()
        assert mine.sequence - 1 > 3
        assert not mine.snapshot.has_gap
        assert [e.sequence for e in mine.snapshot.missed_events] == \
            list(range(2, mine.sequence + 1))


async def test_a_snapshot_with_missed_events_costs_more_of_the_quota() -> None:
    """Finding 6: a spectator's snapshot listing missed events costs a call more per 32 of
    them from its address's allowance: with 12 calls at once, two opens listing 128 events
    each (5 calls apiece) pass and the third is refused (RATE_LIMITED, saying why), while an
    open without history (1 call) still passes."""
    async with serving(allow_seed=True, trusted_proxies="127.0.0.1", snapshot_max_events=128,
                       peer_calls_per_second=0.01, peer_calls_burst=12) as (_, stub):
        done = await finished_bot_table(stub, seed="5")  # from loopback: its own allowance
        address = "198.51.100.20"
        opened = [spectator(stub, done.table_id, address, after_sequence=1) for _ in range(2)]
        for call in opened:
            head = (await call.read()).event
            assert len(head.snapshot.missed_events) == 128 and head.snapshot.has_gap
        refused = spectator(stub, done.table_id, address, after_sequence=1)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await refused.read()
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        reason, subject, retry = quota_details(err.value)
        assert (reason, subject) == ("RATE_LIMITED", f"peer {address}") and retry > 0
        assert "snapshot" in (err.value.details() or "")
        fresh = spectator(stub, done.table_id, address)
        assert not (await fresh.read()).event.snapshot.missed_events
        for call in (*opened, fresh):
            call.cancel()


async def test_a_snapshots_missed_events_are_built_once_for_many_opens() -> None:
    """Finding 6: the serialized list of missed events is cached until the table's next
    event: twenty spectators opening after sequence 1 (or 2: the same capped list) of a
    finished game make the server build it once (copas_snapshot_lists_built_total), and
    each gets the same list."""
    async with serving(allow_seed=True, snapshot_max_events=64) as (running, stub):
        done = await finished_bot_table(stub, seed="5")
        built = running.metrics.registry.get_sample_value
        before = built("copas_snapshot_lists_built_total") or 0.0
        lists = set()
        for i in range(20):
            late = Watch(stub, done.table_id, after_sequence=1 + i % 2)
            head = await late.opened()
            await late.close()
            assert head.snapshot.has_gap and len(head.snapshot.missed_events) == 64
            lists.add(head.snapshot.SerializeToString())
        assert len(lists) == 1
        assert built("copas_snapshot_lists_built_total") - before == 1
