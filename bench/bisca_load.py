"""A load of Bisca games over the batched Play stream, speaking only the contract: ``--tables``
tables of two people (preset ``bisca3``, no clocks, no pauses) played at once, each seat on its
own batched Play stream choosing the first of its view's ``legal_cards``; a finished table is
followed by a new one until ``--duration`` seconds have passed. Prints one JSON line:
``{"moves": cards played, "games": games finished, "errors": refused actions}``.

(``copas loadtest`` plays Hearts; this is its Bisca counterpart for bench/seam_cost.py.)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator

import grpc
from copas.v1 import copas_pb2, copas_pb2_grpc


class Tally:
    def __init__(self) -> None:
        self.moves = self.games = self.errors = 0


async def play_seat(stub: copas_pb2_grpc.CopasServiceStub, table_id: str, token: str,
                    tally: Tally) -> None:
    """One seat to the end of its game, on a batched Play stream."""
    actions: asyncio.Queue[copas_pb2.PlayRequest | None] = asyncio.Queue()

    async def requests() -> AsyncIterator[copas_pb2.PlayRequest]:
        yield copas_pb2.PlayRequest(open=copas_pb2.WatchTableRequest(table_id=table_id,
                                                                     is_batched=True))
        while (action := await actions.get()) is not None:
            yield action

    call = stub.Play(requests(), metadata=(("authorization", f"Bearer {token}"),))
    view: copas_pb2.TableView | None = None
    is_waiting = False  # an action sent, its result not yet back
    async for response in call:
        batch = response.batch
        for event in batch.events:
            if event.HasField("view"):
                view = event.view
        for result in batch.results:
            is_waiting = False
            tally.errors += result.HasField("error")
        if view is None:
            continue
        if view.phase == copas_pb2.PHASE_GAME_OVER:
            break
        if not is_waiting and view.seat in view.to_act and view.legal_cards \
                and not view.HasField("paused_until"):
            is_waiting = True
            tally.moves += 1
            await actions.put(copas_pb2.PlayRequest(play_card=copas_pb2.PlayCardRequest(
                card=view.legal_cards[0])))
    await actions.put(None)
    call.cancel()


async def tables(address: str, count: int, duration: float) -> Tally:
    tally = Tally()
    deadline = time.monotonic() + duration
    # A connection per 20 tables (40 Play streams): the server takes at most 100 streams at
    # once on one connection (--max-concurrent-streams), as a client's library spreads them.
    channels = [grpc.aio.insecure_channel(address, options=[("grpc.use_local_subchannel_pool", 1)])
                for _ in range(max(1, -(-count // 20)))]
    try:
        async def one_after_another(stub: copas_pb2_grpc.CopasServiceStub) -> None:
            while time.monotonic() < deadline:
                table = (await stub.CreateTable(copas_pb2.CreateTableRequest(
                    game="bisca", preset="bisca3", display_name="bench",
                    rules=copas_pb2.RulesOverrides(play_timeout_seconds=0,
                                                   trick_pause_seconds=0,
                                                   hand_pause_seconds=0)))).table
                tokens = [(await stub.JoinTable(copas_pb2.JoinTableRequest(
                    table_id=table.table_id, display_name=f"B{n}",
                    request_id=uuid.uuid4().hex))).player_token for n in range(2)]
                await asyncio.gather(*(play_seat(stub, table.table_id, t, tally)
                                       for t in tokens))
                tally.games += 1

        await asyncio.gather(*(one_after_another(copas_pb2_grpc.CopasServiceStub(
            channels[n % len(channels)])) for n in range(count)))
    finally:
        for channel in channels:
            await channel.close()
    return tally


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", default="127.0.0.1:50051")
    parser.add_argument("--tables", type=int, default=50)
    parser.add_argument("--duration", type=float, default=20.0)
    args = parser.parse_args()
    tally = asyncio.run(tables(args.server, args.tables, args.duration))
    print(json.dumps({"moves": tally.moves, "games": tally.games, "errors": tally.errors}))


if __name__ == "__main__":
    main()
