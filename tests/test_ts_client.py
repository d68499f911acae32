"""The TypeScript client (clients/ts, Connect's gRPC transport in Node) against a real server
on loopback: it plays a whole game from its views and decodes the ErrorInfo of a refused move,
over one Play stream (its default) and over unary calls with WatchTable (--transport unary);
the server's metrics show which of the two it used. `make test` builds it first (`make ts`);
without Node.js or the build this test fails."""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from pathlib import Path
from typing import Any

import grpc
import pytest
from copas.v1 import copas_pb2, copas_pb2_grpc

from server.errors import ERROR_DOMAIN
from server.tokens import pseudonym
from tests.helpers.servers import serving

ROOT = Path(__file__).resolve().parent.parent
PLAY = ROOT / "clients" / "ts" / "dist" / "play.js"
RULE_REASONS = {"MUST_FOLLOW_SUIT", "HEARTS_NOT_BROKEN", "NO_POINTS_ON_FIRST_TRICK",
                "MUST_LEAD_OPENING_CARD"}
ACTIONS = ("PassCards", "PlayCard", "ChooseMoon", "LeaveTable")


def served(running: Any, metric: str, methods: tuple[str, ...], code: str | None = None) -> int:
    """How many calls (copas_rpc_duration_seconds) or ended streams
    (copas_stream_duration_seconds) of ``methods`` the server counted, with ``code`` or any."""
    total = 0.0
    for family in running.metrics.registry.collect():
        for sample in family.samples:
            if sample.name == f"{metric}_count" and sample.labels["method"] in methods \
                    and code in (None, sample.labels["code"]):
                total += sample.value
    return int(total)


async def ended_streams(running: Any, method: str, expected: int) -> None:
    """Until the server has seen ``expected`` streams of ``method`` end (the client closed its
    connection: the server notices within moments), at most 10 s."""
    deadline = time.monotonic() + 10
    while served(running, "copas_stream_duration_seconds", (method,)) < expected \
            and time.monotonic() < deadline:
        await asyncio.sleep(0.02)


