"""A rating is earned by play (docs/RULES.md, "Rated games"): the farms tried from outside move
nobody's rating (guests who join and leave at once, guests who time out, a table of bots, the
accounts of one person from one network), while people who play rate each other. On a real
server on loopback, its clients told apart by x-forwarded-for from a trusted proxy."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from copas.v1 import accounts_pb2, accounts_pb2_grpc, copas_pb2, copas_pb2_grpc

from tests.helpers.calls import auth, play_out
from tests.helpers.servers import serving

FARM_GAMES = 10


def _from(address: str, token: str = "") -> tuple[tuple[str, str], ...]:
    return (("x-forwarded-for", address),) + (auth(token) if token else ())


@pytest.fixture
async def server() -> AsyncIterator[tuple[copas_pb2_grpc.CopasServiceStub,
                                          accounts_pb2_grpc.AccountServiceStub]]:
    # People of one network do not rate each other here (the server's default).
    async with serving(trusted_proxies="127.0.0.1", rate_one_network=False,
                       min_timeout=0.01) as (running, stub), \
            grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
        yield stub, accounts_pb2_grpc.AccountServiceStub(channel)


async def _guest(accounts: Any, name: str, address: str) -> Any:
    return (await accounts.SignInDevice(accounts_pb2.SignInDeviceRequest(
        device_secret=secrets.token_urlsafe(24), display_name=name),
        metadata=_from(address))).session


async def _table(stub: Any, *, bots: int = 0, play_timeout: float = 0.0,
                 rating: str = "") -> str:
    table = (await stub.CreateTable(copas_pb2.CreateTableRequest(
        preset="quick", bot_seats=bots, rating=rating, rules=copas_pb2.RulesOverrides(
            pass_timeout_seconds=play_timeout, play_timeout_seconds=play_timeout,
            moon_timeout_seconds=play_timeout, trick_pause_seconds=0,
            hand_pause_seconds=0)))).table
    return str(table.table_id)


async def _join(stub: Any, table_id: str, session: Any, address: str) -> str:
    return str((await stub.JoinTable(copas_pb2.JoinTableRequest(table_id=table_id),
                                     metadata=_from(address, session.access_token))
                ).player_token)


async def _recorded(accounts: Any, session: Any, games: int) -> Any:
    """The profile once its history holds ``games`` games (the intake takes a finished game
    within about a second)."""
    for _ in range(400):
        profile = await accounts.GetProfile(accounts_pb2.GetProfileRequest(),
                                            metadata=auth(session.access_token))
        if profile.games >= games:
            return profile
        await asyncio.sleep(0.05)
    raise AssertionError(f"{games} games never reached the history: {profile}")


async def _game_over(stub: Any, table_id: str) -> None:
    for _ in range(600):
        table = (await stub.GetTable(copas_pb2.GetTableRequest(table_id=table_id))).table
        if table.phase == copas_pb2.PHASE_GAME_OVER:
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the game never ended")


async def test_guests_who_join_and_leave_farm_nothing(server: Any) -> None:
    """One person with three guest accounts, each from its own address: the guests join and
    leave, the game ends at once (nobody played a card), ten times over."""
    stub, accounts = server
    main = await _guest(accounts, "Farmer", "198.51.100.1")
    for n in range(FARM_GAMES):
        table_id = await _table(stub)
        await _join(stub, table_id, main, "198.51.100.1")
        seated = []
        for k in range(3):
            address = f"198.51.100.{10 + k}"
            guest = await _guest(accounts, f"Alt {n} {k}", address)
            seated.append((address, await _join(stub, table_id, guest, address)))
        for address, token in seated:  # the game has started: each leaves it
            await stub.LeaveTable(copas_pb2.LeaveTableRequest(table_id=table_id),
                                  metadata=_from(address, token))
    profile = await _recorded(accounts, main, FARM_GAMES)
    assert profile.wins == FARM_GAMES  # the games are in the history, won...
    assert list(profile.ratings) == []  # ... and rated for nobody
    mine = await accounts.ListMyGames(accounts_pb2.ListMyGamesRequest(),
                                      metadata=auth(main.access_token))
    assert {g.is_rated for g in mine.games} == {False}
    board = await accounts.GetLeaderboard(accounts_pb2.GetLeaderboardRequest(players=4))
    assert list(board.entries) == []


async def test_guests_who_time_out_farm_nothing(server: Any) -> None:
    """The same farm, the guests never leaving but letting every turn time out: the main
    account plays all its cards, the guests none of theirs."""
    stub, accounts = server
    main = await _guest(accounts, "Patient", "198.51.100.2")
    table_id = await _table(stub, play_timeout=0.02)
    token = await _join(stub, table_id, main, "198.51.100.2")
    for k in range(3):
        address = f"198.51.100.{20 + k}"
        await _join(stub, table_id, await _guest(accounts, f"Sleeper {k}", address), address)
    await play_out(stub, table_id, {0: token})
    profile = await _recorded(accounts, main, 1)
    assert list(profile.ratings) == []
    record = (await stub.GetGameRecord(copas_pb2.GetGameRecordRequest(
        record_id=table_id))).record
    assert list(record.ratings) == []


@pytest.mark.parametrize("rating", ["", "with_bots"])
async def test_a_table_of_bots_rates_nobody(server: Any, rating: str) -> None:
    stub, accounts = server
    person = await _guest(accounts, f"Botfarmer {rating or 'default'}", "198.51.100.3")
    table_id = await _table(stub, bots=3, rating=rating)
    token = await _join(stub, table_id, person, "198.51.100.3")
    await play_out(stub, table_id, {0: token})
    profile = await _recorded(accounts, person, 1)
    assert list(profile.ratings) == []


async def test_accounts_of_one_network_rate_nobody_people_of_others_do(server: Any) -> None:
    """Three accounts of one device (one address) playing every card themselves move no
    rating; the same game by people of three addresses moves all three."""
    stub, accounts = server
    for addresses, is_rated in ((["203.0.113.7"] * 3, False),
                                (["203.0.113.8", "203.0.113.9", "203.0.113.10"], True)):
        people = [await _guest(accounts, f"Net {a} {n}", a) for n, a in enumerate(addresses)]
        table = (await stub.CreateTable(copas_pb2.CreateTableRequest(
            preset="quick", rules=copas_pb2.RulesOverrides(
                players=3, pass_timeout_seconds=0, play_timeout_seconds=0,
                moon_timeout_seconds=0, trick_pause_seconds=0, hand_pause_seconds=0)))).table
        tokens = {n: await _join(stub, table.table_id, p, a)
                  for n, (p, a) in enumerate(zip(people, addresses, strict=True))}
        await play_out(stub, table.table_id, tokens)
        profiles = [await _recorded(accounts, p, 1) for p in people]
        assert [len(p.ratings) for p in profiles] == [int(is_rated)] * 3, addresses
        record = (await stub.GetGameRecord(copas_pb2.GetGameRecordRequest(
            record_id=table.table_id))).record
        assert len(record.ratings) == (3 if is_rated else 0)


async def test_alts_that_play_seven_cards_and_leave_farm_nothing(server: Any) -> None:
    """The attacker's farm of the review: three alts play seven cards each (over half a hand)
    and leave, so the game ends at once with the main account first, from one address and
    from three /64s of one IPv6 /48."""
    stub, accounts = server
    for n, alts in enumerate((["192.0.2.50"] * 3,
                              [f"2001:db8:5:{k}::1" for k in (2, 3, 4)])):
        main = await _guest(accounts, f"Main {n}", f"198.51.100.{60 + n}")
        table_id = await _table(stub)
        tokens = {0: await _join(stub, table_id, main, f"198.51.100.{60 + n}")}
        for k, address in enumerate(alts, start=1):
            alt = await _guest(accounts, f"Alt {n}-{k}", address)
            tokens[k] = await _join(stub, table_id, alt, address)
        await play_out(stub, table_id, tokens,
                       stop=lambda view: view.trick_number >= 7 and not view.trick.cards)
        for k, address in enumerate(alts, start=1):
            await stub.LeaveTable(copas_pb2.LeaveTableRequest(table_id=table_id),
                                  metadata=_from(address, tokens[k]))
        profile = await _recorded(accounts, main, 1)
        assert profile.wins == 1 and list(profile.ratings) == []
