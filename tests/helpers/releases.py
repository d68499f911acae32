"""An earlier release of Copas run beside this checkout, for mixed-version clusters: its source
taken from git (``git archive``, as tools/make_fixtures.py runs a release checkout), its
protos generated there with this .venv's tools (its Makefile's ``proto`` target, without the
type stubs), and its server started with this .venv's python, importing its own packages and
generated code first (``PYTHONPATH``), never this checkout's. And a player for any release:
every seat's moves read from GetView, through the stubs of this checkout (the contract only
grows, so they speak to every release)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import grpc
from copas.v1 import copas_pb2, copas_pb2_grpc

from tests.helpers.calls import auth
from tests.helpers.servers import ROOT, ServerProcess


def extract_release(commit: str, into: Path) -> Path:
    """Release ``commit`` of this repository's history, ready to run, in ``into``."""
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], capture_output=True,
                             timeout=60)
    assert archive.returncode == 0, (
        f"release {commit} is not in this checkout's history (a shallow clone? fetch it): "
        f"{archive.stderr.decode()[:300]}")
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True,
                   timeout=60)
    protos = sorted(str(p.relative_to(into / "protos"))
                    for p in (into / "protos" / "copas").rglob("*.proto"))
    bin_dir = Path(sys.executable).parent
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", "-I.", "--python_out=.",
         "--grpc_python_out=.", f"--plugin=protoc-gen-connectrpc={bin_dir}/protoc-gen-connectrpc",
         "--connectrpc_out=.", "--connectrpc_opt=protobuf=google", *protos],
        cwd=into / "protos", check=True, capture_output=True, timeout=120)
    return into


def release_environment(release: Path) -> dict[str, str]:
    """The environment that makes this .venv's python import the release's packages."""
    return {"PYTHONPATH": os.pathsep.join([str(release), str(release / "protos")])}


def release_server(release: Path, *flags: str, log_dir: Path) -> ServerProcess:
    """The release's server (``python -m server.main`` in its directory) with ``flags``."""
    return ServerProcess(*flags, log_dir=log_dir, env=release_environment(release), cwd=release)


async def play_by_views(stub: copas_pb2_grpc.CopasServiceStub, table_id: str,
                        tokens: list[str], *, cards: int | None = None,
                        timeout: float = 60) -> int:
    """Every seat's moves (its first three cards to pass, its first legal card, the first moon
    choice offered) until the game is over, or until ``cards`` cards of the hand are down;
    returns the table's sequence then (GetView's)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        acted = False
        for token in tokens:
            answer = await stub.GetView(copas_pb2.GetViewRequest(table_id=table_id),
                                        metadata=auth(token), timeout=10)
            view = answer.view
            down = 4 * view.trick_number + len(view.trick.cards) \
                if view.phase == copas_pb2.PHASE_PLAYING else 0
            if view.phase == copas_pb2.PHASE_GAME_OVER or (cards is not None and down >= cards):
                return int(answer.sequence)
            if view.seat not in view.to_act:
                continue
            if view.phase == copas_pb2.PHASE_PASSING and not view.pass_choice:
                await stub.PassCards(copas_pb2.PassCardsRequest(
                    table_id=table_id, cards=view.hand[:3]), metadata=auth(token), timeout=10)
            elif view.phase == copas_pb2.PHASE_PLAYING:
                await stub.PlayCard(copas_pb2.PlayCardRequest(
                    table_id=table_id, card=view.legal_cards[0]), metadata=auth(token),
                    timeout=10)
            elif view.phase == copas_pb2.PHASE_MOON_CHOICE and view.moon_choices:
                await stub.ChooseMoon(copas_pb2.ChooseMoonRequest(
                    table_id=table_id, choice=view.moon_choices[0]), metadata=auth(token),
                    timeout=10)
            else:
                continue
            acted = True
        if not acted:
            await asyncio.sleep(0.02)
    raise AssertionError(f"table {table_id} did not get there in {timeout} s")


async def refused(call: Awaitable[Any]) -> grpc.aio.AioRpcError:
    """The error a call (an awaitable of a stub) is refused with."""
    try:
        await call
    except grpc.aio.AioRpcError as error:
        return error
    raise AssertionError("the call was answered")