@pytest.mark.parametrize("transport", ["play", "unary"])
async def test_the_typescript_client_plays_a_game_and_reads_the_error_details(
        transport: str) -> None:
    node = shutil.which("node")
    assert node is not None, "Node.js is needed (see docs/CLIENTS.md: Other languages)"
    assert PLAY.is_file(), f"{PLAY} is missing: run `make ts`"
    chosen = [] if transport == "play" else ["--transport", "unary"]  # Play is the default
    async with serving(allow_seed=True) as (running, stub):
        process = await asyncio.create_subprocess_exec(
            node, str(PLAY), "--server", f"127.0.0.1:{running.port}", "--seed", "3", "--json",
            *chosen, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(process.communicate(), 60)
        assert process.returncode == 0, err.decode()
        summary = json.loads(out.decode().strip().splitlines()[-1])
        table = (await stub.GetTable(copas_pb2.GetTableRequest(
            table_id=summary["table_id"]))).table
        # Which transport the server saw (the client's own word is not enough): once the
        # stream the client used has ended, the other kind's count is final too.
        await ended_streams(running, "Play" if transport == "play" else "WatchTable", 1)
        play_streams = served(running, "copas_stream_duration_seconds", ("Play",))
        watch_streams = served(running, "copas_stream_duration_seconds", ("WatchTable",))
        actions_ok = served(running, "copas_rpc_duration_seconds", ACTIONS, "OK")
        actions_refused = served(running, "copas_rpc_duration_seconds", ACTIONS) - actions_ok
    assert table.phase == copas_pb2.PHASE_GAME_OVER
    assert table.seats[summary["seat"]].display_name == "TypeScript"
    assert summary["end_reason"] in ("HAND_LIMIT", "POINT_LIMIT")
    assert summary["moves"] >= 13 * summary["hands"]  # every card of every hand, and passes
    assert sorted(s["seat"] for s in summary["standings"]) == [0, 1, 2, 3]
    refused = summary["refused"]
    assert refused["code"] == "FAILED_PRECONDITION"
    assert refused["reason"] in RULE_REASONS and refused["domain"] == ERROR_DOMAIN
    assert refused["message"]
    assert summary["transport"] == transport
    if transport == "play":
        # One stream: every move and the refused one answered on it, no unary action call.
        assert (play_streams, watch_streams) == (1, 0)
        assert (actions_ok, actions_refused) == (0, 0)
        assert summary["results"] == summary["moves"] + 1
    else:
        # A unary call per move (and the refused one), the views from one WatchTable stream.
        assert (play_streams, watch_streams) == (0, 1)
        assert (actions_ok, actions_refused) == (summary["moves"], 1)
        assert summary["results"] is None


async def test_the_typescript_client_plays_as_a_guest_account() -> None:
    """--guest: the client signs in as a new guest (AccountService over gRPC), joins with its
    access token, and the seat, the game record and the account's history are the account's."""
    node = shutil.which("node")
    assert node is not None and PLAY.is_file(), f"{PLAY} is missing: run `make ts`"
    async with serving(allow_seed=True) as (running, stub):
        process = await asyncio.create_subprocess_exec(
            node, str(PLAY), "--server", f"127.0.0.1:{running.port}", "--seed", "3", "--json",
            "--guest", "--name", "Guesty", "--transport", "unary",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(process.communicate(), 60)
        assert process.returncode == 0, err.decode()
        assert "refresh" not in err.decode().lower() and "access" not in err.decode().lower()
        summary = json.loads(out.decode().strip().splitlines()[-1])
        account_id = summary["account_id"]
        assert account_id and account_id.startswith("a_")
        table = (await stub.GetTable(copas_pb2.GetTableRequest(
            table_id=summary["table_id"]))).table
        assert table.seats[summary["seat"]].display_name == "Guesty"
        record = (await stub.GetGameRecord(copas_pb2.GetGameRecordRequest(
            record_id=summary["table_id"]))).record
        seats = json.loads(record.record_json)["seats"]
        # The record names the account by this game's pseudonym of it, never by its id.
        assert seats[summary["seat"]]["player"] == pseudonym(summary["table_id"], account_id)
        assert account_id not in record.SerializeToString().decode("latin-1")


@pytest.mark.parametrize(("preset", "players"), [("bisca3", 2), ("pairs", 4)])
async def test_the_typescript_client_plays_bisca(preset: str, players: int) -> None:
    """--game bisca: a Bisca table of the preset's kind with bots (2 alone, 4 in
    partnerships), played whole over one Play stream; the forbidden move is a card of no
    40-card pack (INVALID_CARD) where every card in the hand is legal."""
    node = shutil.which("node")
    assert node is not None and PLAY.is_file(), f"{PLAY} is missing: run `make ts`"
    async with serving(allow_seed=True) as (running, stub):
        process = await asyncio.create_subprocess_exec(
            node, str(PLAY), "--server", f"127.0.0.1:{running.port}", "--seed", "5",
            "--json", "--game", "bisca", "--preset", preset,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(process.communicate(), 90)
        assert process.returncode == 0, err.decode()
        summary = json.loads(out.decode().strip().splitlines()[-1])
        table = (await stub.GetTable(copas_pb2.GetTableRequest(
            table_id=summary["table_id"]))).table
    assert table.rules.game == "bisca" and table.rules.players == players
    assert table.rules.bisca.partnerships == (players == 4)
    assert table.phase == copas_pb2.PHASE_GAME_OVER
    assert table.seats[summary["seat"]].display_name == "TypeScript"
    # Every card of every hand: 40 cards a hand, the client's share of them.
    assert summary["moves"] == 40 // players * summary["hands"]
    assert sorted(s["seat"] for s in summary["standings"]) == list(range(players))
    if players == 4:  # partners share their team's place
        places = {s["seat"]: s["place"] for s in summary["standings"]}
        assert places[0] == places[2] and places[1] == places[3]
    assert summary["refused"]["code"] in ("INVALID_ARGUMENT", "FAILED_PRECONDITION")
    assert summary["refused"]["reason"] in ("INVALID_CARD", "MUST_FOLLOW_SUIT")
    assert summary["results"] == summary["moves"] + 1


class CutPlayStreams(copas_pb2_grpc.CopasServiceServicer):
    """A server whose first Play stream ends INTERNAL (as grpcio reports a stream a drained
    node cut: "Internal error from Core"); the next one shows the game over."""

    def __init__(self) -> None:
        self.plays = 0
        self.tables = 0

    async def CreateTable(self, request: Any, context: Any) -> Any:
        return copas_pb2.CreateTableResponse(table=copas_pb2.TableSummary(table_id="t_cut"))

    async def JoinTable(self, request: Any, context: Any) -> Any:
        return copas_pb2.JoinTableResponse(seat=0, player_token="x" * 32, table=copas_pb2.
                                           TableSummary(table_id="t_cut"))

    async def GetTable(self, request: Any, context: Any) -> Any:
        self.tables += 1
        return copas_pb2.GetTableResponse(table=copas_pb2.TableSummary(table_id="t_cut"))

    async def Play(self, requests: Any, context: Any) -> Any:
        self.plays += 1
        await anext(aiter(requests))  # the opening
        if self.plays == 1:
            await context.abort(grpc.StatusCode.INTERNAL, "Internal error from Core")
        yield copas_pb2.PlayResponse(event=copas_pb2.TableEvent(
            sequence=1, snapshot=copas_pb2.Snapshot(),
            view=copas_pb2.TableView(seat=0, phase=copas_pb2.PHASE_GAME_OVER)))
        await asyncio.sleep(30)  # open until the client goes


async def test_the_typescript_client_resumes_a_play_stream_that_ends_internal() -> None:
    """Issue 27, finding 7e: INTERNAL on a Play stream counts as UNAVAILABLE: the client
    asks where the table is (GetTable) and opens a new stream, instead of failing."""
    node = shutil.which("node")
    assert node is not None and PLAY.is_file()
    fake = CutPlayStreams()
    server = grpc.aio.server()
    copas_pb2_grpc.add_CopasServiceServicer_to_server(fake, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        process = await asyncio.create_subprocess_exec(
            node, str(PLAY), "--server", f"127.0.0.1:{port}", "--json",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(process.communicate(), 60)
    finally:
        await server.stop(0)
    assert process.returncode == 0, err.decode()
    assert fake.plays == 2 and fake.tables >= 1
    assert json.loads(out.decode().strip().splitlines()[-1])["table_id"] == "t_cut"
