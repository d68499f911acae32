"""The engine's bots at a real table: `copas bot --policy mc` and `copas loadtest --policy mc`
against a server on loopback; every move the bots make is accepted."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from collections import Counter
from collections.abc import Iterator
from typing import Any, ClassVar

import grpc
import pytest
from copas.v1 import copas_pb2

from clients import bots
from clients.common import Player, zero_timing
from tests.helpers.servers import clients_server, serving
from tests.helpers.terminal import copas as run_copas
from tools.games import hearts as policies


@pytest.fixture(scope="module")
def server_address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with clients_server(tmp_path_factory.mktemp("data")) as server:
        yield server.address
        server.stop()


def copas(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """The ``copas`` command with the engine's bots (tools.cli)."""
    return run_copas(*args, module="tools.cli", timeout=timeout)


class CountingPlayer(Player):
    """A player that counts the server's refusals of its moves."""

    refusals: ClassVar[Counter[str]] = Counter()

    async def _call(self, method: str, request: object) -> object:
        try:
            return await super()._call(method, request)
        except grpc.aio.AioRpcError as error:
            CountingPlayer.refusals[f"{method} {error.code().name}"] += 1
            raise


@pytest.mark.parametrize(("policy", "players"), [("mc", 4), ("mc", 3), ("duck", 5)])
async def test_engine_bots_play_a_whole_game_with_only_legal_moves(policy: str,
                                                                   players: int) -> None:
    made: list[policies.EnginePolicy] = []

    def factory(seed: int | None) -> bots.Policy:
        made.append(policies.EnginePolicy(policy, seed))
        return made[-1]

    bots.register_policy(f"test-{policy}", factory)
    CountingPlayer.refusals.clear()
    async with serving() as (_, stub):
        rules = zero_timing()
        rules.players = players
        rules.moon = copas_pb2.MOON_RULE_SHOOTER_CHOICE
        table = (await stub.CreateTable(copas_pb2.CreateTableRequest(
            preset="online", display_name="bots", rules=rules))).table
        seated = []
        for i in range(players):
            answer = await stub.JoinTable(copas_pb2.JoinTableRequest(
                table_id=table.table_id, display_name=f"{policy}{i}"))
            seated.append(CountingPlayer(stub, table.table_id, answer.seat, answer.player_token))
        views = await asyncio.wait_for(asyncio.gather(
            *(bots.run_bot(p, f"test-{policy}", seed=i) for i, p in enumerate(seated))), 120)
    assert all(v.phase == copas_pb2.PHASE_GAME_OVER for v in views)
    assert CountingPlayer.refusals == Counter()
    assert len(views[0].standings) == players
    assert len(made) == players and all(b.decisions > 20 and not b.fallbacks for b in made)


def test_copas_bot_with_the_strong_policy_finishes_a_game(server_address: str) -> None:
    done = copas("bot", "--server", server_address, "--create", "--seats", "4", "--policy", "mc",
                 "--preset", "quick")
    assert done.returncode == 0, done.stderr
    assert "4 mc bots joined" in done.stdout and "final standings:" in done.stdout
    places = re.findall(r"^\s+(\d)\. .*: (\d+) points$", done.stdout, re.M)
    assert len(places) == 4 and sum(int(p) for _, p in places) in (26, 78)


def test_copas_loadtest_takes_a_policy_in_every_process(server_address: str) -> None:
    done = copas("loadtest", "--server", server_address, "--tables", "2", "--games", "2",
                 "--processes", "2", "--policy", "mc", "--json", timeout=180)
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    assert report["errors"] == {} and report["games_finished"] == 2
