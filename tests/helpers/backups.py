"""Load for the backup tests, with what it was told was done: people playing tables through
unary calls (new tables as games end), signed-in people playing rated games, new accounts
signing in and registering for a championship, and tables of bots the server plays; each
acknowledged action is kept with the time its answer was read (``time.time()``, the clock a
backup's manifest states its instant in). Then the checks of a restored server against it."""

from __future__ import annotations

import asyncio
import contextlib
import random
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

import grpc
from copas.v1 import (
    accounts_pb2,
    accounts_pb2_grpc,
    championships_pb2,
    championships_pb2_grpc,
    copas_pb2,
    copas_pb2_grpc,
)

from tests.helpers.calls import auth, join_all, new_table, play_out

OVER = copas_pb2.PHASE_GAME_OVER


@dataclass
class Acknowledged:
    """What the load's clients were answered, each with the time the answer was read."""

    tables: dict[str, float] = field(default_factory=dict)  # table id -> created
    tokens: dict[str, dict[int, str]] = field(default_factory=dict)  # table -> seat -> token
    moves: list[tuple[float, str, int]] = field(default_factory=list)  # at, table, sequence
    over: dict[str, float] = field(default_factory=dict)  # table -> its end seen
    rated: dict[str, list[str]] = field(default_factory=dict)  # table -> its players' tokens
    sessions: list[tuple[float, accounts_pb2.Session]] = field(default_factory=list)
    registrations: list[tuple[float, str]] = field(default_factory=list)  # at, access token
    bot_tables: list[str] = field(default_factory=list)

    def before(self, instant: float) -> Acknowledged:
        """What was answered before ``instant``."""
        return Acknowledged(
            tables={t: at for t, at in self.tables.items() if at < instant},
            tokens=self.tokens,
            moves=[m for m in self.moves if m[0] < instant],
            over={t: at for t, at in self.over.items() if at < instant},
            rated={t: s for t, s in self.rated.items() if self.over.get(t, instant) < instant},
            sessions=[s for s in self.sessions if s[0] < instant],
            registrations=[r for r in self.registrations if r[0] < instant],
            bot_tables=self.bot_tables)


