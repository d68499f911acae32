"""Championship helpers for tests: accounts of reference bots that follow WatchChampionship to
their table each round and play it (``clients.bots.run_bot``), noting when each round's table
reached them and which of their seat's moves the server made; the standings recomputed from
the game records alone; the nodes of a two-node cluster as the championship cluster tests
start them; and a manual-clock ``Director``."""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import grpc
from copas.admin.v1 import admin_pb2, admin_pb2_grpc
from copas.v1 import (
    accounts_pb2,
    accounts_pb2_grpc,
    championships_pb2,
    championships_pb2_grpc,
    copas_pb2,
    copas_pb2_grpc,
)

from clients.bots import run_bot
from clients.common import Player
from engine import Game
from server.championships.format import (
    ChampionshipRules,
    GameResult,
    Standing,
    final_standings,
    standings,
)
from tests.helpers.calls import auth
from tests.helpers.servers import ServerProcess

FAST_RULES = copas_pb2.RulesOverrides(max_hands=1, play_timeout_seconds=5,
                                      pass_timeout_seconds=5, moon_timeout_seconds=5,
                                      trick_pause_seconds=0, hand_pause_seconds=0)


async def sign_in(address: str, names: list[str]) -> list[accounts_pb2.Session]:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = accounts_pb2_grpc.AccountServiceStub(channel)
        return [(await stub.SignInDevice(accounts_pb2.SignInDeviceRequest(
            device_secret=secrets.token_urlsafe(24), display_name=name), timeout=10)).session
            for name in names]


@dataclass
class PacedPlayer(Player):
    """A seat whose every move waits ``pace`` seconds first (a slower person)."""

    pace: float = 0.0

    async def _call(self, method: Any, request: Any) -> Any:
        await asyncio.sleep(self.pace)
        return await super()._call(method, request)


