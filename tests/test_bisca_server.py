"""Bisca on the server (issue 41; docs/RULES.md, "Bisca"; docs/API.md): games of 2 and of 4 in
partnerships played whole over unary calls and over Play streams, against a replica engine
game of the same rules and seed; every message a seat or a spectator receives checked for
hidden cards; a reconnect by sequence; the bad inputs and that they change nothing; records
and ``copas replay``."""

from __future__ import annotations

import random

import pytest
from copas.v1 import copas_pb2

from tests.helpers.bisca_play import (
    Oracle,
    new_bisca_table,
    play_unary,
    replica_of,
)
from tests.helpers.calls import Watch, join_all
from tests.helpers.servers import serving

pytestmark = pytest.mark.asyncio


async def _seated(stub, table, count):  # type: ignore[no-untyped-def]
    joined = await join_all(stub, table.table_id, count)
    return {j.seat: j.player_token for j in joined}


async def test_a_game_of_two_played_whole_over_unary_calls() -> None:
    async with serving(allow_seed=True) as (_, stub):
        table = await new_bisca_table(stub, preset="bisca3", seed="7")
        assert table.rules.game == "bisca" and table.rules.players == 2
        assert table.rules.bisca.hand_size == 3 and table.rules.bisca.target == 4
        assert not table.rules.point_limit, "a Hearts option shown at a Bisca table"
        oracle = Oracle(replica_of(table, "7"))
        spectator = Watch(stub, table.table_id, check=lambda m: oracle.check(None, m))
        tokens = await _seated(stub, table, 2)
        watches = {s: Watch(stub, table.table_id, t, check=lambda m, s=s: oracle.check(s, m))
                   for s, t in tokens.items()}
        calls = await play_unary(stub, table.table_id, tokens, watches, oracle,
                                 random.Random(7))
        for watch in (*watches.values(), spectator):
            over = await watch.wait_for(lambda m: m.view.phase == copas_pb2.PHASE_GAME_OVER,
                                        timeout=30)
            await watch.close()
        game = oracle.replica
        assert calls == len(game.actions) and game.is_over
        assert [r.total for r in over.view.standings] == [r.total for r in game.standings]
        assert [p.total for p in over.view.players] == game.returns()
        assert max(game.totals) >= 4 and over.view.bisca.side_totals == game.totals
        kinds = {m.WhichOneof("kind") for m in spectator.messages}
        assert {"hand_started", "card_played", "trick_won", "cards_drawn", "hand_scored",
                "game_over"} <= kinds
        assert oracle.checked > 4 * calls
