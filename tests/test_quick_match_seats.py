"""Quick match seats people, not joins (issue 27, finding 3), over gRPC on loopback: one
client (its account when signed in, else its address, here through the trusted loopback
proxy) holds one seat of a quick-match table, and a seat is a reservation that goes back
unless a stream takes it up in time."""

from __future__ import annotations

import asyncio
import secrets

import grpc
import pytest
from copas.v1 import accounts_pb2, accounts_pb2_grpc, copas_pb2

from tests.helpers.calls import Watch, auth, quota_details
from tests.helpers.servers import serving

BAIT = "192.0.2.66"


def as_client(address: str, token: str | None = None) -> tuple[tuple[str, str], ...]:
    return (("x-forwarded-for", address),) + (auth(token) if token else ())


def quick(name: str) -> copas_pb2.JoinTableRequest:
    return copas_pb2.JoinTableRequest(preset="quick", display_name=name)


async def refusal(call: object) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await call  # type: ignore[misc]
    return refused.value.code(), quota_details(refused.value)[0]


async def test_three_quick_matches_from_one_address_get_one_seat() -> None:
    """The 2nd and 3rd are refused (ALREADY_SEATED): a seat comes with a token, and a token
    is only ever given once."""
    async with serving(trusted_proxies="127.0.0.1", quick_match_seats_per_client=1) as (_, stub):
        first = await stub.JoinTable(quick("Bait"), metadata=as_client(BAIT))
        for _ in range(2):
            assert await refusal(stub.JoinTable(quick("Bait"), metadata=as_client(BAIT))) == \
                (grpc.StatusCode.FAILED_PRECONDITION, "ALREADY_SEATED")
        table = (await stub.GetTable(copas_pb2.GetTableRequest(
            table_id=first.table.table_id))).table
        assert sum(s.is_taken for s in table.seats) == 1
        honest = await stub.JoinTable(quick("Ann"), metadata=as_client("198.51.100.1"))
        assert honest.table.table_id == first.table.table_id


async def test_a_lobby_watching_baiters_joins_fill_at_most_one_seat() -> None:
    async with serving(trusted_proxies="127.0.0.1", quick_match_seats_per_client=1) as (_, stub):
        lobby = stub.WatchLobby(copas_pb2.WatchLobbyRequest(preset="quick"),
                                metadata=as_client(BAIT))
        honest = await stub.JoinTable(quick("Ann"), metadata=as_client("198.51.100.1"))
        table_id = honest.table.table_id
        async for message in lobby:  # the baiter sees the honest player's table appear
            if any(t.table_id == table_id for t in message.snapshot.tables) or \
                    message.table_added.table_id == table_id:
                break
        lobby.cancel()
        seated = refused = 0
        for _ in range(3):
            try:
                await stub.JoinTable(copas_pb2.JoinTableRequest(
                    table_id=table_id, display_name="Bait"), metadata=as_client(BAIT))
                seated += 1
            except grpc.aio.AioRpcError as error:
                assert quota_details(error)[0] == "ALREADY_SEATED"
                refused += 1
        assert (seated, refused) == (1, 2)
        table = (await stub.GetTable(copas_pb2.GetTableRequest(table_id=table_id))).table
        assert sum(s.is_taken for s in table.seats) == 2  # Ann and one bait


