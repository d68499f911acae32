"""The championships' store, one contract for SQLite and PostgreSQL: each refusal writes
nothing; a round is seated once (with its tables), a game counted once; what a call wrote
survives reopening."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from engine import Rules
from engine.championship import GameResult
from server.championships.model import Counted, Phase, Registration, SeatedTable, Spec
from server.championships.store import (
    PgChampionshipStore,
    Refused,
    SqliteChampionshipStore,
)
from tests.helpers.servers import fresh_database


def spec(cid: str = "c_1", *, creator: str = "a_owner", request_key: str = "",
         fingerprint: str = "", max_players: int = 5) -> Spec:
    return Spec(cid, "Cup", "online", Rules.preset("online"), 2, False, max_players, 3, None,
                False, 0.0, "seed", creator, 1.0, request_key, fingerprint)


class Opened:
    def __init__(self, kind: str, tmp: Path, request: pytest.FixtureRequest) -> None:
        self.kind = kind
        self.path = tmp / "championships.sqlite3"
        self.dsn = (fresh_database(request.getfixturevalue("postgres").dsn)
                    if kind == "postgresql" else "")
        self.store: Any = self.open()

    def open(self) -> Any:
        return SqliteChampionshipStore(self.path) if self.kind == "sqlite" \
            else PgChampionshipStore(self.dsn)

    def reopen(self) -> Any:
        self.store.close()
        self.store = self.open()
        return self.store


@pytest.fixture(params=["sqlite", "postgresql"])
async def opened(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Opened]:
    made = Opened(request.param, tmp_path, request)
    yield made
    made.store.close()


async def refused(reason: str, call: Any) -> None:
    with pytest.raises(Refused) as caught:
        await call
    assert caught.value.reason == reason


async def test_registrations_and_their_refusals(opened: Opened) -> None:
    store = opened.store
    assert await store.create(spec()) == "c_1"
    for n in range(5):
        await store.register("c_1", Registration(f"a_{n}", f"P{n}", 10.0 + n), 5)
    await refused("ALREADY_REGISTERED", store.register("c_1", Registration("a_0", "P0", 20.0), 5))
    await refused("CHAMPIONSHIP_FULL", store.register("c_1", Registration("a_9", "P9", 20.0), 5))
    await refused("CHAMPIONSHIP_NOT_FOUND",
                  store.register("c_x", Registration("a_9", "P9", 20.0), 5))
    await refused("NOT_REGISTERED", store.unregister("c_1", "a_9"))
    await refused("CHAMPIONSHIP_NOT_RUNNING", store.withdraw("c_1", "a_0", 30.0))
    await store.unregister("c_1", "a_4")
    await store.start("c_1", 40.0, 3)
    await refused("REGISTRATION_CLOSED", store.register("c_1", Registration("a_8", "P8", 41.0), 5))
    await refused("REGISTRATION_CLOSED", store.unregister("c_1", "a_0"))
    await refused("CHAMPIONSHIP_NOT_RUNNING", store.start("c_1", 41.0, 3))
    await store.withdraw("c_1", "a_3", 42.0)
    await refused("ALREADY_WITHDRAWN", store.withdraw("c_1", "a_3", 43.0))
    loaded = await opened.reopen().load("c_1")
    assert loaded.phase is Phase.RUNNING and loaded.began == 40.0
    assert [(r.account_id, r.withdrawn) for r in loaded.registrations] == [
        ("a_0", None), ("a_1", None), ("a_2", None), ("a_3", 42.0)]
    assert loaded.spec == spec()


async def test_a_start_needs_three_players_and_quotas_and_request_ids(opened: Opened) -> None:
    store = opened.store
    await store.create(spec(request_key="k", fingerprint="f"), quota=1)
    assert await store.create(spec("c_2", request_key="k", fingerprint="f"), quota=1) == "c_1"
    await refused("REQUEST_ID_REUSED", store.create(spec("c_3", request_key="k",
                                                         fingerprint="g")))
    await refused("TOO_MANY_CHAMPIONSHIPS", store.create(spec("c_4"), quota=1))
    assert await store.create(spec("c_5", creator=""), quota=None) == "c_5"
    for n in range(2):
        await store.register("c_1", Registration(f"a_{n}", f"P{n}", 10.0 + n), 5)
    await refused("NOT_ENOUGH_PLAYERS", store.start("c_1", 40.0, 3))
    assert (await store.load("c_1")).phase is Phase.REGISTERING
    assert await store.active() == ["c_1", "c_5"]
    assert await store.end("c_1", Phase.CANCELLED, 50.0)
    assert not await store.end("c_1", Phase.FINISHED, 51.0)
    assert await store.create(spec("c_6"), quota=1) == "c_6"  # c_1 is over: room again
    assert {c.id for c in await store.page(10, 0, include_finished=False)} == {"c_5", "c_6"}
    assert len(await store.page(10, 0, include_finished=True)) == 3


async def test_a_round_is_seated_once_and_a_game_counted_once(opened: Opened) -> None:
    store = opened.store
    await store.create(spec())
    for n in range(4):
        await store.register("c_1", Registration(f"a_{n}", f"P{n}", 10.0 + n), 5)
    tables = [SeatedTable(1, 1, "t_1", ("a_0", "a_1", "a_2", "a_3"))]
    assert not await store.seat_round("c_1", 1, 20.0, tables)  # not running yet
    await store.start("c_1", 30.0, 3)
    assert await store.seat_round("c_1", 1, 31.0, tables)
    assert not await store.seat_round("c_1", 1, 32.0, [SeatedTable(1, 1, "t_2", ("a_0",))])
    result = GameResult(1, 1, ("a_0", "a_1", "a_2", "a_3"), (10, 20, 30, 44), ("a_3",))
    assert await store.count("c_1", Counted("t_1", result, 40.0))
    assert not await store.count("c_1", Counted("t_1", result, 41.0))
    loaded = await opened.reopen().load("c_1")
    assert loaded.tables == tables and loaded.rounds == {1: 31.0}
    assert [c.result for c in loaded.counted] == [result]
    assert loaded.is_round_over(1)
    store = opened.store
    assert await store.end("c_1", Phase.CANCELLED, 50.0)
    later = GameResult(2, 1, ("a_0", "a_1", "a_2", "a_3"), (1, 2, 3, 4))
    assert not await store.count("c_1", Counted("t_9", later, 51.0))  # cancelled: no more


async def test_one_node_holds_a_championships_lease_until_it_runs_out(opened: Opened) -> None:
    store = opened.store
    assert await store.claim("c_1", "node-a", 10.0, 100.0)
    assert not await store.claim("c_1", "node-b", 10.0, 105.0)
    assert await store.claim("c_1", "node-a", 10.0, 108.0)  # renewed: until 118
    assert not await store.claim("c_1", "node-b", 10.0, 117.0)
    assert await store.claim("c_1", "node-b", 10.0, 118.5)  # ran out: taken over
    assert not await store.claim("c_1", "node-a", 10.0, 119.0)
    assert await store.claim("c_2", "node-a", 10.0, 119.0)  # one lease per championship
