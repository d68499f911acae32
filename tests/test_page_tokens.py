"""Page tokens are opaque and parsed in one place: a token a client made by hand (a number that
is not finite, negative or huge, an id that is not one, another list's token, plain garbage)
is refused with INVALID_PAGE_TOKEN on every list, over gRPC and on the web port (HTTP 400,
never 500), and a token the server gave still pages on."""

from __future__ import annotations

import asyncio
import base64
import http.client
import json
import secrets
from pathlib import Path
from typing import Any

import grpc
import pytest
from copas.admin.v1 import admin_pb2, admin_pb2_grpc
from copas.v1 import (
    accounts_pb2,
    accounts_pb2_grpc,
    championships_pb2,
    championships_pb2_grpc,
    copas_pb2,
)

from clients.common import error_reason
from server.errors import ServiceError
from server.tables import paging
from tests.helpers.calls import auth
from tests.helpers.servers import free_port, serving

OPERATOR = "operator-0123456789-abcdefghij"


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode()


# What an attacker types instead of a token: the old format's number and text, JSON lists
# of the new one with bad numbers or ids, and garbage.
HAND_MADE = [
    _b64("nan|"), _b64("inf|"), _b64("-5|"), _b64("1e308|x"), _b64("3|../../etc"),
    _b64('["b",-5,""]'), _b64('["b",1e400,""]'), _b64('["b",2.5,""]'), _b64('["b",5,"x"]'),
    _b64('["r",1,"a b"]'), _b64('["r",true,""]'), _b64('["r",1]'), _b64('{"a":1}'),
    _b64("[" * 200 + "]" * 200), "@@", "%%%", "AAAA", _b64("\xff"),
]


def test_every_hand_made_token_is_refused_and_a_real_one_is_read_back() -> None:
    for listing in paging.Listing:
        for token in HAND_MADE:
            with pytest.raises(ServiceError) as caught:
                paging.decode(listing, token)
            assert caught.value.reason == "INVALID_PAGE_TOKEN", (listing, token)
        other = next(x for x in paging.Listing if x is not listing)
        with pytest.raises(ServiceError):  # a token of another list
            paging.decode(listing, paging.encode(other, (3, "")))
    assert paging.decode(paging.Listing.RECORDS,
                         paging.encode(paging.Listing.RECORDS, (1733.25, "r_x-1"))) \
        == (1733.25, "r_x-1")
    assert paging.decode_offset(paging.Listing.LEADERBOARD,
                                paging.offset_token(paging.Listing.LEADERBOARD, 150)) == 150


async def _reason(call: Any) -> str:
    try:
        await call
    except grpc.aio.AioRpcError as error:
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT, error
        return error_reason(error)
    return "OK"


def _web_status(port: int, path: str, body: dict[str, Any], token: str = "") -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("POST", path, json.dumps(body), {
            "content-type": "application/json",
            **({"authorization": f"Bearer {token}"} if token else {})})
        answer = connection.getresponse()
        answer.read()
        return answer.status
    finally:
        connection.close()


async def test_every_list_refuses_hand_made_tokens_over_grpc_and_the_web(tmp_path: Path) -> None:
    token_file = tmp_path / "admin-token"
    token_file.write_text(OPERATOR + "\n")
    web = free_port()
    async with serving(admin_token_file=str(token_file), web_port=web,
                       web_host="127.0.0.1") as (running, stub), \
            grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
        accounts = accounts_pb2_grpc.AccountServiceStub(channel)
        champs = championships_pb2_grpc.ChampionshipServiceStub(channel)
        admin = admin_pb2_grpc.AdminServiceStub(channel)
        me = (await accounts.SignInDevice(accounts_pb2.SignInDeviceRequest(
            device_secret=secrets.token_urlsafe(24), display_name="Paging"))).session
        mine = auth(me.access_token)
        calls = {
            "ListTables": lambda t: stub.ListTables(copas_pb2.ListTablesRequest(page_token=t)),
            "ListGameRecords": lambda t: stub.ListGameRecords(
                copas_pb2.ListGameRecordsRequest(page_token=t)),
            "GetLeaderboard": lambda t: accounts.GetLeaderboard(
                accounts_pb2.GetLeaderboardRequest(page_token=t)),
            "ListMyGames": lambda t: accounts.ListMyGames(
                accounts_pb2.ListMyGamesRequest(page_token=t), metadata=mine),
            "ListChampionships": lambda t: champs.ListChampionships(
                championships_pb2.ListChampionshipsRequest(page_token=t)),
            "admin ListTables": lambda t: admin.ListTables(
                admin_pb2.ListTablesRequest(page_token=t), metadata=auth(OPERATOR)),
        }
        for name, call in calls.items():
            for token in HAND_MADE:
                assert await _reason(call(token)) == "INVALID_PAGE_TOKEN", (name, token)
        # A leaderboard's token never shows a place before the first.
        board = await accounts.GetLeaderboard(accounts_pb2.GetLeaderboardRequest(
            page_token=paging.offset_token(paging.Listing.LEADERBOARD, 0)))
        assert all(e.place >= 1 for e in board.entries)
        # The web port answers the same refusals as 400s, never a 500.
        for path, body, bearer in (
                ("/copas.v1.CopasService/ListTables", {}, ""),
                ("/copas.v1.CopasService/ListGameRecords", {}, ""),
                ("/copas.v1.AccountService/GetLeaderboard", {}, ""),
                ("/copas.v1.AccountService/ListMyGames", {}, me.access_token),
                ("/copas.v1.ChampionshipService/ListChampionships", {}, "")):
            for token in HAND_MADE:
                status = await asyncio.to_thread(_web_status, web, path,
                                                 {**body, "pageToken": token}, bearer)
                assert status == 400, (path, token, status)
