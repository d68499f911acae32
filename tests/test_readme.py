"""The README's grpcurl walk-through plays a whole game: each of its lines is replayed here
(its method, its `-d` payload and its `-H` metadata, with the shell's variables and the
`play` function expanded) against a server started as the README says."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import grpc
from copas.v1 import accounts_pb2, accounts_pb2_grpc, copas_pb2
from google.protobuf import json_format

from tests.helpers.servers import serving

ROOT = Path(__file__).resolve().parent.parent
MARK = "<!-- walk-through: tests/test_readme.py replays these lines -->"


def walk_through() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = text.split(MARK, 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def grpcurl_call(words: list[str]) -> tuple[str, str, dict[str, Any], list[tuple[str, str]]]:
    """(service, method, request JSON, metadata) of one grpcurl command line."""
    payload: dict[str, Any] = {}
    metadata = []
    service = method = ""
    i = 0
    while i < len(words):
        word = words[i]
        if word == "-d":
            payload = json.loads(words[i + 1])
            i += 1
        elif word == "-H":
            key, _, value = words[i + 1].partition(": ")
            metadata.append((key.lower(), value))
            i += 1
        elif word.startswith(("copas.v1.CopasService/", "copas.v1.AccountService/")):
            service, method = word.removeprefix("copas.v1.").split("/")
        i += 1
    return service, method, payload, metadata


def expand(line: str, env: dict[str, str]) -> str:
    return re.sub(r"\$(\w+)", lambda m: env.get(m.group(1), m.group(0)), line)


async def test_the_readme_walk_through_plays_a_game_to_the_end() -> None:
    lines = walk_through()
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


def _find(data: Any, field: str) -> str:
    if isinstance(data, dict):
        for key, value in data.items():
            if key == field:
                return str(value)
            found = _find(value, field)
            if found:
                return found
    return ""
