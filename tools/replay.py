"""`copas replay RECORD`: re-run a finished game (of any game the server plays: the record
says which) through its engine, check that it gives the recorded result, and show it hand by hand.

RECORD is a record id on the server (GetGameRecord) or a path to a record's JSON file.
Exits 0 when the replay matches the record, 1 when it does not.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import grpc
from copas.v1 import copas_pb2, copas_pb2_grpc

from clients.common import Connection, add_server_arguments, channel, connection
from server import games
from server.games import GameModule


async def fetch(server: Connection, record_id: str) -> dict[str, Any]:
    async with channel(server) as ch:
        stub = copas_pb2_grpc.CopasServiceStub(ch)
        answer = await stub.GetGameRecord(copas_pb2.GetGameRecordRequest(record_id=record_id))
    data: dict[str, Any] = json.loads(answer.record.record_json)
    return data


def show(data: dict[str, Any], module: GameModule) -> None:
    names = {s["seat"]: s["name"] for s in data.get("seats", [])}
    for line in module.hand_lines(data):
        print(line)
    for leaver in data["result"]["leavers"]:
        print(f"{names.get(leaver['seat'], leaver['seat'])} left in hand "
              f"{leaver['hand_number'] + 1}, trick {leaver['trick_number'] + 1}")
    print("standings:")
    for row in data["result"]["standings"]:
        left = " (left)" if row["has_left"] else ""
        print(f"  {row['place']}. {names.get(row['seat'], 'seat ' + str(row['seat']))}"
              f"{left}: {row['total']}")


async def replay_main(args: argparse.Namespace) -> int:
    path = Path(args.record)
    try:
        if path.exists():
            data = json.loads(path.read_text())
        else:
            data = await fetch(connection(args), args.record)
    except grpc.aio.AioRpcError as error:
        print(f"copas replay: {error.code().name}: {error.details()}")
        return 1
    try:
        module = games.get(str(data.get("game") or ""))  # the record says which game it holds
    except KeyError:
        print(f"copas replay: the record holds a game this version does not know: "
              f"{data.get('game')!r} (it knows {', '.join(games.GAMES)})")
        return 1
    if not isinstance(data.get("result"), dict):
        print("copas replay: the record holds no result to check the replay against "
              "(a record from GetGameRecord's record_json has one)")
        return 1
    try:
        end = module.replay_record(data)  # raises when the result differs
    except ValueError as error:
        print(f"copas replay: MISMATCH: {error}")
        return 1
    show(data, module)
    print(f"replayed {len(data['actions'])} actions: the result matches the record ({end})")
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("record", help="a record id on the server, or a JSON file")
    add_server_arguments(parser)