async def test_a_reservation_never_taken_up_goes_back_and_the_table_does_not_start() -> None:
    async with serving(trusted_proxies="127.0.0.1", reservation_seconds=0.3) as (_, stub):
        joins = [await stub.JoinTable(quick(f"P{i}"), metadata=as_client(f"198.51.100.{i}"))
                 for i in range(4)]
        table_id = joins[0].table.table_id
        assert {j.table.table_id for j in joins} == {table_id}
        watches = [Watch(stub, table_id, j.player_token) for j in joins[:3]]  # the 4th: never
        spectator = Watch(stub, table_id)
        left = await spectator.wait_for(lambda m: m.WhichOneof("kind") == "player_left")
        assert left.player_left.seat == joins[3].seat
        table = (await stub.GetTable(copas_pb2.GetTableRequest(table_id=table_id))).table
        assert table.phase == copas_pb2.PHASE_WAITING_FOR_PLAYERS
        assert sum(s.is_taken for s in table.seats) == 3
        assert await refusal(stub.GetView(copas_pb2.GetViewRequest(table_id=table_id),
                                          metadata=auth(joins[3].player_token))) == \
            (grpc.StatusCode.UNAUTHENTICATED, "RESERVATION_EXPIRED")
        await asyncio.sleep(0.5)  # the three who connected keep their seats
        table = (await stub.GetTable(copas_pb2.GetTableRequest(table_id=table_id))).table
        assert sum(s.is_taken for s in table.seats) == 3
        late = await stub.JoinTable(quick("Late"), metadata=as_client("203.0.113.9"))
        assert late.table.table_id == table_id
        watches.append(Watch(stub, table_id, late.player_token))
        await spectator.wait_for(lambda m: m.WhichOneof("kind") == "game_started")
        for watch in (*watches, spectator):
            await watch.close()


async def _guest(port: int, name: str, address: str) -> str:
    """A new guest account's access token, signed in from ``address``."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        session = (await accounts_pb2_grpc.AccountServiceStub(channel).SignInDevice(
            accounts_pb2.SignInDeviceRequest(device_secret=secrets.token_urlsafe(24),
                                             display_name=name),
            metadata=as_client(address))).session
    return str(session.access_token)


async def test_a_signed_in_account_holds_one_seat_from_any_address() -> None:
    """The account is the client: from a second address it is still seated (by table id:
    ACCOUNT_ALREADY_SEATED; a quick match seats it at another table)."""
    async with serving(trusted_proxies="127.0.0.1", quick_match_seats_per_client=1) as (
            running, stub):
        token = await _guest(running.port, "Ana", "198.51.100.1")
        first = await stub.JoinTable(quick(""), metadata=as_client("198.51.100.1", token))
        table_id = first.table.table_id
        assert await refusal(stub.JoinTable(
            copas_pb2.JoinTableRequest(table_id=table_id),
            metadata=as_client("203.0.113.7", token))) == \
            (grpc.StatusCode.FAILED_PRECONDITION, "ACCOUNT_ALREADY_SEATED")
        elsewhere = await stub.JoinTable(quick(""), metadata=as_client("203.0.113.7", token))
        assert elsewhere.table.table_id != table_id
        table = (await stub.GetTable(copas_pb2.GetTableRequest(table_id=table_id))).table
        assert sum(s.is_taken for s in table.seats) == 1


async def test_accounts_behind_one_address_each_hold_a_seat_and_its_anonymous_one() -> None:
    """People behind one address (a household's, a campus's NAT) sit together when each is
    signed in; anonymous, that address holds one seat (docs/OPERATING.md)."""
    async with serving(trusted_proxies="127.0.0.1", quick_match_seats_per_client=1) as (
            running, stub):
        tokens = [await _guest(running.port, name, BAIT) for name in ("Ana", "Bia")]
        joins = [await stub.JoinTable(quick(""), metadata=as_client(BAIT, token))
                 for token in tokens]
        table_id = joins[0].table.table_id
        assert joins[1].table.table_id == table_id and joins[0].seat != joins[1].seat
        anonymous = await stub.JoinTable(quick("Cai"), metadata=as_client(BAIT))
        assert anonymous.table.table_id == table_id
        assert await refusal(stub.JoinTable(quick("Cai"), metadata=as_client(BAIT))) == \
            (grpc.StatusCode.FAILED_PRECONDITION, "ALREADY_SEATED")
        table = (await stub.GetTable(copas_pb2.GetTableRequest(table_id=table_id))).table
        assert sum(s.is_taken for s in table.seats) == 3