class BotPlayer:
    """One account's bot: watches the championship and plays each table it is given, until
    the championship is over (``run`` returns) or it is stopped; a stream broken by a server
    restart is opened again. ``pace``: seconds it waits before each move.

    It notes when each round's table first reached it (``told``: the wall clock on its
    arrival, the table) and its seat's moves at each table that it saw, by sequence, each
    made by itself or by the server (``moves``: a timeout's, or an away seat's); ``history``
    reads them all from the table once its game is over (those made while it was away too)."""

    def __init__(self, address: str, session: accounts_pb2.Session,
                 championship_id: str, pace: float = 0.0) -> None:
        self.address = address
        self.session = session
        self.championship_id = championship_id
        self.pace = pace
        self.played: list[str] = []  # tables given, in order
        self.done: set[str] = set()  # tables whose game it saw end
        self.last: championships_pb2.Championship | None = None
        self.told: dict[int, tuple[float, str]] = {}  # round -> (arrival, table id)
        self.seats: dict[int, championships_pb2.YourTable] = {}  # round -> its seat there
        self.moves: dict[str, dict[int, bool]] = {}  # table -> its seat's: sequence -> by server
        self.watched: list[tuple[float, float]] = []  # each watch: its first message, its end

    def first_move_was_automatic(self, table_id: str) -> bool | None:
        """Whether its seat's first move at the table was the server's (None: no move yet)."""
        moves = self.moves.get(table_id)
        return moves[min(moves)] if moves else None

    def automatic_moves(self, table_id: str) -> int:
        return sum(self.moves.get(table_id, {}).values())

    def was_watching(self, at: float) -> bool:
        """Whether a watch of its was open at ``at`` (wall clock: its first message was in,
        its end not yet), once ``run`` returned."""
        return any(start <= at <= end for start, end in self.watched)

    async def run(self) -> None:
        while True:
            try:
                if await self._follow():
                    return
            except grpc.aio.AioRpcError as error:
                if error.code() not in (grpc.StatusCode.UNAVAILABLE,
                                        grpc.StatusCode.CANCELLED,
                                        grpc.StatusCode.DEADLINE_EXCEEDED):
                    raise
            await asyncio.sleep(0.2)

    async def _follow(self) -> bool:
        async with grpc.aio.insecure_channel(self.address) as channel:
            watcher = championships_pb2_grpc.ChampionshipServiceStub(channel)
            game = copas_pb2_grpc.CopasServiceStub(channel)
            games: dict[str, asyncio.Task[Any]] = {}
            opened: float | None = None
            try:
                async for message in watcher.WatchChampionship(
                        championships_pb2.WatchChampionshipRequest(
                            championship_id=self.championship_id),
                        metadata=auth(self.session.access_token)):
                    opened = opened or time.time()
                    self.last = message.championship
                    mine = message.your_table
                    if mine.table_id and mine.round_number not in self.told:
                        self.told[mine.round_number] = (time.time(), mine.table_id)
                        self.seats[mine.round_number] = mine
                    running = games.get(mine.table_id)
                    if mine.table_id and mine.table_id not in self.done \
                            and (running is None or running.done()):
                        if mine.table_id not in self.played:
                            self.played.append(mine.table_id)
                        player = PacedPlayer(game, mine.table_id, mine.seat,
                                             mine.player_token, pace=self.pace)
                        games[mine.table_id] = asyncio.ensure_future(self._play(player))
                    if message.championship.state in (
                            championships_pb2.CHAMPIONSHIP_STATE_FINISHED,
                            championships_pb2.CHAMPIONSHIP_STATE_CANCELLED):
                        return True
            finally:
                if opened is not None:
                    self.watched.append((opened, time.time()))
                for task in games.values():
                    task.cancel()
                    with contextlib.suppress(BaseException):
                        await task
        return False

    async def _play(self, player: Player) -> None:
        """Plays the seat until its game is over: a broken stream (a node killed, its table
        moved to another) is opened again; the watch's end cancels it."""
        while True:
            try:
                await run_bot(player, "greedy", on_event=lambda e: self._saw(player, e))
            except grpc.aio.AioRpcError:
                await asyncio.sleep(0.2)
                continue
            self.done.add(player.table_id)
            return

    async def history(self, round_no: int) -> None:
        """Reads its seat's moves at its table of ``round_no`` from the table's events (a
        snapshot after sequence 1 lists them all; a stream from 0, as a player's first,
        lists none), through its node. UNAVAILABLE (TABLE_MOVED: the owner this node knew
        went away, a restarted node's new relay port) is retried, as the contract says."""
        mine = self.seats[round_no]
        async with grpc.aio.insecure_channel(self.address) as channel:
            player = Player(copas_pb2_grpc.CopasServiceStub(channel), mine.table_id,
                            mine.seat, mine.player_token)
            for attempt in range(20):
                call = player.stub.WatchTable(copas_pb2.WatchTableRequest(
                    table_id=mine.table_id, after_sequence=1), metadata=player.metadata,
                    timeout=10)
                try:
                    first = (await call.read()).event
                    break
                except grpc.aio.AioRpcError as error:
                    if error.code() != grpc.StatusCode.UNAVAILABLE or attempt == 19:
                        raise
                    await asyncio.sleep(0.1)
                finally:
                    call.cancel()
        assert first.HasField("snapshot") and not first.snapshot.has_gap
        self._saw(player, first)

    def _saw(self, player: Player, event: copas_pb2.TableEvent) -> None:
        """Notes the seat's moves, by sequence, and whether the server made each (a
        snapshot's missed events are the moves made before its stream opened)."""
        moves = self.moves.setdefault(player.table_id, {})
        events = event.snapshot.missed_events if event.HasField("snapshot") else [event]
        for seen in events:
            kind = seen.WhichOneof("kind")
            if kind in ("pass_chosen", "card_played", "moon_chosen"):
                move = getattr(seen, kind)
                if move.seat == player.seat:
                    moves[seen.sequence] = move.is_automatic


