"""Bisca's tables survive as Hearts's do (issue 41): kill -9 of the server mid-hand and a
restart on the same data directory lose nothing acknowledged (a retried request is not
applied twice), and on two nodes sharing one PostgreSQL, a kill -9 of a Bisca table's owner
mid-hand lets the other node take the table over, with the same tokens; each game's record
equals an uninterrupted run of the same actions."""

from __future__ import annotations

import asyncio
import json
import random
import time
from pathlib import Path
from typing import Any

import grpc
from copas.v1 import copas_pb2, copas_pb2_grpc

from engine.bisca import PlayCard, action_to_json, result_of
from engine.bisca import record as bisca_record
from tests.helpers.bisca_play import (
    Oracle,
    card_pb,
    new_bisca_table,
    play_unary,
    replica_of,
    retried,
)
from tests.helpers.calls import Watch, auth, join_all
from tests.helpers.servers import ServerProcess, config_for_tests, free_port, fresh_database

LEASE = 2.0  # seconds: short, so that the takeover happens within the test
_FLAGS = ("--allow-seed", "--trick-pause", "0", "--hand-pause", "0", "--play-timeout", "0",
          "--log-format", "json", "--unlimited-quotas", "--bot-table-pace", "0.001",
          "--bot-policy", "auto", "--bot-workers", "0", "--spectator-tick", "0")


def _durable(data_dir: Path, port: int) -> ServerProcess:
    options = config_for_tests(data_dir=str(data_dir))
    store = ("--database", options.database, "--node-id", options.node_id) \
        if options.database else ()
    return ServerProcess(*_FLAGS, "--data-dir", str(data_dir), *store, port=port,
                         log_dir=data_dir)


def _mid_hand(game: Any) -> bool:
    return game.hand_number == 0 and game.trick_number == 3 and len(game.trick_cards) == 1


async def _finish_and_check(stub: copas_pb2_grpc.CopasServiceStub, table_id: str,
                            tokens: dict[int, str], oracle: Oracle, after: int,
                            rng: random.Random) -> None:
    """Reconnect every seat by sequence, play on to the end, and compare the record."""
    watches = {s: Watch(stub, table_id, t, after_sequence=after,
                        check=lambda m, s=s: oracle.check(s, m)) for s, t in tokens.items()}
    head = await watches[0].wait_for(lambda m: True, timeout=30)
    assert head.WhichOneof("kind") == "snapshot" and head.sequence >= after
    assert len(head.view.trick.cards) == 1 and head.view.trick_number == 3  # nothing lost
    await play_unary(stub, table_id, tokens, watches, oracle, rng)
    record = await retried(lambda: stub.GetGameRecord(
        copas_pb2.GetGameRecordRequest(record_id=table_id), timeout=15))
    data = json.loads(record.record.record_json)
    game = oracle.replica
    assert data["game"] == "bisca" and data["actions"] == [action_to_json(a)
                                                           for a in game.actions]
    assert data["result"] == result_of(game) == result_of(bisca_record.replay(data))
    for watch in watches.values():
        await watch.close()


async def test_kill_9_mid_hand_and_a_restart_lose_nothing_acknowledged(tmp_path: Path) -> None:
    port = free_port()
    server = _durable(tmp_path, port)
    try:
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        stub = copas_pb2_grpc.CopasServiceStub(channel)
        table = await new_bisca_table(stub, preset="bisca7", seed="21")
        tokens = {j.seat: j.player_token for j in await join_all(stub, table.table_id, 2)}
        oracle = Oracle(replica_of(table, "21"))
        watches = {s: Watch(stub, table.table_id, t) for s, t in tokens.items()}
        rng = random.Random(21)
        answers: list[copas_pb2.PlayCardResponse] = []
        await play_unary(stub, table.table_id, tokens, watches, oracle, rng, stop=_mid_hand,
                         answers=answers)
        acknowledged = answers[-1].sequence
        last = oracle.replica.actions[-1]
        assert isinstance(last, PlayCard)
        for watch in watches.values():
            await watch.close()
        server.kill9()
        await channel.close()

        server = _durable(tmp_path, port)  # the same data directory
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        stub = copas_pb2_grpc.CopasServiceStub(channel)
        again = await stub.PlayCard(copas_pb2.PlayCardRequest(  # the last call, retried
            table_id=table.table_id, card=card_pb(last.card),
            request_id=f"bisca-{len(oracle.replica.actions) - 1}"),
            metadata=auth(tokens[last.seat]), timeout=15)
        assert again.sequence == answers[-1].sequence  # the first answer, not a second card
        await _finish_and_check(stub, table.table_id, tokens, oracle, acknowledged, rng)
        await channel.close()
    finally:
        server.stop()


async def _until_served(stub: copas_pb2_grpc.CopasServiceStub, table_id: str,
                        timeout: float) -> None:
    """GetTable until the table answers (it moves to a live node)."""
    began = time.monotonic()
    while True:
        try:
            await stub.GetTable(copas_pb2.GetTableRequest(table_id=table_id), timeout=10)
            return
        except grpc.aio.AioRpcError as error:
            assert error.code() == grpc.StatusCode.UNAVAILABLE, error
            assert time.monotonic() - began < timeout, "the table never moved"
            await asyncio.sleep(0.1)  # the takeover has no event to await from outside


async def test_a_takeover_on_two_nodes_mid_hand(postgres: Any, tmp_path: Path) -> None:
    dsn = fresh_database(postgres.dsn)
    nodes = {name: ServerProcess(*_FLAGS, "--database", dsn, "--node-id", name, "--lease",
                                 str(LEASE), log_dir=tmp_path) for name in ("a", "b")}
    channels = {name: grpc.aio.insecure_channel(n.address) for name, n in nodes.items()}
    stubs = {name: copas_pb2_grpc.CopasServiceStub(c) for name, c in channels.items()}
    try:
        table = await new_bisca_table(stubs["a"], preset="pairs", seed="31")
        busy = await new_bisca_table(stubs["a"], preset="four", seed="32", bots=4, target=50)
        tokens = {j.seat: j.player_token for j in await join_all(stubs["b"], table.table_id, 4)}
        oracle = Oracle(replica_of(table, "31"))
        watches = {s: Watch(stubs["a"], table.table_id, t) for s, t in tokens.items()}
        rng = random.Random(31)
        answers: list[copas_pb2.PlayCardResponse] = []
        await play_unary(stubs["a"], table.table_id, tokens, watches, oracle, rng,
                         stop=_mid_hand, answers=answers)
        for watch in watches.values():
            await watch.close()
        nodes["a"].kill9()
        await _until_served(stubs["b"], table.table_id, timeout=LEASE * 3 + 20)
        await _finish_and_check(stubs["b"], table.table_id, tokens, oracle,
                                answers[-1].sequence, rng)
        await _until_served(stubs["b"], busy.table_id, timeout=LEASE * 3 + 20)
    finally:
        for channel in channels.values():
            await channel.close()
        for node in nodes.values():
            node.stop()
    assert "taken_over" in (nodes["b"].log())
