"""A flooding client, run as its own process (``python -m tests.helpers.flood``) so that its
work does not share the test's event loop: ``calls`` concurrent ListTables over
``connections`` connections for ``seconds`` (optionally as the address ``--as``, through a
trusted proxy). Prints one JSON line: answers by status code."""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import sys
import time

import grpc
from copas.v1 import copas_pb2, copas_pb2_grpc


async def flood(target: str, calls: int, connections: int, seconds: float, client: str
                ) -> dict[str, int]:
    channels = [grpc.aio.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)])
                for _ in range(connections)]
    stubs = [copas_pb2_grpc.CopasServiceStub(c) for c in channels]
    metadata = (("x-forwarded-for", client),) if client else None
    codes: collections.Counter[str] = collections.Counter()
    seen: dict[str, str] = {}
    end = time.monotonic() + seconds

    async def one(i: int) -> None:
        stub = stubs[i % connections]
        while time.monotonic() < end:
            try:
                await stub.ListTables(copas_pb2.ListTablesRequest(), metadata=metadata,
                                      timeout=10)
                codes["OK"] += 1
            except grpc.aio.AioRpcError as error:
                codes[error.code().name] += 1
                if error.code() == grpc.StatusCode.UNAVAILABLE and "UNAVAILABLE" not in seen:
                    seen["UNAVAILABLE"] = error.details() or ""

    await asyncio.gather(*(one(i) for i in range(calls)))
    for channel in channels:
        await channel.close()
    print(f"first UNAVAILABLE: {seen.get('UNAVAILABLE', 'none')}", file=sys.stderr)
    return dict(codes)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("target")
    parser.add_argument("--calls", type=int, default=2048)
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--as", dest="client", default="")
    args = parser.parse_args()
    print("flooding", flush=True)
    codes = asyncio.run(flood(args.target, args.calls, args.connections, args.seconds,
                              args.client))
    print(json.dumps(codes), flush=True)


if __name__ == "__main__":
    main()