def recomputed(championship: championships_pb2.Championship,
               records: dict[str, dict[str, Any]],
               rules: ChampionshipRules | None = None) -> list[Standing]:
    """The standings from the game records alone (each record's seats, by name; totals and
    leavers), the championship's players (their public player ids, which its draws use) and
    its seed, revealed at its end, under ``rules`` (when None, the default ones for the
    championship's game, ``settings.game``); after a final (its round marked ``is_final``),
    the final standings. Standing.player is a player id."""
    game = championship.settings.game
    rules = rules if rules is not None else ChampionshipRules(game_name=game)
    by_name = {p.display_name: p.player_id for p in championship.players}
    results = []
    for round_ in championship.rounds:
        for table in round_.tables:
            record = records[table.table_id]
            seats = sorted(record["seats"], key=lambda s: s["seat"])
            assert all("account" not in s for s in seats)
            by_seat = tuple(by_name[s["name"]] for s in seats)
            results.append(GameResult(
                round_.round_number, table.table_number, by_seat,
                tuple(record["result"]["totals"]),
                leavers := tuple(by_seat[leaver["seat"]]
                                 for leaver in record["result"]["leavers"]),
                tuple(by_seat[s["seat"]] for s in seats
                      if s.get("acted") is False and by_seat[s["seat"]] not in leavers),
                game))
    finals = [r.round_number for r in championship.rounds if r.is_final]
    lines = standings([r for r in results if r.round_no not in finals], list(by_name.values()),
                      championship.seed, rules)
    final = next((r for r in results if r.round_no in finals), None)
    if final is None:
        return lines
    passed = {s.player for s in lines[:max(i for i, s in enumerate(lines)
                                           if s.player in final.players)]
              if s.player not in final.players}
    return final_standings(lines, final, passed_over=passed)


async def records_of(address: str, championship: championships_pb2.Championship
                     ) -> dict[str, dict[str, Any]]:
    async with grpc.aio.insecure_channel(address) as channel:
        game = copas_pb2_grpc.CopasServiceStub(channel)
        found = {}
        for round_ in championship.rounds:
            for table in round_.tables:
                record = (await game.GetGameRecord(copas_pb2.GetGameRecordRequest(
                    record_id=table.table_id), timeout=10)).record
                found[table.table_id] = json.loads(record.record_json)
        return found


# ---------------------------------------------------------------- a two-node cluster

OPERATOR = "operator-0123456789-championships"
"""The operator's token of ``cluster_node``'s nodes (the test writes it to ``tmp/operator``)."""
OPERATOR_CALL = (("authorization", f"Bearer {OPERATOR}"),)


def cluster_node(dsn: str, node_id: str, tmp: Path, *flags: str, port: int | None = None
                 ) -> ServerProcess:
    """A node of a cluster on the PostgreSQL database ``dsn``: no quotas, no bot workers, a
    2 s lease, its championship driver stepping every 0.1 s, ``flags`` after those; its log
    in ``tmp``. ``port``: the one it listens on (a node started again where it was)."""
    return ServerProcess("--database", dsn, "--node-id", node_id, "--unlimited-quotas",
                         "--admin-token-file", str(tmp / "operator"), "--bot-workers", "0",
                         "--lease", "2", "--championship-interval", "0.1",
                         "--log-level", "info", *flags, port=port, log_dir=tmp)


async def championship_of(address: str, cid: str) -> championships_pb2.Championship:
    """GetChampionship through ``address`` (read from the store: never a stale copy)."""
    async with grpc.aio.insecure_channel(address) as channel:
        return (await championships_pb2_grpc.ChampionshipServiceStub(channel).GetChampionship(
            championships_pb2.GetChampionshipRequest(championship_id=cid), timeout=10)
                ).championship


async def table_owners(address: str, table_ids: list[str]) -> set[str]:
    """The nodes that own ``table_ids`` now (AdminService.GetTable's owner_node)."""
    async with grpc.aio.insecure_channel(address) as channel:
        admin = admin_pb2_grpc.AdminServiceStub(channel)
        return {(await admin.GetTable(admin_pb2.GetTableRequest(table_id=t),
                                      metadata=OPERATOR_CALL, timeout=10)).table.owner_node
                for t in table_ids}


# ---------------------------------------------------------------- on a manual clock