class Load:
    """The load on a server at ``address`` until ``stop()``; ``acked`` is what it was told."""

    def __init__(self, address: str, *, people_tables: int = 3, bot_tables: int = 3,
                 rated_people: int = 6) -> None:
        self.address = address
        self.acked = Acknowledged()
        self.people_tables = people_tables
        self.bot_table_count = bot_tables
        self.rated_people = rated_people
        self.championship_id = ""
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._channel = grpc.aio.insecure_channel(address)
        self.game = copas_pb2_grpc.CopasServiceStub(self._channel)
        self.accounts = accounts_pb2_grpc.AccountServiceStub(self._channel)
        self.championships = championships_pb2_grpc.ChampionshipServiceStub(self._channel)

    async def under_way(self, timeout: float = 120.0) -> None:
        """Waits until the load has been told of more than 100 moves, a game over, a rated
        game that reached its players' histories (the accounts take a game in after its end)
        and a registration (a fixed wait is too short on a busy machine)."""
        async with asyncio.timeout(timeout):
            while True:
                now = self.acked.before(time.time())
                if len(now.moves) > 100 and now.over and now.rated and now.registrations \
                        and await self._in_a_history(now.rated):
                    return
                await asyncio.sleep(0.1)

    async def _in_a_history(self, rated: dict[str, list[str]]) -> bool:
        """Whether one of the ``rated`` games over is in its first player's history."""
        for table_id, players in rated.items():
            games = (await self.accounts.ListMyGames(accounts_pb2.ListMyGamesRequest(
                page_size=100), metadata=auth(players[0]), timeout=10)).games
            if any(g.record_id == table_id for g in games):
                return True
        return False

    async def start(self) -> None:
        organizer = await self.sign_in("Organizer")
        made = await self.championships.CreateChampionship(
            championships_pb2.CreateChampionshipRequest(
                settings=championships_pb2.ChampionshipSettings(
                    display_name="Backed up", rounds=1, preset="quick", max_players=500),
                request_id=secrets.token_hex(8)),
            metadata=auth(organizer.access_token), timeout=10)
        self.championship_id = made.championship.championship_id
        for _ in range(self.bot_table_count):
            table = await new_table(self.game, seed=None, bots=4, max_hands=2)
            self.acked.bot_tables.append(table.table_id)
        rated = [await self.sign_in(f"Rated {n}") for n in range(self.rated_people)]
        self._tasks = [asyncio.create_task(self._people(n)) for n in range(self.people_tables)]
        self._tasks += [asyncio.create_task(self._rated(rated)),
                        asyncio.create_task(self._newcomers())]

    async def stop(self) -> None:
        self._stop.set()
        await asyncio.gather(*self._tasks)
        await self._channel.close()

    async def sign_in(self, name: str) -> accounts_pb2.Session:
        answer = await self.accounts.SignInDevice(accounts_pb2.SignInDeviceRequest(
            device_secret=secrets.token_urlsafe(24), display_name=name), timeout=10)
        self.acked.sessions.append((time.time(), answer.session))
        return answer.session

    async def _people(self, worker: int) -> None:
        """Four anonymous people at a table, a game of two hands, then another table."""
        while not self._stop.is_set():
            table = await new_table(self.game, seed=None, max_hands=2)
            self.acked.tables[table.table_id] = time.time()
            joined = await join_all(self.game, table.table_id, 4)
            self.acked.tokens[table.table_id] = {j.seat: j.player_token for j in joined}
            await self.play(table.table_id)

    async def _rated(self, people: list[accounts_pb2.Session]) -> None:
        """Three of ``people``, signed in, play a one-hand game; then three others."""
        draw = random.Random(39)
        while not self._stop.is_set():
            table = await new_table(self.game, preset="quick", seed=None, players=3,
                                    max_hands=1)
            self.acked.tables[table.table_id] = time.time()
            tokens = {}
            seated = draw.sample(people, 3)
            for person in seated:
                joined = await self.game.JoinTable(copas_pb2.JoinTableRequest(
                    table_id=table.table_id), metadata=auth(person.access_token), timeout=10)
                tokens[joined.seat] = joined.player_token
            self.acked.tokens[table.table_id] = tokens
            self.acked.rated[table.table_id] = [p.access_token for p in seated]
            await self.play(table.table_id, until_over=True)

    async def _newcomers(self) -> None:
        """New accounts sign in and register for the championship, one after another."""
        n = 0
        while not self._stop.is_set():
            session = await self.sign_in(f"Newcomer {n}")
            n += 1
            await self.championships.Register(championships_pb2.RegisterRequest(
                championship_id=self.championship_id), metadata=auth(session.access_token),
                timeout=10)
            self.acked.registrations.append((time.time(), session.access_token))
            await asyncio.sleep(0.02)

    async def play(self, table_id: str, *, until_over: bool = False) -> None:
        """Every seat of the table by its own hand (the first legal cards), each answer kept,
        until the game is over or, unless ``until_over``, the load stops."""
        tokens = self.acked.tokens[table_id]
        while until_over or not self._stop.is_set():
            acted = False
            for token in tokens.values():
                got = await self.game.GetView(copas_pb2.GetViewRequest(table_id=table_id),
                                              metadata=auth(token), timeout=10)
                view = got.view
                if view.phase == OVER:
                    self.acked.over.setdefault(table_id, time.time())
                    return
                if view.seat not in view.to_act or view.HasField("paused_until"):
                    continue
                with contextlib.suppress(grpc.aio.AioRpcError):  # the table moved on (a timer)
                    answer = await act(self.game, table_id, token, view)
                    self.acked.moves.append((time.time(), table_id, answer.sequence))
                    acted = True
            if not acted:
                await asyncio.sleep(0.005)


async def act(stub: copas_pb2_grpc.CopasServiceStub, table_id: str, token: str,
              view: copas_pb2.TableView) -> Any:
    """The view's seat's move (the first legal cards; "add to the others" at a moon)."""
    meta = auth(token)
    if view.phase == copas_pb2.PHASE_PASSING:
        return await stub.PassCards(copas_pb2.PassCardsRequest(
            table_id=table_id, cards=list(view.legal_cards[:3])), metadata=meta, timeout=10)
    if view.phase == copas_pb2.PHASE_PLAYING:
        return await stub.PlayCard(copas_pb2.PlayCardRequest(
            table_id=table_id, card=view.legal_cards[0]), metadata=meta, timeout=10)
    return await stub.ChooseMoon(copas_pb2.ChooseMoonRequest(
        table_id=table_id, choice=copas_pb2.MOON_CHOICE_ADD_TO_OTHERS), metadata=meta,
        timeout=10)


async def history(stub: copas_pb2_grpc.CopasServiceStub, table_id: str, token: str
                  ) -> dict[int, bytes]:
    """A table's numbered events after the first, as a player's snapshot lists them (all of
    them: a player's is not capped), each serialized, by sequence."""
    call = stub.WatchTable(copas_pb2.WatchTableRequest(table_id=table_id, after_sequence=1),
                           metadata=auth(token))
    try:
        head = (await call.read()).event
    finally:
        call.cancel()
    assert head.WhichOneof("kind") == "snapshot" and not head.snapshot.has_gap, head
    events = {e.sequence: e.SerializeToString() for e in head.snapshot.missed_events}
    assert sorted(events) == list(range(2, head.sequence + 1)), sorted(events)
    return events


