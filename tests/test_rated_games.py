"""Accounts that come back, end to end: eight bot accounts of the reference client (`copas bot
--accounts`) play twenty rated games; every account's rating, and the leaderboard, equal the
ratings computed here from the game records alone, with the same library and the written
rule."""

from __future__ import annotations

import asyncio
import json
import random
from typing import Any

import grpc
import pytest
from copas.v1 import accounts_pb2, accounts_pb2_grpc, copas_pb2
from openskill.models import PlackettLuce

from clients.bots import account_secret
from tests.helpers.calls import auth
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
        sessions = {name: (await accounts.SignInDevice(accounts_pb2.SignInDeviceRequest(
            device_secret=account_secret("rated-games", name), display_name=name))).session
            for name in NAMES}  # the bots' own accounts (the same device secrets)
        for _ in range(400):  # the intake takes finished games within about a second
            profiles = [await accounts.GetProfile(accounts_pb2.GetProfileRequest(),
                                                  metadata=auth(s.access_token))
                        for s in sessions.values()]
            if sum(p.games for p in profiles) == 4 * GAMES:
                break
            await asyncio.sleep(0.05)
        board = await accounts.GetLeaderboard(accounts_pb2.GetLeaderboardRequest(
            players=4, page_size=100))
        # The same ratings, from the records alone, by docs/RULES.md's "Rated games" written
        # again here: oldest game first; everyone played every card (the bots of the
        # reference client play their own), so each seat is rated against the others, less
        # the provisional ones (fewer than 10 rated games) when it is established.
        model = PlackettLuce()
        ratings = {name: model.rating() for name in NAMES}
        played = {name: 0 for name in NAMES}
        won = {name: 0 for name in NAMES}
        for record in sorted(records, key=lambda r: (r.finish_time.ToMicroseconds(),
                                                     r.record_id)):
            full = (await stub.GetGameRecord(copas_pb2.GetGameRecordRequest(
                record_id=record.record_id))).record
            seats = json.loads(full.record_json)["seats"]
            assert all("account" not in s and s["player"].startswith("p_") for s in seats)
            assert all(s["own"] == s["cards"] == 13 for s in seats)  # they played
            names = {s.seat: s.display_name for s in full.seats}
            places = {s.seat: s.place for s in full.standings}
            after = {}
            for seat, name in names.items():
                is_established = played[name] >= 10
                group = [s for s in names if s == seat or not is_established
                         or played[names[s]] >= 10]
                if len(group) < 2:
                    continue
                teams = [[ratings[names[s]]] for s in group]
                rated = model.rate(teams, ranks=[float(places[s]) for s in group])
                after[name] = (rated[group.index(seat)][0], places[seat] == 1)
                moved = next(r for r in full.ratings if r.seat == seat)  # the record says so
                assert moved.mu_after == pytest.approx(after[name][0].mu)
                assert sorted(moved.opponents) == sorted(set(group) - {seat})
            for name, (rating, first) in after.items():
                ratings[name] = rating
                played[name] += 1
                won[name] += first
        shown = {n: round((r.mu - 3 * r.sigma) * 100) for n, r in ratings.items()}
        for session in sessions.values():  # every account's profile: exactly these
            profile = await accounts.GetProfile(accounts_pb2.GetProfileRequest(),
                                                metadata=auth(session.access_token))
            name = profile.account.display_name
            assert [(r.rating, r.games, r.wins, r.is_provisional) for r in profile.ratings] \
                == [(shown[name], played[name], won[name], played[name] < 10)]
        # The leaderboard lists the established ones only, in order.
        expected = sorted(((shown[n], played[n], won[n], n) for n in NAMES if played[n] >= 10),
                          key=lambda row: (-row[0], -row[1]))
        got = [(e.rating, e.games, e.wins, e.display_name) for e in board.entries]
        assert sorted(got) == sorted(expected)
        assert [g[0] for g in got] == sorted((g[0] for g in got), reverse=True)
        assert [e.place for e in board.entries] == list(range(1, len(expected) + 1))