class Director:
    """A championship's server parts on one manual clock, without a network: the store (in
    memory), this node's tables (a registry on the clock), the driver and ``Championships``.
    A test steps the driver itself and plays (or leaves unplayed) each table."""

    RULES: ClassVar[dict[str, Any]] = {
        "max_hands": 1, "play_timeout": 5.0, "pass_timeout": 5.0, "moon_timeout": 5.0,
        "trick_pause": 0.0, "hand_pause": 0.0}

    def __init__(self) -> None:
        from server.accounts.model import Account
        from server.championships.driver import Driver
        from server.championships.service import Championships
        from server.championships.store import SqliteChampionshipStore
        from server.championships.tables import LocalTables
        from server.observability import Metrics
        from server.tables.clock import ManualScheduler
        from tests.helpers.servers import registry_for_tests

        self.clock = ManualScheduler()
        self.registry: Any = registry_for_tests(self.clock)
        self.store = SqliteChampionshipStore(":memory:")
        self.tables = LocalTables(self.registry)
        self.driver = Driver(self.store, self.tables, self.registry.store, Metrics(),
                             clock=self.clock.now)
        self.service = Championships(self.store, self.driver, self.tables,
                                     self.registry.settings, per_account=1, max_players=1000,
                                     clock=self.clock.now)
        self.accounts = [Account(f"a_{n:02}", f"P{n:02}", 1.0) for n in range(40)]

    def close(self) -> None:
        self.store.close()

    async def create(self, **settings: Any) -> str:
        from server.championships.service import NewChampionship

        base: dict[str, Any] = {
            "name": "Cup", "rounds": 2, "preset": "online", "overrides": dict(self.RULES),
            "duplicate_deals": False, "max_players": 0, "min_players": 0, "start_at": None,
            "start_when_full": False, "round_pause": 0.0}
        made = await self.service.create(NewChampionship(**{**base, **settings}), None)
        return made.id

    async def register(self, cid: str, players: range | list[int]) -> None:
        for n in players:
            await self.service.register(cid, self.accounts[n])

    async def step(self, cid: str) -> Any:
        """One step of the driver; the championship after it."""
        await self.driver.step(cid)
        return await self.service.get(cid)

    def table(self, table_id: str) -> Any:
        return self.registry.get(table_id)

    def play(self, table_id: str, absent: Collection[str] = ()) -> None:
        """Plays the table's game to its end: every seat's automatic choice, at once; the
        seats of ``absent`` accounts never act (their clocks play them)."""
        table = self.table(table_id)
        game = table.game
        while not game.is_over:
            if table.paused_until is not None:
                self.clock.advance(table.paused_until - self.clock.now())
                continue
            people = [s for s in game.to_act()
                      if table.seats[s].account_id not in absent and not game.has_left[s]]
            if people:
                table.act(people[0], game.auto_action(people[0]))
            elif not self.clock.run_due():
                self.clock.advance(max(0.0, (self.clock.next_due() or self.clock.now())
                                       - self.clock.now()))

    async def play_round(self, cid: str, absent: Collection[str] = ()) -> Any:
        """Plays every table of the round seated now to its end, then steps: the round
        counted."""
        championship = await self.service.get(cid)
        for table in championship.tables_of(championship.seated_round):
            if not self.table(table.table_id).is_finished:
                self.play(table.table_id, absent)
        return await self.step(cid)


def lease_holder(dsn: str, cid: str) -> str:
    """The node whose driver holds the championship's lease (PostgreSQL), or ""."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as db:
        row = db.execute("SELECT node FROM championship_leases WHERE championship_id = %s",
                         (cid,)).fetchone()
    return str(row[0]) if row else ""


def result_from_game(game: Game, players: Sequence[str], round_no: int, table: int,
                     no_shows: Collection[str] = ()) -> GameResult:
    """The championship result of a finished engine game whose seat ``i`` was ``players[i]``
    (was ``GameResult.from_game`` while the format lived in the engine)."""
    left = tuple(players[lv.seat] for lv in game.left if players[lv.seat] not in no_shows)
    return GameResult(round_no, table, tuple(players), tuple(game.totals), left,
                      tuple(p for p in players if p in no_shows))