async def check_restored(channel: grpc.aio.Channel, load: Load, taken: float, ended: float,
                         live_history: dict[str, dict[int, bytes]],
                         live_records: dict[str, bytes]) -> None:
    """The restored node holds everything acknowledged before ``taken`` and nothing first
    answered after ``ended``; its histories are prefixes of the live node's; its games go on."""
    stub = copas_pb2_grpc.CopasServiceStub(channel)
    accounts = accounts_pb2_grpc.AccountServiceStub(channel)
    championships = championships_pb2_grpc.ChampionshipServiceStub(channel)
    acked, before = load.acked, load.acked.before(taken)
    restored: dict[str, dict[int, bytes]] = {}
    for table_id, tokens in acked.tokens.items():
        try:
            restored[table_id] = await history(stub, table_id, tokens[0])
        except grpc.aio.AioRpcError as error:
            assert table_id not in before.tables, (table_id, error)
            assert error.code() in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.UNAUTHENTICATED)
    assert set(before.tables) <= set(restored)
    assert not {t for t, at in acked.tables.items() if at > ended} & set(restored)
    for table_id, events in restored.items():  # the same events under the same numbers
        assert events == {n: e for n, e in live_history[table_id].items() if n in events}
    for at, table_id, sequence in before.moves:  # every acknowledged move is there
        assert sequence in restored[table_id], (at, table_id, sequence, taken)
    for table_id, record in live_records.items():  # every game seen over, its record
        got = await stub.GetGameRecord(copas_pb2.GetGameRecordRequest(record_id=table_id))
        assert got.record.SerializeToString() == record
    for _, session in before.sessions:  # every account, its session
        await accounts.GetProfile(accounts_pb2.GetProfileRequest(),
                                  metadata=auth(session.access_token))
    for _, session in (s for s in acked.sessions if s[0] > ended + 0.5):
        try:
            await accounts.GetProfile(accounts_pb2.GetProfileRequest(),
                                      metadata=auth(session.access_token))
        except grpc.aio.AioRpcError as refusal:
            assert refusal.code() == grpc.StatusCode.UNAUTHENTICATED
        else:
            raise AssertionError("an account made after the backup is there")
    for _, token in before.registrations:  # every registration
        got = await championships.GetChampionship(championships_pb2.GetChampionshipRequest(
            championship_id=load.championship_id), metadata=auth(token))
        assert got.championship.is_registered
    # Each rated game over before the backup reaches its players' histories once (the
    # restored node takes in what the backup's instant had not yet).
    deadline = time.monotonic() + 20
    for table_id, players in before.rated.items():
        for token in players:
            while True:
                games = (await accounts.ListMyGames(accounts_pb2.ListMyGamesRequest(
                    page_size=100), metadata=auth(token))).games
                found = [g.record_id for g in games].count(table_id)
                assert found <= 1
                if found or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.1)
            assert found == 1, table_id
    # The games go on: the people's tables in play at the backup are played to their end
    # with the same tokens, and the bots' tables move by themselves. (A table whose last
    # seats were taken after the backup waits for them there: not in play.)
    in_play = [t for t in restored if t not in acked.rated and started(restored[t])
               and not ended_at(restored[t])]
    assert in_play
    for table_id in in_play:
        tokens = acked.tokens[table_id]
        view = await asyncio.wait_for(play_out(stub, table_id, tokens), 60)
        assert view.phase == OVER
        await stub.GetGameRecord(copas_pb2.GetGameRecordRequest(record_id=table_id))
    for table_id in acked.bot_tables:
        await until_over(stub, table_id)


def started(events: dict[int, bytes]) -> bool:
    return any(copas_pb2.TableEvent.FromString(e).WhichOneof("kind") == "game_started"
               for e in events.values())


def ended_at(events: dict[int, bytes]) -> bool:
    last = copas_pb2.TableEvent.FromString(events[max(events)])
    return last.WhichOneof("kind") == "game_over"


async def until_over(stub: copas_pb2_grpc.CopasServiceStub, table_id: str) -> None:
    deadline = time.monotonic() + 60
    while (await stub.GetTable(copas_pb2.GetTableRequest(table_id=table_id))
           ).table.phase != OVER:
        assert time.monotonic() < deadline, table_id
        await asyncio.sleep(0.1)
