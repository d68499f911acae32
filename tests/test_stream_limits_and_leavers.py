"""The smaller findings of the attacker's pass of issue 27, each as what the server did: a
leaver's views hold nothing private from the leave on (GetView, WatchTable, Play); a Play
stream without its opening ends at its deadline, and streams waiting for theirs have a cap
for all addresses; presence events are at most one per seat per interval, the last state
always shown; an address has at most --max-tables-per-address unfinished tables, given back
when one finishes or goes."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest
from copas.v1 import copas_pb2

from server import tokens
from server.errors import ServiceError
from server.tables.clock import ManualScheduler
from tests.helpers.calls import PlayStream, Watch, auth, join_all, new_table, quota_details
from tests.helpers.servers import registry_for_tests, serving

PRIVATE = ("hand", "pass_choice", "received", "legal_cards", "moon_choices")


def private_fields(view: copas_pb2.TableView) -> list[str]:
    return [name for name in PRIVATE if len(getattr(view, name))]


async def test_a_leaver_sees_what_a_spectator_sees() -> None:
    """Finding 7a: from the leave on, the leaver's token reads no hand, no legal cards and
    no pass choice (the seat the server now plays), by GetView, WatchTable and Play."""
    async with serving(allow_seed=True) as (_, stub):
        table = await new_table(stub, seed="42", bots=2)
        joins = await join_all(stub, table.table_id, 2)
        token = joins[0].player_token
        stream = PlayStream(stub, table.table_id, token)
        opened = await stream.wait_for(lambda m: True)
        assert private_fields(opened.event.view)  # seated: the hand is theirs to see
        left = await stream.act(leave_table=copas_pb2.LeaveTableRequest())
        assert not left.HasField("error")
        after = [e for e in stream.events if e.sequence >= left.sequence]
        assert after and all(not private_fields(e.view) for e in after)
        assert all(e.view.seat == 0 for e in after)  # still told which seat was theirs
        await stream.close()
        view = (await stub.GetView(copas_pb2.GetViewRequest(table_id=table.table_id),
                                   metadata=auth(token))).view
        assert view.phase != copas_pb2.PHASE_GAME_OVER and not private_fields(view)
        watch = Watch(stub, table.table_id, token)
        assert not private_fields((await watch.opened()).view)
        watch.call.cancel()
        again = PlayStream(stub, table.table_id, token)
        assert not private_fields((await again.wait_for(lambda m: True)).event.view)
        await again.close()
        # The player who stayed still sees their own hand.
        stayed = (await stub.GetView(copas_pb2.GetViewRequest(table_id=table.table_id),
                                     metadata=auth(joins[1].player_token))).view
        assert "hand" in private_fields(stayed)


async def test_a_play_stream_without_its_opening_ends_at_the_deadline() -> None:
    """Finding 7b: a Play stream that sends nothing ends INVALID_ARGUMENT
    INVALID_PLAY_STREAM at --stream-open-timeout, and no longer counts as waiting."""
    async with serving(stream_open_timeout=0.5) as (running, stub):
        call = stub.Play(metadata=auth("x" * 32))
        with pytest.raises(grpc.aio.AioRpcError) as ended:
            await asyncio.wait_for(call.read(), 30)
        assert ended.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert quota_details(ended.value)[0] == "INVALID_PLAY_STREAM"
        assert running.metrics.registry.get_sample_value("copas_streams_opening") == 0


async def test_streams_waiting_for_their_opening_have_a_cap_for_all_addresses() -> None:
    """Finding 7b: beyond --max-streams-opening streams waiting for their opening, another
    is refused RESOURCE_EXHAUSTED TOO_MANY_STREAMS; one that opens gives its place back."""
    async with serving(allow_seed=True, max_streams_opening=2,
                       stream_open_timeout=60.0) as (running, stub):
        sample = running.metrics.registry.get_sample_value
        waiting = [stub.Play(metadata=auth("x" * 32)) for _ in range(2)]
        for _ in range(200):
            if sample("copas_streams_opening") == 2:
                break
            await asyncio.sleep(0.05)
        assert sample("copas_streams_opening") == 2
        third = stub.Play()
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await asyncio.wait_for(third.read(), 30)
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert quota_details(refused.value)[0] == "TOO_MANY_STREAMS"
        for call in waiting:
            call.cancel()
        for _ in range(200):
            if sample("copas_streams_opening") == 0:
                break
            await asyncio.sleep(0.05)
        assert sample("copas_streams_opening") == 0
        table = await new_table(stub)  # room again: a stream that opens is served
        join = (await join_all(stub, table.table_id, 1))[0]
        stream = PlayStream(stub, table.table_id, join.player_token)
        assert (await stream.wait_for(lambda m: True)).event.HasField("snapshot")
        await stream.close()


async def test_an_address_has_at_most_its_unfinished_tables() -> None:
    """Finding 7d: --max-tables-per-address unfinished tables per address, the next
    refused RESOURCE_EXHAUSTED TOO_MANY_TABLES; a table whose game ends gives its place
    back."""
    async with serving(allow_seed=True, max_tables_per_address=2) as (_, stub):
        first = await new_table(stub, bots=3)
        await new_table(stub, bots=3)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await new_table(stub)
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert quota_details(refused.value)[:2] == ("TOO_MANY_TABLES", "address 127.0.0.1")
        with pytest.raises(grpc.aio.AioRpcError):  # a quick match makes a table too
            await stub.JoinTable(copas_pb2.JoinTableRequest(preset="online",
                                                            display_name="Q"))
        # The one person at the first table leaves: the game ends (abandoned), given back.
        join = (await join_all(stub, first.table_id, 1))[0]
        await stub.LeaveTable(copas_pb2.LeaveTableRequest(table_id=first.table_id),
                              metadata=auth(join.player_token))
        summary = (await stub.GetTable(copas_pb2.GetTableRequest(
            table_id=first.table_id))).table
        assert summary.phase == copas_pb2.PHASE_GAME_OVER
        await new_table(stub)


def test_a_table_that_goes_gives_its_creators_place_back() -> None:
    """Finding 7d: a waiting table that expires (or an operator closes) no longer counts."""
    clock = ManualScheduler()
    registry = registry_for_tests(clock, max_tables_per_address=1, waiting_table_ttl=10.0)

    def create(creator: str) -> Any:
        return registry.create(preset="online", overrides={}, bot_seats=0, name="",
                               seed=None, creator=creator)

    create("10.0.0.1")
    create("10.0.0.2")  # another address has its own
    with pytest.raises(ServiceError) as refused:
        create("10.0.0.1")
    assert refused.value.reason == "TOO_MANY_TABLES"
    clock.advance(11.0)  # nobody came: both expire
    assert registry.tables_of("10.0.0.1") == 0 and registry.tables_of("10.0.0.2") == 0
    closed = create("10.0.0.1")
    registry.close_table(closed.id)
    assert registry.tables_of("10.0.0.1") == 0
    create("10.0.0.1")
    registry.close_all()


def presence(watcher: Any) -> list[bool]:
    """The presence events a watcher was sent, in order: connected or not."""
    out = []
    for _, message, _ in watcher.queue:
        event = copas_pb2.WatchTableResponse.FromString(message).event
        if event.WhichOneof("kind") == "player_connection":
            out.append(event.player_connection.is_connected)
    return out


async def shown(registry: Any) -> None:
    """What was done so far is committed and delivered to the watchers (by the delivery's
    task, after the commit)."""
    await registry.delivery.committed()
    await asyncio.sleep(0.05)


async def test_presence_events_are_at_most_one_per_seat_per_interval() -> None:
    """Finding 7c: a player who opens and closes streams 20 times in a moment costs the
    table one presence event per --presence-interval, and the last state is shown at the
    interval's end (none when it is back to the state shown)."""
    clock = ManualScheduler()
    registry = registry_for_tests(clock, presence_interval=1.0)
    table = registry.create(preset="online", overrides={}, bot_seats=0, name="", seed=None)
    seat, token = table.join("Ann", None)
    token_hash = tokens.hash_token(token)
    spectator = table.add_watcher(None, None)
    table.snapshot(spectator, 0)
    for _ in range(20):
        table.remove_watcher(table.add_watcher(seat, token_hash))
    await shown(registry)
    assert presence(spectator) == [True]  # the first at once, the rest wait
    clock.advance(1.0)
    await shown(registry)
    assert presence(spectator) == [True, False]  # the last state, at the interval's end
    for _ in range(20):  # ends as shown (gone): nothing more to tell
        table.remove_watcher(table.add_watcher(seat, token_hash))
    clock.advance(1.0)
    await shown(registry)
    assert presence(spectator) == [True, False]
    clock.advance(5.0)
    stays = table.add_watcher(seat, token_hash)  # a quiet seat's change is shown at once
    await shown(registry)
    assert presence(spectator) == [True, False, True]
    table.remove_watcher(stays)
    registry.close_all()

