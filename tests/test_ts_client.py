"""The TypeScript client (clients/ts, Connect's gRPC transport in Node) against a real server
on loopback: it plays a whole game from its views and decodes the ErrorInfo of a refused move.
`make test` builds it first (`make ts`); without Node.js or the build this test fails."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

from copas.v1 import copas_pb2

from server.errors import ERROR_DOMAIN
from tests.helpers.servers import serving

ROOT = Path(__file__).resolve().parent.parent
PLAY = ROOT / "clients" / "ts" / "dist" / "play.js"
RULE_REASONS = {"MUST_FOLLOW_SUIT", "HEARTS_NOT_BROKEN", "NO_POINTS_ON_FIRST_TRICK",
                "MUST_LEAD_OPENING_CARD"}


async def test_the_typescript_client_plays_a_game_and_reads_the_error_details() -> None:
    node = shutil.which("node")
    assert node is not None, "Node.js is needed (see README: Other languages)"
    assert PLAY.is_file(), f"{PLAY} is missing: run `make ts`"
    async with serving(allow_seed=True) as (running, stub):
        process = await asyncio.create_subprocess_exec(
            node, str(PLAY), "--server", f"127.0.0.1:{running.port}", "--seed", "3", "--json",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(process.communicate(), 60)
        assert process.returncode == 0, err.decode()
        summary = json.loads(out.decode().strip().splitlines()[-1])
        table = (await stub.GetTable(copas_pb2.GetTableRequest(
            table_id=summary["table_id"]))).table
    assert table.phase == copas_pb2.PHASE_GAME_OVER
    assert table.seats[summary["seat"]].display_name == "TypeScript"
    assert summary["end_reason"] in ("HAND_LIMIT", "POINT_LIMIT")
    assert summary["moves"] >= 13 * summary["hands"]  # every card of every hand, and passes
    assert sorted(s["seat"] for s in summary["standings"]) == [0, 1, 2, 3]
    refused = summary["refused"]
    assert refused["code"] == "FAILED_PRECONDITION"
    assert refused["reason"] in RULE_REASONS and refused["domain"] == ERROR_DOMAIN
    assert refused["message"]
