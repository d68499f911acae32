"""Every finished game is taken into its accounts' histories and ratings exactly once, however
often the server is killed with -9 between a game's end and its rating: 200 game ends, with
kills at seeded random points (most of them right after the last move of a game, before the
intake has read its record)."""

from __future__ import annotations

import asyncio
import contextlib
import random
import secrets
from collections import Counter
from pathlib import Path
from typing import Any

import grpc
from copas.v1 import accounts_pb2, accounts_pb2_grpc, copas_pb2, copas_pb2_grpc

from tests.helpers.calls import auth, play_out
from tests.helpers.servers import ServerProcess

GAME_ENDS = 200
PEOPLE = 6


def start(data: Path) -> ServerProcess:
    return ServerProcess("--data-dir", str(data), "--unlimited-quotas", "--log-level",
                         "warning", "--bot-workers", "0",
                         "--rate-one-network")  # its people all come from loopback


async def one_game(game: copas_pb2_grpc.CopasServiceStub, sessions: list[Any],
                   draw: random.Random) -> str:
    """Three accounts at a table play its one hand to the end (each stayed and played: a
    rated game): its record id."""
    table = (await game.CreateTable(copas_pb2.CreateTableRequest(
        preset="quick", rules=copas_pb2.RulesOverrides(
            players=3, pass_timeout_seconds=0, play_timeout_seconds=0,
            moon_timeout_seconds=0, trick_pause_seconds=0, hand_pause_seconds=0)),
        timeout=10)).table
    seated = draw.sample(sessions, 3)
    tokens = [(await game.JoinTable(copas_pb2.JoinTableRequest(table_id=table.table_id),
                                    metadata=auth(s.access_token), timeout=10)).player_token
              for s in seated]
    await play_out(game, table.table_id, dict(enumerate(tokens)))
    return str(table.table_id)


async def test_two_hundred_game_ends_with_kill_9s_are_each_rated_once(tmp_path: Path) -> None:
    draw = random.Random(9)
    data = tmp_path / "data"
    server = start(data)
    kills = 0
    try:
        async with grpc.aio.insecure_channel(server.address) as channel:
            accounts = accounts_pb2_grpc.AccountServiceStub(channel)
            sessions = [(await accounts.SignInDevice(accounts_pb2.SignInDeviceRequest(
                device_secret=secrets.token_urlsafe(24), display_name=f"P{n}"))).session
                for n in range(PEOPLE)]
        ended: list[str] = []
        channel = grpc.aio.insecure_channel(server.address)  # one per server started
        while len(ended) < GAME_ENDS:
            with contextlib.suppress(grpc.aio.AioRpcError):  # a game cut by a kill: its
                ended.append(await one_game(copas_pb2_grpc.CopasServiceStub(channel),
                                            sessions, draw))  # table never ended; another
                # one is played
            if draw.random() < 0.08:  # at once after a game's last move, or a moment later
                await asyncio.sleep(draw.choice([0.0, 0.0, 0.0, 0.3, 1.2]))
                server.kill9()
                kills += 1
                await channel.close()
                server = start(data)
                channel = grpc.aio.insecure_channel(server.address)
        await channel.close()
        async with grpc.aio.insecure_channel(server.address) as channel:
            accounts = accounts_pb2_grpc.AccountServiceStub(channel)
            game = copas_pb2_grpc.CopasServiceStub(channel)
            seats: Counter[str] = Counter()
            for record_id in ended:
                record = (await game.GetGameRecord(copas_pb2.GetGameRecordRequest(
                    record_id=record_id))).record
                seats.update(s.display_name for s in record.seats)
            histories: dict[str, list[str]] = {}
            for _ in range(600):  # the restarted server's intake catches up within seconds
                histories = {}
                for session in sessions:
                    games, token = [], ""
                    while True:
                        page = await accounts.ListMyGames(accounts_pb2.ListMyGamesRequest(
                            page_size=100, page_token=token),
                            metadata=auth(session.access_token))
                        games += [g.record_id for g in page.games]
                        token = page.next_page_token
                        if not token:
                            break
                    histories[session.account.display_name] = games
                if sum(len(h) for h in histories.values()) >= 3 * GAME_ENDS:
                    break
                await asyncio.sleep(0.05)
            rated: Counter[str] = Counter()  # the games whose record shows a seat's update
            for record_id in ended:  # (once every game is taken in)
                record = (await game.GetGameRecord(copas_pb2.GetGameRecordRequest(
                    record_id=record_id))).record
                names = {s.seat: s.display_name for s in record.seats}
                rated.update(names[r.seat] for r in record.ratings)
            for session in sessions:
                name = session.account.display_name
                history = histories[name]
                assert len(history) == len(set(history)), f"{name}: a game taken twice"
                assert len(history) == seats[name], f"{name}: a game lost"
                assert set(history) <= set(ended)
                profile = await accounts.GetProfile(accounts_pb2.GetProfileRequest(),
                                                    metadata=auth(session.access_token))
                assert profile.games == seats[name]
                # Rated exactly once each (an established account is rated only against
                # established ones: some games moved nobody's, some not everyone's).
                assert [r.games for r in profile.ratings] == ([rated[name]] if rated[name]
                                                              else [])
        assert sum(rated.values()) > GAME_ENDS  # most seats of most games were rated
    finally:
        server.stop()
    assert kills >= 10  # the seed kills often enough to mean something
