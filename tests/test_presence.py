"""Presence (issue 39), over gRPC on loopback against a server in this process. What a table
shows of a seat's connection (a view's `is_connected`, a `player_connection` event) ends up as
the truth once --presence-interval has passed, to the other players and to spectators, whatever
the order of drops, returns and moves within the interval; the views and the presence events
tell one story. And a snapshot's `missed_events` are numbered events only: a presence event
repeats the latest sequence, so it is never listed, neither in a spectator's merged snapshot
nor in one reopened with after_sequence. The tests wait for events (and, where nothing is sent,
for the server's own state), never for a time, and assert no time."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from copas.v1 import copas_pb2, copas_pb2_grpc

from tests.helpers.calls import Watch, auth, join_all, new_table
from tests.helpers.servers import serving

INTERVAL = 2.0  # --presence-interval: each scenario's changes fit well within it
SEAT = 1  # the seat that drops and returns
BARRIER = 3  # its drop is held back to after SEAT's interval: shown, SEAT's has passed
MOVERS = (0, 2)  # the others' moves: passes (nobody passes for SEAT, so the phase stays)
NOT_NUMBERED = ("snapshot", "player_connection", "reaction_shown")  # repeat the sequence


async def until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    """Wait for the server's own state where nothing is sent to wait for."""
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.005)


def is_presence(seat: int, is_connected: bool) -> Callable[[copas_pb2.TableEvent], bool]:
    return lambda m: (m.WhichOneof("kind") == "player_connection"
                      and m.player_connection.seat == seat
                      and m.player_connection.is_connected == is_connected)


def shown(messages: list[copas_pb2.TableEvent], seat: int) -> bool:
    """What a client reading these messages shows of ``seat`` after the last: the last view
    or `player_connection` event of the seat's that it was sent."""
    for m in reversed(messages):
        if m.WhichOneof("kind") == "player_connection" and m.player_connection.seat == seat:
            return m.player_connection.is_connected
        if m.HasField("view"):
            return m.view.players[seat].is_connected
    raise AssertionError("no view")


def story(messages: list[copas_pb2.TableEvent], seat: int) -> list[bool]:
    """``seat``'s connection as a client reading these messages is told it: the opening
    snapshot's view, then each of the seat's `player_connection` events. Every view a
    message carries shows what it was told last: the views and the events agree."""
    told: list[bool] = []
    for index, m in enumerate(messages):
        if m.WhichOneof("kind") == "player_connection" and m.player_connection.seat == seat:
            told.append(m.player_connection.is_connected)
        elif not told:
            told.append(m.view.players[seat].is_connected)  # the opening snapshot
        if m.HasField("view"):
            assert m.view.players[seat].is_connected == told[-1], (
                f"message {index} ({m.WhichOneof('kind')}, sequence {m.sequence}) shows seat "
                f"{seat} {'connected' if not told[-1] else 'gone'} after it was told "
                f"{'connected' if told[-1] else 'gone'}: {[*told]}")
    return told


class Scene:
    """A started game of four people (passing, no clocks) and its watchers: seat 0's
    stream, seat 2's batched stream, a spectator and a batched spectator; SEAT's stream
    comes and goes."""

    def __init__(self, running: Any, stub: copas_pb2_grpc.CopasServiceStub, table_id: str,
                 tokens: dict[int, str]) -> None:
        self.stub, self.table_id, self.tokens = stub, table_id, tokens
        self.table = running.registry.get(table_id)  # its truth, where nothing is sent
        self.spectator = Watch(stub, table_id)
        self.watchers = [Watch(stub, table_id, tokens[0]),
                         Watch(stub, table_id, tokens[2], is_batched=True),
                         self.spectator, Watch(stub, table_id, is_batched=True)]
        self.own: Watch | None = None  # SEAT's stream while it is open
        self.moves = 0

    async def open(self) -> None:
        for watch in self.watchers:
            await watch.opened()

    async def connect(self, seat: int = SEAT) -> Watch:
        """Open a stream of ``seat``'s: once it is open, the server counts it."""
        watch = Watch(self.stub, self.table_id, self.tokens[seat])
        await watch.opened()
        assert self.table.is_connected(seat)
        return watch

    async def drop(self, watch: Watch, seat: int = SEAT) -> None:
        """Close ``seat``'s stream; nothing is sent while its change is held back."""
        await watch.close()
        await until(lambda: not self.table.is_connected(seat))

    async def move(self) -> None:
        """One of the others passes; every watcher is shown it."""
        seat = MOVERS[self.moves]
        self.moves += 1
        token = self.tokens[seat]
        view = (await self.stub.GetView(copas_pb2.GetViewRequest(table_id=self.table_id),
                                        metadata=auth(token))).view
        answer = await self.stub.PassCards(copas_pb2.PassCardsRequest(
            table_id=self.table_id, cards=list(view.legal_cards[:3])), metadata=auth(token))
        for watch in self.watchers:
            await watch.wait_for(lambda m: m.sequence >= answer.sequence)

    async def do(self, op: str) -> None:
        if op == "drop":
            assert self.own is not None
            await self.drop(self.own)
            self.own = None
        elif op == "return":
            assert self.own is None
            self.own = await self.connect()
        else:
            assert op == "move"
            await self.move()

    async def close(self) -> None:
        for watch in [*self.watchers, *([self.own] if self.own else [])]:
            await watch.close()


