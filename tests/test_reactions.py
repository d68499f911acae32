"""Reactions (issue 30): a seated person shows one of a few fixed reactions, and every stream
of the table (WatchTable and Play, batched or not, players and spectators) shows it once, by
the right seat, over gRPC on loopback. Reactions are not history: the table's sequence does
not move and no snapshot lists them. The server limits each seat (3 at once, then one per
2 s by default): beyond that RESOURCE_EXHAUSTED with a RetryInfo, and nothing is shown; a bad
reaction, a spectator, another table's token or a leaver (whose seat the server now plays) is
refused, and nothing shown."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from copas.v1 import copas_pb2, copas_pb2_grpc

from tests.helpers.calls import PlayStream, Watch, auth, join_all, new_table, quota_details
from tests.helpers.servers import serving

Streams = list[Watch | PlayStream]


def react(stub: copas_pb2_grpc.CopasServiceStub, table_id: str, token: str | None,
          reaction: int = copas_pb2.REACTION_NICE) -> Any:
    return stub.React(copas_pb2.ReactRequest(table_id=table_id, reaction=reaction),
                      metadata=auth(token) if token else None)


async def refusal(call: Any) -> tuple[grpc.StatusCode, str, float]:
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await call
    reason, _, retry = quota_details(refused.value)
    return refused.value.code(), reason, retry


def events_of(stream: Watch | PlayStream) -> list[copas_pb2.TableEvent]:
    return list(stream.messages) if isinstance(stream, Watch) else stream.events


def shown(stream: Watch | PlayStream) -> list[tuple[int, int]]:
    """The reactions ``stream`` showed: (seat, reaction), in order."""
    return [(e.reaction_shown.seat, e.reaction_shown.reaction) for e in events_of(stream)
            if e.WhichOneof("kind") == "reaction_shown"]


async def until_shown(stream: Watch | PlayStream, seat: int, reaction: int) -> None:
    def found(event: copas_pb2.TableEvent) -> bool:
        return event.WhichOneof("kind") == "reaction_shown" \
            and (event.reaction_shown.seat, event.reaction_shown.reaction) == (seat, reaction)
    if isinstance(stream, Watch):
        await stream.wait_for(found)
    else:
        await stream.wait_event(found)


async def table_of_four(stub: copas_pb2_grpc.CopasServiceStub
                        ) -> tuple[str, dict[int, str], Streams]:
    """A table of four people in its game, and open on it: WatchTable of seats 0 (one by
    one) and 1 (batched), Play of seats 2 (one by one) and 3 (batched), and two spectators'
    WatchTable (one by one, batched)."""
    table = await new_table(stub, seed="30")
    joins = await join_all(stub, table.table_id, 4)
    tokens = {j.seat: j.player_token for j in joins}
    streams: Streams = [
        Watch(stub, table.table_id, tokens[0]),
        Watch(stub, table.table_id, tokens[1], is_batched=True),
        PlayStream(stub, table.table_id, tokens[2]),
        PlayStream(stub, table.table_id, tokens[3], is_batched=True),
        Watch(stub, table.table_id), Watch(stub, table.table_id, is_batched=True)]
    for stream in streams:
        if isinstance(stream, Watch):
            await stream.opened()
        else:
            await stream.wait_for(lambda m: True)
    return table.table_id, tokens, streams


async def sequence_of(stub: copas_pb2_grpc.CopasServiceStub, table_id: str) -> int:
    return (await stub.GetView(copas_pb2.GetViewRequest(table_id=table_id))).sequence


async def close(streams: Streams) -> None:
    for stream in streams:
        await stream.close()


async def test_every_stream_shows_a_reaction_once_by_its_seat(stub: Any) -> None:
    table_id, tokens, streams = await table_of_four(stub)
    before = await sequence_of(stub, table_id)
    assert await react(stub, table_id, tokens[1], copas_pb2.REACTION_GOOD_GAME) \
        == copas_pb2.ReactResponse()
    await react(stub, table_id, tokens[3], copas_pb2.REACTION_WOW)
    for stream in streams:  # the second one shown means the first one came before it
        await until_shown(stream, 3, copas_pb2.REACTION_WOW)
        assert shown(stream) == [(1, copas_pb2.REACTION_GOOD_GAME), (3, copas_pb2.REACTION_WOW)]
        event = next(e for e in events_of(stream) if e.WhichOneof("kind") == "reaction_shown")
        assert event.sequence == before  # not numbered: it repeats the latest sequence
    assert await sequence_of(stub, table_id) == before
    # Not history: a stream opened later (from the start) lists no reaction.
    late = Watch(stub, table_id, tokens[0], after_sequence=1)
    snapshot = (await late.opened()).snapshot
    assert snapshot.missed_events and not any(
        e.WhichOneof("kind") == "reaction_shown" for e in snapshot.missed_events)
    await close([*streams, late])


async def test_over_its_limit_a_seat_is_refused_with_retry_info_and_nothing_shows(
        stub: Any) -> None:
    table_id, tokens, streams = await table_of_four(stub)
    for reaction in (copas_pb2.REACTION_NICE, copas_pb2.REACTION_OOPS, copas_pb2.REACTION_THANKS):
        await react(stub, table_id, tokens[0], reaction)
    code, reason, retry = await refusal(react(stub, table_id, tokens[0], copas_pb2.REACTION_WOW))
    assert (code, reason) == (grpc.StatusCode.RESOURCE_EXHAUSTED, "TOO_MANY_REACTIONS")
    assert retry > 0
    await react(stub, table_id, tokens[1], copas_pb2.REACTION_NICE)  # another seat's own limit
    for stream in streams:
        await until_shown(stream, 1, copas_pb2.REACTION_NICE)
        assert shown(stream) == [(0, copas_pb2.REACTION_NICE), (0, copas_pb2.REACTION_OOPS),
                                 (0, copas_pb2.REACTION_THANKS), (1, copas_pb2.REACTION_NICE)]
    await close(streams)


async def test_bad_reactions_spectators_strangers_and_leavers_are_refused(stub: Any) -> None:
    table_id, tokens, streams = await table_of_four(stub)
    other = await new_table(stub, seed="31")
    stranger = (await join_all(stub, other.table_id, 1))[0].player_token
    refused = [
        await refusal(react(stub, table_id, tokens[0], copas_pb2.REACTION_UNSPECIFIED)),
        await refusal(react(stub, table_id, tokens[0], 99)),
        await refusal(react(stub, table_id, None)),  # a spectator has no token
        await refusal(react(stub, table_id, stranger)),
    ]
    assert [(code, reason) for code, reason, _ in refused] == [
        (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REACTION"),
        (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REACTION"),
        (grpc.StatusCode.UNAUTHENTICATED, "BAD_TOKEN"),
        (grpc.StatusCode.PERMISSION_DENIED, "WRONG_TABLE")]
    # A leaver's seat is played by the server: its person cannot react for it any more.
    await stub.LeaveTable(copas_pb2.LeaveTableRequest(table_id=table_id),
                          metadata=auth(tokens[2]))
    code, reason, _ = await refusal(react(stub, table_id, tokens[2]))
    assert (code, reason) == (grpc.StatusCode.PERMISSION_DENIED, "SEAT_HAS_LEFT")
    # The refused ones took nothing from the bucket: seat 0 still has its three.
    three = [copas_pb2.REACTION_NICE, copas_pb2.REACTION_OOPS, copas_pb2.REACTION_THANKS]
    for reaction in three:
        await react(stub, table_id, tokens[0], reaction)
    for stream in streams:
        await until_shown(stream, 0, copas_pb2.REACTION_THANKS)
        assert shown(stream) == [(0, reaction) for reaction in three]
    await close(streams)


@pytest.mark.parametrize("batched", [False, True], ids=["per-event", "batched"])
async def test_coalesced_spectators_see_each_reaction_once(batched: bool) -> None:
    """Spectators' updates coalesced over a tick (a table playing fast: bots, and a person
    whose turns time out) still show each reaction once, after the snapshot of the steps
    around it: a reaction is not history, so no snapshot could list it."""
    async with serving(allow_seed=True, spectator_tick=0.3) as (_, stub):
        table = await new_table(stub, seed="8", bots=3, max_hands=1,
                                play_timeout_seconds=0.01, pass_timeout_seconds=0.01,
                                moon_timeout_seconds=0.01)
        joined = (await join_all(stub, table.table_id, 1))[0]
        token, seat = joined.player_token, joined.seat
        player = Watch(stub, table.table_id, token, is_batched=batched)
        watcher = Watch(stub, table.table_id, is_batched=batched)
        await player.opened()
        await watcher.opened()
        sent = [copas_pb2.REACTION_NICE, copas_pb2.REACTION_OOPS, copas_pb2.REACTION_WOW]
        for count, reaction in enumerate(sent, 1):
            await player.wait_for(lambda m: m.WhichOneof("kind") == "card_played",
                                  start=len(player.messages))  # while the game goes on
            await react(stub, table.table_id, token, reaction)
            assert len(shown(player)) <= count
        for stream in (player, watcher):
            await until_shown(stream, seat, copas_pb2.REACTION_WOW)
            assert shown(stream) == [(seat, reaction) for reaction in sent]
        await player.close()
        await watcher.close()
