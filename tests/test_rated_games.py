"""Accounts that come back, end to end: eight bot accounts of the reference client (`copas bot
--accounts`) play twenty rated games; the leaderboard equals the ratings computed here, from
the game records alone, with the same library."""

from __future__ import annotations

import asyncio
import json
import random
from typing import Any

import grpc
from copas.v1 import accounts_pb2, accounts_pb2_grpc, copas_pb2
from openskill.models import PlackettLuce

from tests.helpers.servers import serving

NAMES = ["Ana", "Bia", "Cai", "Davi", "Eva", "Fabio", "Gil", "Hugo"]
GAMES = 20


def bot_args(server: str, names: list[str]) -> Any:
    import argparse

    from clients import bots

    parser = argparse.ArgumentParser()
    bots.add_arguments(parser)
    return parser.parse_args(["--server", server, "--create", "--seats", "4", "--players", "4",
                              "--preset", "quick", "--accounts", ",".join(names),
                              "--account-seed", "rated-games", "--transport", "play"])


async def test_eight_accounts_play_twenty_rated_games_and_the_leaderboard_agrees() -> None:
    from clients import bots

    draw = random.Random(2026)
    async with serving() as (running, stub), grpc.aio.insecure_channel(
            f"127.0.0.1:{running.port}") as channel:
        server = f"127.0.0.1:{running.port}"
        for _ in range(GAMES):
            assert await bots.bots_main(bot_args(server, draw.sample(NAMES, 4))) == 0
        records = []
        token = ""
        while True:
            page = await stub.ListGameRecords(copas_pb2.ListGameRecordsRequest(
                page_size=100, page_token=token))
            records += page.records
            token = page.next_page_token
            if not token:
                break
        assert len(records) == GAMES
        accounts = accounts_pb2_grpc.AccountServiceStub(channel)
        for _ in range(400):  # the intake takes finished games within about a second
            board = await accounts.GetLeaderboard(accounts_pb2.GetLeaderboardRequest(
                players=4, page_size=100))
            if sum(e.games for e in board.entries) == 4 * GAMES:
                break
            await asyncio.sleep(0.05)
        # The same ratings, from the records alone: oldest game first.
        model = PlackettLuce()
        ratings = {name: model.rating() for name in NAMES}
        played = {name: 0 for name in NAMES}
        won = {name: 0 for name in NAMES}
        for record in sorted(records, key=lambda r: (r.finish_time.ToMicroseconds(),
                                                     r.record_id)):
            full = await stub.GetGameRecord(copas_pb2.GetGameRecordRequest(
                record_id=record.record_id))
            seats = json.loads(full.record.record_json)["seats"]
            assert all(s["account"].startswith("a_") for s in seats)  # the record names them
            names = {s.seat: s.display_name for s in full.record.seats}
            order = sorted(full.record.standings, key=lambda s: s.seat)
            teams = [[ratings[names[s.seat]]] for s in order]
            for s, team in zip(order, model.rate(teams, ranks=[float(s.place) for s in order]),
                               strict=True):
                ratings[names[s.seat]] = team[0]
                played[names[s.seat]] += 1
                won[names[s.seat]] += s.place == 1
        shown = {n: round((r.mu - 3 * r.sigma) * 100) for n, r in ratings.items()}
        expected = sorted(((shown[n], played[n], won[n], n) for n in NAMES if played[n]),
                          key=lambda row: (-row[0], -row[1]))
        got = [(e.rating, e.games, e.wins, e.display_name) for e in board.entries]
        assert sorted(got) == sorted(expected)  # every account: rating, games, wins
        assert [g[0] for g in got] == sorted((g[0] for g in got), reverse=True)
        assert [e.place for e in board.entries] == list(range(1, len(expected) + 1))
