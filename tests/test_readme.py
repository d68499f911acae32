"""The README's grpcurl walk-through plays a whole game: each of its lines is replayed here
(its method, its `-d` payload and its `-H` metadata, with the shell's variables and the
`play` function expanded) against a server started as the README says."""

from __future__ import annotations

import re
import shlex
from typing import Any

import grpc
from copas.v1 import accounts_pb2, accounts_pb2_grpc, copas_pb2
from google.protobuf import json_format

from tests.helpers.readme import expand, grpcurl_call, walk_through
from tests.helpers.readme import find as _find
from tests.helpers.servers import serving

MARK = "<!-- walk-through: tests/test_readme.py replays these lines -->"


async def test_the_readme_walk_through_plays_a_game_to_the_end() -> None:
    lines = walk_through(MARK)
    assert any(line.startswith("play ") for line in lines)
    async with serving(allow_seed=True) as (running, stub), grpc.aio.insecure_channel(
            f"127.0.0.1:{running.port}") as channel:
        stubs = {"CopasService": (stub, copas_pb2),
                 "AccountService": (accounts_pb2_grpc.AccountServiceStub(channel), accounts_pb2)}
        env: dict[str, str] = {}
        play_template = ""
        last: Any = None
        for line in lines:
            assign = re.match(r"(\w+)=\$\((.*)\)$", line)
            if line.startswith("play() {"):
                play_template = line.split("{", 1)[1].rsplit(";", 1)[0].strip()
                continue
            if line.startswith("play "):
                command = play_template.replace("$1", line.split()[1])
            elif assign:
                command = assign.group(2).split(" | ", 1)[0]
            else:
                command = line
            words = shlex.split(expand(command, env))
            assert words[0] == "grpcurl" and "-plaintext" in words
            if words[-1] == "list":
                continue
            service, method, payload, metadata = grpcurl_call(words)
            called, messages = stubs[service]
            request = getattr(messages, f"{method}Request")()
            json_format.ParseDict(payload, request)
            last = await getattr(called, method)(request, metadata=metadata or None)
            if assign:  # what the shell extracts with sed from grpcurl's JSON
                answer = json_format.MessageToDict(last)
                sed = assign.group(2).split(" | ", 1)[1]
                field = re.search(r'"(\w+)": ', sed).group(1)  # type: ignore[union-attr]
                env[assign.group(1)] = _find(answer, field)
        assert isinstance(last, copas_pb2.GetViewResponse)
        assert last.view.phase == copas_pb2.PHASE_GAME_OVER and len(last.view.standings) == 4
        assert last.view.players[0].display_name == "Ana"  # the account's name, from sign-in