SCENARIOS = {  # the state SEAT was last shown in (just now), then its changes and the moves
    "drop-move-return": (True, ("drop", "move", "return")),
    "drop-move-return-drop": (True, ("drop", "move", "return", "drop")),
    "return-move-drop": (False, ("return", "move", "drop")),
    "return-move-drop-move-return": (False, ("return", "move", "drop", "move", "return")),
}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
async def test_a_seat_is_shown_as_it_is_once_the_interval_passes(scenario: str) -> None:
    """SEAT was just shown (connected, or gone: its last change was held back to the end of
    its interval and shown then), so its next changes within the interval are held back
    too; the others move in between, while it is shown otherwise than it is. Once the
    interval has passed, every stream shows it as it is: the other players', the
    spectators' (batched or not), its own, the lobby's and a spectator's coming back with
    after_sequence; and no stream was ever shown a view that says otherwise than the
    presence events it was told."""
    is_first_connected, ops = SCENARIOS[scenario]
    async with serving(allow_seed=True, presence_interval=INTERVAL) as (running, stub):
        table = await new_table(stub, seed="39")
        tokens = {j.seat: j.player_token for j in await join_all(stub, table.table_id, 4)}
        scene = Scene(running, stub, table.table_id, tokens)
        await scene.open()
        spectator = scene.spectator
        scene.own = await scene.connect()  # SEAT's first change: shown at once
        await spectator.wait_for(is_presence(SEAT, True))
        if not is_first_connected:  # gone within the interval: shown at its end
            await scene.drop(scene.own)
            scene.own = None
            await spectator.wait_for(is_presence(SEAT, False), timeout=INTERVAL + 10)
        start = len(spectator.messages)  # SEAT's interval runs from its last event
        # BARRIER comes and goes after that event: its going is shown after SEAT's interval.
        await scene.drop(await scene.connect(BARRIER), BARRIER)
        for op in ops:
            await scene.do(op)
        # The scenario fit in the interval: nothing of SEAT's was shown during it.
        assert not any(is_presence(SEAT, s)(m) for m in spectator.messages[start:]
                       for s in (True, False)), "the scenario took longer than the interval"
        is_connected = scene.own is not None
        assert scene.table.is_connected(SEAT) == is_connected
        streams = [*scene.watchers, *([scene.own] if scene.own else [])]
        for watch in streams:
            await watch.wait_for(is_presence(BARRIER, False), timeout=INTERVAL + 10)
        for watch in streams:
            # SEAT's interval has passed before BARRIER's going is shown: so is SEAT.
            barrier = next(i for i, m in enumerate(watch.messages)
                           if is_presence(BARRIER, False)(m))
            assert shown(watch.messages[:barrier], SEAT) == is_connected, scenario
            assert story(watch.messages, SEAT)[-1] == is_connected, scenario
        summary = (await stub.GetTable(copas_pb2.GetTableRequest(table_id=table.table_id))).table
        assert summary.seats[SEAT].is_connected == is_connected  # the lobby's too
        # A spectator back with after_sequence, across SEAT's (and BARRIER's) presence:
        # the moves are listed, the presence is in the view.
        again = Watch(stub, table.table_id, after_sequence=spectator.messages[0].sequence)
        reopened = await again.opened()
        assert [e.WhichOneof("kind") for e in reopened.snapshot.missed_events] == \
            ["pass_chosen"] * scene.moves
        assert reopened.view.players[SEAT].is_connected == is_connected
        await again.close()
        await scene.close()


