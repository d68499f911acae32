"""What one move costs end to end: a PlayCard plus the four stream messages that show it,
against a bare grpc.aio echo of the same shape (one unary call fanned out to four open
server streams), in the same process and the same run.

Prints per-move microseconds for both and ``move_vs_echo_ratio=<copas ÷ echo>``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from typing import Any

import grpc
from copas.v1 import cards_pb2, copas_pb2, copas_pb2_grpc

from engine import Game, Rules
from server.config import Config, unlimited
from server.main import shutdown, start
from server.observability import configure_logging

ECHO_SERVICE = "bench.Echo"


class EchoServer:
    """Bytes in, bytes out: the cheapest server with Copas's shape."""

    def __init__(self) -> None:
        self.listeners: list[asyncio.Queue[bytes]] = []

    async def say(self, request: bytes, context: Any) -> bytes:
        for queue in self.listeners:
            queue.put_nowait(request)
        return request

    async def listen(self, request: bytes, context: Any) -> Any:
        queue: asyncio.Queue[bytes] = asyncio.Queue()
        self.listeners.append(queue)
        try:
            while True:
                yield await queue.get()
        finally:
            self.listeners.remove(queue)


async def echo_moves(moves: int) -> float:
    impl = EchoServer()
    handler = grpc.method_handlers_generic_handler(ECHO_SERVICE, {
        "Say": grpc.unary_unary_rpc_method_handler(impl.say),
        "Listen": grpc.unary_stream_rpc_method_handler(impl.listen),
    })
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channels = [grpc.aio.insecure_channel(f"127.0.0.1:{port}") for _ in range(4)]
    streams = [c.unary_stream(f"/{ECHO_SERVICE}/Listen")(b"") for c in channels]
    says = [c.unary_unary(f"/{ECHO_SERVICE}/Say") for c in channels]
    while len(impl.listeners) < 4:
        await asyncio.sleep(0.01)
    payload = b"x" * 400  # about the size of a TableEvent with its view
    start_time = time.perf_counter()
    for i in range(moves):
        await says[i % 4](payload)
        for stream in streams:
            await stream.read()
    elapsed = time.perf_counter() - start_time
    for stream in streams:
        stream.cancel()
    for c in channels:
        await c.close()
    await server.stop(None)
    return elapsed / moves


async def copas_moves(moves: int, data_dir: str) -> float:
    running = await start(unlimited(Config(listen="127.0.0.1:0", metrics_port=0, web_port=0,
                                           allow_seed=True, data_dir=data_dir)))
    channels = [grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") for _ in range(4)]
    stubs = [copas_pb2_grpc.CopasServiceStub(c) for c in channels]
    zero = {"trick_pause_seconds": 0.0, "hand_pause_seconds": 0.0, "play_timeout_seconds": 0.0,
            "pass_timeout_seconds": 0.0, "moon_timeout_seconds": 0.0, "max_hands": 0,
            "point_limit": 1000}
    timed = 0.0
    done = 0
    game_number = 0
    while done < moves:
        game_number += 1
        seed = str(game_number)
        table = (await stubs[0].CreateTable(copas_pb2.CreateTableRequest(
            seed=seed, rules=copas_pb2.RulesOverrides(**zero)))).table
        rules = Rules(max_hands=0, point_limit=1000, trick_pause=0, hand_pause=0,
                      play_timeout=0, pass_timeout=0, moon_timeout=0)
        replica = Game(rules, seed)
        tokens = []
        for s in range(4):
            join = await stubs[s].JoinTable(copas_pb2.JoinTableRequest(
                table_id=table.table_id, display_name=f"P{s}"))
            tokens.append((("authorization", f"Bearer {join.player_token}"),))
        streams = [stubs[s].WatchTable(copas_pb2.WatchTableRequest(table_id=table.table_id),
                                       metadata=tokens[s]) for s in range(4)]
        for stream in streams:
            await stream.read()  # snapshot
        for _ in range(200):  # about four hands per table
            seat = replica.to_act()[0]
            action = replica.auto_action(seat)
            is_play = replica.phase.value == "PLAYING"
            start_time = time.perf_counter()
            if is_play:
                card = action.card  # type: ignore[union-attr]
                answer = await stubs[seat].PlayCard(copas_pb2.PlayCardRequest(
                    table_id=table.table_id, card=cards_pb2.Card(text=str(card))),
                    metadata=tokens[seat])
            else:
                answer = await stubs[seat].PassCards(copas_pb2.PassCardsRequest(
                    table_id=table.table_id,
                    cards=[cards_pb2.Card(text=str(c))
                           for c in action.cards]),  # type: ignore[union-attr]
                    metadata=tokens[seat])
            last = answer.sequence + len(replica.apply(action)) - 1
            for stream in streams:  # every event of the move reaches every player
                while (await stream.read()).event.sequence < last:
                    pass
            if is_play:
                timed += time.perf_counter() - start_time
                done += 1
            if done >= moves:
                break
        for stream in streams:
            stream.cancel()
    for c in channels:
        await c.close()
    await shutdown(running, 0)
    return timed / moves


async def run(moves: int, rounds: int) -> int:
    """The move alone (in-memory store) and the move made durable (SQLite, one fsync per
    move here: a single table gives the group commit nothing to group)."""
    memory, durable, echo = [], [], []
    for _ in range(rounds):  # alternate so all see the same machine noise
        echo.append(await echo_moves(moves))
        memory.append(await copas_moves(moves, "memory"))
        with tempfile.TemporaryDirectory() as data_dir:
            durable.append(await copas_moves(moves, data_dir))

    def show(name: str, values: list[float]) -> float:
        median = statistics.median(values)
        rounds_text = ", ".join(f"{x * 1e6:.0f}" for x in values)
        print(f"{name}_us_per_move={median * 1e6:.0f}  (rounds: {rounds_text})")
        return median

    e, m, d = show("echo", echo), show("copas", memory), show("copas_durable", durable)
    print(f"durable_move_vs_echo_ratio={d / e:.2f}")
    print(f"move_vs_echo_ratio={m / e:.2f}")
    return 0


def main() -> int:
    # The server logs as in production (JSON, one line per RPC and per game event), to a sink.
    configure_logging("json", "info", open(os.devnull, "w"))  # noqa: SIM115
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--moves", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    return asyncio.run(run(args.moves, args.rounds))


if __name__ == "__main__":
    sys.exit(main())
