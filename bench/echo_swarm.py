"""The baseline for `copas loadtest`: a bare grpc.aio echo server with the same shape.

T groups of P clients (each its own channel) take turns: a "move" is a unary call from the
player whose turn it is (or, with ``--shape play``, a message on the player's one
bidirectional stream, as Copas's Play); the server fans it out to the P open streams of the
group; the next player moves when its stream shows the previous move. Reports moves/s and
the p50/p99 move-to-view latency like the load test (`--json` for one JSON object).

Run the server with `python bench/echo_swarm.py serve --port N`, the swarm with
`python bench/echo_swarm.py swarm --server 127.0.0.1:N --tables T --duration S`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import struct
import sys
import time
from collections import defaultdict
from typing import Any

import grpc

SERVICE = "bench.Echo"


async def serve(port: int) -> None:
    groups: dict[bytes, list[asyncio.Queue[bytes]]] = defaultdict(list)

    async def say(request: bytes, context: Any) -> bytes:
        group, size = request[:8], struct.unpack("i", request[8:12])[0]
        # One message per player, of the size asked, stamped with the moment of the move.
        stamped = group + b"x" * max(0, size - 16) + struct.pack("d", time.time())
        for queue in groups[group]:
            queue.put_nowait(stamped)
        return b""

    async def listen(request: bytes, context: Any) -> Any:
        queue: asyncio.Queue[bytes] = asyncio.Queue()
        groups[request].append(queue)
        try:
            yield b"ready"
            while True:
                yield await queue.get()
        finally:
            groups[request].remove(queue)

    async def play(requests: Any, context: Any) -> Any:
        """One bidirectional stream per player: its moves in, the group's views out."""
        opening = await anext(aiter(requests))
        queue: asyncio.Queue[bytes] = asyncio.Queue()
        groups[opening].append(queue)

        async def moves() -> None:
            async for move in requests:
                stamped = opening + b"x" * max(0, struct.unpack("i", move[8:12])[0] - 16) \
                    + struct.pack("d", time.time())
                for member in groups[opening]:
                    member.put_nowait(stamped)

        reader = asyncio.get_running_loop().create_task(moves())
        try:
            await context.write(b"ready")
            while True:
                await context.write(await queue.get())
        finally:
            reader.cancel()
            groups[opening].remove(queue)

    server = grpc.aio.server(options=[("grpc.so_reuseport", 0),
                                      ("grpc.max_concurrent_streams", 20000),
                                      ("grpc.server.max_pending_requests", 100_000),
                                      ("grpc.server.max_pending_requests_hard_limit", 100_000)])
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, {
        "Say": grpc.unary_unary_rpc_method_handler(say),
        "Listen": grpc.unary_stream_rpc_method_handler(listen),
        "Play": grpc.stream_stream_rpc_method_handler(play)}),))
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    print(f"echo listening on 127.0.0.1:{port}", flush=True)
    await server.wait_for_termination()


async def group(server: str, index: int, players: int, deadline: float, size: int,
                out: dict[str, list[float]], shape: str = "unary",
                move_interval: float = 0.0) -> None:
    # A connection per player, like the load test's (channels would share one otherwise).
    channels = [grpc.aio.insecure_channel(server, options=[("grpc.use_local_subchannel_pool", 1)])
                for _ in range(players)]
    name = struct.pack("q", index)
    payload = name + struct.pack("i", size) + b"x" * 28  # about a PlayCard request
    if shape == "play":
        streams: list[Any] = [c.stream_stream(f"/{SERVICE}/Play")() for c in channels]
        for s in streams:
            await s.write(name)
    else:
        streams = [c.unary_stream(f"/{SERVICE}/Listen")(name) for c in channels]
        says = [c.unary_unary(f"/{SERVICE}/Say") for c in channels]
    for s in streams:
        await s.read()  # ready
    move = 0
    while time.time() < deadline:
        if move_interval:  # a human pace, as `copas loadtest --move-interval`
            await asyncio.sleep(move_interval)
        player = move % players
        start = time.perf_counter()
        if shape == "play":
            await streams[player].write(payload)
        else:
            await says[player](payload)
            out["play"].append(time.perf_counter() - start)
        for i, s in enumerate(streams):
            message = await s.read()
            if i != player:
                out["view"].append(time.time() - struct.unpack("d", message[-8:])[0])
        if shape == "play":
            out["play"].append(time.perf_counter() - start)  # until the mover sees it
        out["moves"].append(1.0)
        move += 1
    for s in streams:
        s.cancel()
    for c in channels:
        await c.close()


async def swarm_part(server: str, tables: range, players: int, deadline: float, size: int,
                     shape: str, move_interval: float = 0.0) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"play": [], "view": [], "moves": []}
    await asyncio.gather(*(group(server, i, players, deadline, size, out, shape, move_interval)
                           for i in tables))
    return out


def _child(server: str, tables: range, players: int, deadline: float, size: int,
           shape: str, move_interval: float, queue: Any) -> None:
    queue.put(asyncio.run(swarm_part(server, tables, players, deadline, size, shape,
                                     move_interval)))


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 3) if values \
        else 0.0


def swarm(args: argparse.Namespace) -> int:
    start = time.time()
    deadline = start + args.duration
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    parts = [range(p, args.tables, args.processes) for p in range(args.processes)]
    children = [ctx.Process(target=_child, args=(args.server, part, args.players, deadline,
                                                   args.message_bytes, args.shape,
                                                   args.move_interval, queue))
                for part in parts]
    for c in children:
        c.start()
    merged: dict[str, list[float]] = {"play": [], "view": [], "moves": []}
    for _ in children:
        part = queue.get()
        for key in merged:
            merged[key] += part[key]
    for c in children:
        c.join()
    elapsed = time.time() - start
    moves = len(merged["moves"])
    report = {"tables": args.tables, "shape": args.shape, "moves": moves,
              "moves_per_s": round(moves / elapsed, 1),
              "play_p50_ms": pct(merged["play"], .5), "play_p99_ms": pct(merged["play"], .99),
              "view_p50_ms": pct(merged["view"], .5), "view_p99_ms": pct(merged["view"], .99)}
    print(json.dumps(report) if args.json else report)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--port", type=int, default=50199)
    w = sub.add_parser("swarm")
    w.add_argument("--server", default="127.0.0.1:50199")
    w.add_argument("--tables", type=int, default=100)
    w.add_argument("--players", type=int, default=4)
    w.add_argument("--duration", type=float, default=20)
    w.add_argument("--processes", type=int, default=1)
    w.add_argument("--json", action="store_true")
    w.add_argument("--message-bytes", type=int, default=400,
                   help="size of each stream message (the view a player gets)")
    w.add_argument("--shape", choices=("unary", "play"), default="unary",
                   help="a move as a unary call plus a server stream per player, or as a "
                        "message on one bidirectional stream per player (Play)")
    w.add_argument("--move-interval", type=float, default=0.0,
                   help="seconds each table waits before each move (0: at once)")
    args = parser.parse_args()
    if args.command == "serve":
        asyncio.run(serve(args.port))
        return 0
    return swarm(args)


if __name__ == "__main__":
    sys.exit(main())
