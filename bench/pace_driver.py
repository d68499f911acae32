"""The Python side of `bench/peers.py --pace`: T tables at a human pace against Copas (the
bots of `copas loadtest --move-interval`) or against the bare grpc.aio Play echo
(`bench/echo_swarm.py`'s groups), counted only over a steady window.

Each table starts at a seeded random moment within the first interval (so the tables' moves
spread over it instead of arriving together), then a seat waits the interval before each of
its moves, as `copas loadtest --move-interval` does. Cards played between ``--window-start``
and ``--window-end`` (epoch seconds; without them, a line ``start end stop`` on stdin tells
them) count; so do the move-to-view latencies (a card to another seat's stream showing it,
from the server's stamp of it) seen in that window. The run stops at ``--stop``. Prints one
JSON line: the moves in the window, their latencies (ms), the errors and the moves of the
whole run.

Run by bench/peers.py, a process per share of the tables (their CPU is not the server's).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

MESSAGE_BYTES = 350  # as bench/cpu_per_move.py: Copas's average message, per seat and move


async def told(args: argparse.Namespace) -> None:
    """The window's edges and the stop: from the command line, or else one line on stdin
    (bench/peers.py tells them once every player is connected)."""
    if args.window_start:
        return
    line = await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    if not line.strip():
        raise SystemExit("stdin closed before the window was told")
    args.window_start, args.window_end, args.stop = map(float, line.split())


async def windowed(args: argparse.Namespace, slot: Callable[[int], Awaitable[None]],
                   moves: Callable[[], int], latencies: list[float],
                   errors: Callable[[], int]) -> dict[str, Any]:
    """Run the table slots, each from a seeded random start, read the counters at the
    window's edges, and stop them all at the stop."""
    loop = asyncio.get_running_loop()
    stopping = [False]

    def quiet_after_stop(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if not stopping[0]:  # a stream cut by the stop itself is no news
            loop.default_exception_handler(context)

    loop.set_exception_handler(quiet_after_stop)
    chance = random.Random(args.seed)
    offsets = [chance.uniform(0, args.move_interval) for _ in range(args.tables)]

    async def started(i: int) -> None:
        await asyncio.sleep(offsets[i])
        await slot(args.first_slot + i)

    tables = [asyncio.create_task(started(i)) for i in range(args.tables)]
    await told(args)
    await asyncio.sleep(max(0.0, args.window_start - time.time()))
    first_move, first_view = moves(), len(latencies)
    await asyncio.sleep(max(0.0, args.window_end - time.time()))
    last_move, last_view = moves(), len(latencies)
    await asyncio.sleep(max(0.0, args.stop - time.time()))
    stopping[0] = True
    for table in tables:
        table.cancel()
    await asyncio.gather(*tables, return_exceptions=True)
    return {"moves": last_move - first_move, "errors": errors(),
            "view_ms": [round(v * 1000, 3) for v in latencies[first_view:last_view]],
            "run_moves": moves()}


async def copas(args: argparse.Namespace) -> dict[str, Any]:
    import multiprocessing

    from clients import loadtest
    from clients.bots import POLICY_SETUP
    from clients.common import Connection

    for setup in POLICY_SETUP:
        setup()
    plan = loadtest.Plan(Connection(args.server), args.tables, 4, "online", "greedy",
                         0.0, 0, move_interval=args.move_interval, transport="play")
    results = loadtest.Results()
    counters = loadtest.Counters(multiprocessing.get_context("spawn"))
    budget = [0]
    return await windowed(args, lambda i: loadtest.run_table_slot(plan, i, results, counters,
                                                                  budget),
                          lambda: results.moves, results.view_latency,
                          lambda: sum(results.errors.values()))


async def echo(args: argparse.Namespace) -> dict[str, Any]:
    from echo_swarm import group

    out: dict[str, list[float]] = {"play": [], "view": [], "moves": []}
    return await windowed(args, lambda i: group(args.server, i, 4, float("inf"), MESSAGE_BYTES,
                                                out, "play", args.move_interval),
                          lambda: len(out["moves"]), out["view"], lambda: 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("server_kind", choices=("copas", "echo"))
    parser.add_argument("--server", required=True, help="host:port")
    parser.add_argument("--tables", type=int, required=True)
    parser.add_argument("--first-slot", type=int, default=0, help="this process's first table")
    parser.add_argument("--move-interval", type=float, default=2.0)
    parser.add_argument("--window-start", type=float, default=0.0,
                        help="epoch seconds (0: read 'start end stop' from stdin)")
    parser.add_argument("--window-end", type=float, default=0.0)
    parser.add_argument("--stop", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    run = copas if args.server_kind == "copas" else echo
    print(json.dumps(asyncio.run(run(args))), flush=True)


if __name__ == "__main__":
    main()
