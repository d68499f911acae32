"""A championship's tables on a manual clock: held while their championship is paused
(nobody acts, no clock runs, no bot moves, no idle end; released, the turn starts again with
its whole time) and ended by a round's time limit (TIME_LIMIT, scored as an abandoned game);
both are in the table's log, so a restart rebuilds the same table."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine import GameEndReason, Leave, Phase
from server import tokens
from server.errors import ServiceError
from server.tables.clock import ManualScheduler
from server.tables.log_entries import Held, loads
from tests.helpers.logged import new_registry, replayed, store_log

CLOCK = {"play_timeout": 20.0, "pass_timeout": 30.0, "moon_timeout": 15.0,
         "trick_pause": 2.0, "hand_pause": 5.0}


def table_of(clock: ManualScheduler, bots: int = 0, **options: Any
             ) -> tuple[Any, Any, dict[int, str]]:
    registry = new_registry(clock, abandon_after=120.0, **options)
    table = registry.create(preset="online", overrides=CLOCK, bot_seats=bots, name="", seed="7",
                            championship="c_test")
    found = {}
    for _ in range(4 - bots):
        seat, token = table.join(f"P{len(found)}", None)
        found[seat] = token
        table.add_watcher(seat, tokens.hash_token(token))
    return registry, table, found


def refused(reason: str, call: Any) -> None:
    with pytest.raises(ServiceError) as caught:
        call()
    assert caught.value.reason == reason


def test_a_held_table_stops_every_clock_and_its_release_gives_the_turn_its_whole_time() -> None:
    clock = ManualScheduler()
    registry, table, _ = table_of(clock)
    game = table.game
    assert game is not None and game.phase is Phase.PASSING
    table.act(0, game.auto_action(0))
    clock.advance(10.0)
    before = table.sequence
    table.hold(True)
    table.hold(True)  # held already: nothing happens
    assert table.is_held and table.sequence == before + 1
    held = table.history[-1]
    assert held.WhichOneof("kind") == "table_held" and held.table_held.is_held
    for seat in (None, 1):
        view = table.view(seat)
        assert view.is_held and not view.to_act and not view.HasField("deadline")
        assert not view.HasField("paused_until")
    assert not table.view(1).legal_cards  # nothing to play while held
    refused("TABLE_PAUSED", lambda: table.act(1, game.auto_action(1)))
    assert table.timers() == []
    clock.advance(10_000.0)  # far past the pass's clock and --abandon-after: nothing plays
    assert table.sequence == before + 1 and not game.is_over and not table.is_stuck()
    assert game.passes[1] is None
    table.hold(False)
    assert not table.is_held and table.history[-1].table_held.is_held is False
    assert table.deadline == clock.now() + CLOCK["pass_timeout"]  # the whole time again
    assert set(table.view(1).to_act) == {1, 2, 3}
    table.act(1, game.auto_action(1))  # play goes on
    assert [loads(e) for e in store_log(registry, table) if '"hold"' in e] == [
        Held(before, True, pytest.approx(clock.now() - 10_000.0)),
        Held(before + 1, False, pytest.approx(clock.now()))]
    rebuilt = replayed(registry, table)
    assert not rebuilt.is_held and rebuilt.sequence == table.sequence
    assert rebuilt.game.actions == game.actions and rebuilt.deadline == table.deadline


def test_a_table_held_in_a_pause_and_rebuilt_while_held_stays_held() -> None:
    clock = ManualScheduler()
    registry, table, _ = table_of(clock)
    game = table.game
    assert game is not None
    while game.phase is Phase.PASSING:
        seat = game.to_act()[0]
        table.act(seat, game.auto_action(seat))
    while table.paused_until is None:  # to the end of the first trick: the trick's pause
        table.act(game.to_act()[0], game.auto_action(game.to_act()[0]))
    table.hold(True)
    assert table.paused_until is None and table.view(0).is_held
    rebuilt = replayed(registry, table)
    rebuilt.resume_after_recovery(None)  # as a restart's adoption does
    assert rebuilt.is_held and rebuilt.view(0).is_held and not rebuilt.view(0).to_act
    assert rebuilt.timers() == [] and rebuilt.deadline is None
    rebuilt.scheduler.advance(1_000.0)
    assert rebuilt.sequence == table.sequence
    for seat in range(4):  # the people come back to the rebuilt table
        rebuilt.add_watcher(seat, rebuilt.seats[seat].token_hash)
    rebuilt.hold(False)  # released: no pause is left, the trick's next card is due
    assert rebuilt.deadline == rebuilt.scheduler.now() + CLOCK["play_timeout"]
    assert rebuilt.view(0).to_act == [game.to_act()[0]]


def test_a_held_table_of_bots_waits_and_a_leave_is_still_taken() -> None:
    clock = ManualScheduler()
    _, table, found = table_of(clock, bots=2)
    game = table.game
    assert game is not None
    table.hold(True)
    clock.advance(1_000.0)
    assert not any(game.passes[s] for s in (2, 3))  # the bots made no move
    table.act(0, Leave(0))  # a leave is taken while held (the engine passes for it at once)
    assert game.has_left[0] and table.is_held and not game.is_over
    assert not any(game.passes[s] for s in (2, 3))
    table.hold(False)
    clock.advance(10.0)  # released: the bots and the leaver's seat pass; the person's clock
    assert all(game.passes[s] for s in (0, 2, 3)) and game.passes[1] is None
    assert table.deadline is not None and found


def test_the_time_limit_ends_a_game_as_abandoned_and_the_record_says_why() -> None:
    clock = ManualScheduler()
    registry, table, _ = table_of(clock)
    game = table.game
    assert game is not None
    while game.hand_number < 1 or game.phase is not Phase.PLAYING or not game.trick_cards:
        seat = game.to_act()[0]
        if table.paused_until is not None:
            clock.advance(CLOCK["hand_pause"])
            continue
        table.act(seat, game.auto_action(seat))
    first_hand = list(game.hands_played[0].totals)
    table.hold(True)
    table.end_by_time_limit()  # held or not, the limit ends it
    assert game.is_over and game.end_reason is GameEndReason.TIME_LIMIT
    assert list(game.totals) == first_hand and not table.is_held
    assert table.history[-1].WhichOneof("kind") == "game_over"
    refused("WRONG_PHASE", table.end_by_time_limit)
    record = registry.store.get_kept_record(table.id)
    assert record is not None and record.summary.result.end_reason is GameEndReason.TIME_LIMIT
    assert json.loads(record.summary.to_json())["result"]["end_reason"] == "TIME_LIMIT"
    rebuilt = replayed(registry, table)
    assert rebuilt.game.end_reason is GameEndReason.TIME_LIMIT
    assert rebuilt.game.actions == game.actions