async def test_a_seats_next_person_is_shown_as_they_are() -> None:
    """A person who gives their seat up before the game (their token revoked, their streams
    ended) is shown gone with it; the next person at the seat is shown as they are, from
    their first stream on: not held back as if they were the one before."""
    async with serving(presence_interval=60.0) as (_, stub):
        table = await new_table(stub, seed=None)
        spectator = Watch(stub, table.table_id)
        await spectator.opened()
        first = (await join_all(stub, table.table_id, 1))[0]
        stream = Watch(stub, table.table_id, first.player_token)
        await spectator.wait_for(is_presence(first.seat, True))
        await stub.LeaveTable(copas_pb2.LeaveTableRequest(table_id=table.table_id),
                              metadata=auth(first.player_token))
        await spectator.wait_for(lambda m: m.WhichOneof("kind") == "player_left")
        assert not shown(spectator.messages, first.seat)
        await stream.close()
        since = len(spectator.messages)
        second = (await join_all(stub, table.table_id, 1))[0]
        assert second.seat == first.seat
        await spectator.wait_for(lambda m: m.WhichOneof("kind") == "player_joined", start=since)
        assert not shown(spectator.messages, second.seat)  # not connected yet
        since = len(spectator.messages)
        stream = Watch(stub, table.table_id, second.player_token)
        await spectator.wait_for(is_presence(second.seat, True), start=since)
        assert story(spectator.messages, second.seat) == [False, True, False, True]
        await stream.close()
        await spectator.close()


def numbered(messages: list[copas_pb2.TableEvent]) -> list[int]:
    """The sequences of the numbered events a stream showed, in order: its own and its
    snapshots' missed ones (each of which must be numbered)."""
    shown: list[int] = []
    for m in messages:
        if m.WhichOneof("kind") == "snapshot":
            for missed in m.snapshot.missed_events:
                listed = [(e.sequence, e.WhichOneof("kind")) for e in m.snapshot.missed_events]
                assert missed.WhichOneof("kind") not in NOT_NUMBERED, (
                    f"a snapshot at {m.sequence} lists {missed.WhichOneof('kind')} at "
                    f"{missed.sequence}: {listed}")
            shown += [e.sequence for e in m.snapshot.missed_events]
        elif m.WhichOneof("kind") not in NOT_NUMBERED:
            shown.append(m.sequence)
    return shown


def quick(name: str) -> copas_pb2.JoinTableRequest:
    return copas_pb2.JoinTableRequest(preset="quick", display_name=name)


@pytest.mark.parametrize("batched", [False, True], ids=["per-event", "batched"])
async def test_a_spectators_snapshots_list_only_numbered_events(batched: bool) -> None:
    """A quick match starts when its last player's stream opens: that step numbers the
    game's first events and shows the player connected. A spectator whose updates are
    coalesced gets it merged with the steps before it into one snapshot: its missed events
    are the numbered ones, each once, in order (the connection is in its view). A spectator
    that comes back with after_sequence, across presence events, is listed the numbered
    events after it, and nothing when it saw the latest."""
    async with serving(spectator_tick=1.0, presence_interval=0.0) as (_, stub):
        first = await stub.JoinTable(quick("P0"))
        table_id = first.table.table_id
        spectator = Watch(stub, table_id, is_batched=batched)
        opening = await spectator.opened()
        joins = [first, *[await stub.JoinTable(quick(f"P{i}")) for i in range(1, 4)]]
        assert {j.table.table_id for j in joins} == {table_id}
        players = {j.seat: Watch(stub, table_id, j.player_token) for j in joins}
        await players[joins[0].seat].wait_for(lambda m: m.view.phase == copas_pb2.PHASE_PASSING)
        started = (await stub.GetView(copas_pb2.GetViewRequest(table_id=table_id))).sequence
        await spectator.wait_for(lambda m: m.sequence >= started
                                 and m.view.phase == copas_pb2.PHASE_PASSING)
        merged = [m for m in spectator.messages[1:] if m.WhichOneof("kind") == "snapshot"]
        assert merged, "the steps within a tick came as one snapshot"
        assert numbered(spectator.messages[1:]) == list(range(opening.sequence + 1, started + 1))
        # Presence after the last numbered event: a seat goes and comes back.
        seat, other = joins[1].seat, players[joins[0].seat]
        since = len(other.messages)
        await players[seat].close()
        await other.wait_for(is_presence(seat, False), start=since)
        players[seat] = Watch(stub, table_id, joins[1].player_token)
        back = await other.wait_for(is_presence(seat, True), start=since)
        assert back.sequence == started  # not numbered: it repeats the latest
        for after in (opening.sequence, 1, back.sequence):
            again = Watch(stub, table_id, after_sequence=after, is_batched=batched)
            snapshot = (await again.opened()).snapshot
            listed = [(e.sequence, e.WhichOneof("kind")) for e in snapshot.missed_events]
            assert [s for s, _ in listed] == list(range(after + 1, back.sequence + 1)), listed
            assert not any(kind in NOT_NUMBERED for _, kind in listed), listed
            assert not snapshot.has_gap
            view = again.messages[0].view
            assert all(p.is_connected for p in view.players), view.players
            await again.close()
        for watch in (spectator, *players.values()):
            await watch.close()
