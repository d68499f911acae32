"""Championship helpers for tests: accounts of reference bots that follow WatchChampionship to
their table each round and play it (``clients.bots.run_bot``), and the standings recomputed
from the game records alone."""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
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

from clients.bots import run_bot
from clients.common import Player
from engine.championship import GameResult, Standing, standings
from tests.helpers.calls import auth

FAST_RULES = copas_pb2.RulesOverrides(max_hands=1, play_timeout_seconds=5,
                                      pass_timeout_seconds=5, moon_timeout_seconds=5,
                                      trick_pause_seconds=0, hand_pause_seconds=0)


async def sign_in(address: str, names: list[str]) -> list[accounts_pb2.Session]:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = accounts_pb2_grpc.AccountServiceStub(channel)
        return [(await stub.SignInDevice(accounts_pb2.SignInDeviceRequest(
            device_secret=secrets.token_urlsafe(24), display_name=name), timeout=10)).session
            for name in names]


class BotPlayer:
    """One account's bot: watches the championship and plays each table it is given, until
    the championship is over (``run`` returns) or it is stopped; a stream broken by a server
    restart is opened again."""

    def __init__(self, address: str, session: accounts_pb2.Session,
                 championship_id: str) -> None:
        self.address = address
        self.session = session
        self.championship_id = championship_id
        self.played: list[str] = []  # tables given, in order
        self.done: set[str] = set()  # tables whose game it saw end
        self.last: championships_pb2.Championship | None = None

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
            try:
                async for message in watcher.WatchChampionship(
                        championships_pb2.WatchChampionshipRequest(
                            championship_id=self.championship_id),
                        metadata=auth(self.session.access_token)):
                    self.last = message.championship
                    mine = message.your_table
                    running = games.get(mine.table_id)
                    if mine.table_id and mine.table_id not in self.done \
                            and (running is None or running.done()):
                        if mine.table_id not in self.played:
                            self.played.append(mine.table_id)
                        player = Player(game, mine.table_id, mine.seat, mine.player_token)
                        games[mine.table_id] = asyncio.ensure_future(self._play(player))
                    if message.championship.state in (
                            championships_pb2.CHAMPIONSHIP_STATE_FINISHED,
                            championships_pb2.CHAMPIONSHIP_STATE_CANCELLED):
                        return True
            finally:
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
                await run_bot(player, "greedy")
            except grpc.aio.AioRpcError:
                await asyncio.sleep(0.2)
                continue
            self.done.add(player.table_id)
            return


def recomputed(championship: championships_pb2.Championship,
               records: dict[str, dict[str, Any]]) -> list[Standing]:
    """The standings from the game records alone (each record's seats, by name; totals and
    leavers), the championship's players (their public player ids, which its draws use) and
    its seed, revealed at its end. Standing.player is a player id."""
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
                      if s.get("acted") is False and by_seat[s["seat"]] not in leavers)))
    return standings(results, list(by_name.values()), championship.seed)


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
