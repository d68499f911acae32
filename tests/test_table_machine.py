"""The table's state machine on a manual clock: random actions, leaves, disconnects,
timeouts and pauses compose. Every table reaches GAME_OVER, every seat asked to act can act
(a person now, or a bot at its scheduled step), and a refusal changes nothing."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import Leave, PassCards, Phase, PlayCard
from server import tokens
from server.errors import ServiceError
from server.tables.clock import ManualScheduler
from server.tables.registry import TableRegistry
from tests.helpers.budget import budget
from tests.helpers.servers import registry_for_tests


def new_registry(clock: ManualScheduler, **options: Any) -> TableRegistry:
    return registry_for_tests(clock, allow_seed=True, abandon_after=120.0, **options)


def person_seats(table: Any) -> list[int]:
    return [s.number for s in table.seats if not s.is_bot]


def state(table: Any) -> tuple[Any, ...]:
    game = table.game
    return (table.sequence, table.paused_until, table.deadline,
            None if game is None else (game.phase, tuple(game.hands), len(game.actions)))


def check_someone_can_act(table: Any, clock: ManualScheduler) -> None:
    """Not paused, not over: each seat in to_act is a bot with a step pending, or a person
    who may act now (a legal action is accepted by the engine's rules)."""
    game = table.game
    if game is None or game.is_over or table.paused_until is not None:
        return
    to_act = game.to_act()
    assert to_act, "a running game with nobody to act"
    if any(table.seats[s].is_bot for s in to_act):
        assert table.is_bot_step_pending, "a bot must act but no step is scheduled"
    people = [s for s in to_act if not table.seats[s].is_bot and not game.has_left[s]]
    for seat in people:
        assert game.legal_mask(seat) or game.phase is Phase.MOON_CHOICE
        if table.rules.pass_timeout and game.phase is Phase.PASSING:
            assert table.deadline is not None, "people pass without a deadline"
        if table.rules.play_timeout and game.phase is Phase.PLAYING:
            assert table.deadline is not None, "a person plays without a deadline"


def random_person_action(table: Any, rng: random.Random) -> tuple[int, Any] | None:
    game = table.game
    seats = [s for s in person_seats(table) if not game.has_left[s]]
    if not seats:
        return None
    seat = rng.choice(seats)
    roll = rng.random()
    if roll < 0.04:
        return seat, Leave(seat)
    if roll < 0.15:  # something probably illegal: it must change nothing
        return seat, PlayCard(seat, rng.choice(game.hand(seat) or game.hand(0) or [0]))
    if seat not in game.to_act():
        return None
    if game.phase is Phase.PASSING:
        return seat, PassCards(seat, tuple(rng.sample(game.hand(seat), 3)))
    if game.phase is Phase.PLAYING:
        return seat, PlayCard(seat, rng.choice(game.legal_cards(seat)))
    return seat, game.auto_action(seat)


@settings(max_examples=budget(30, 150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), people=st.integers(1, 4), players=st.sampled_from([3, 4, 5]),
       timeouts=st.sampled_from([0.0, 5.0]), pauses=st.sampled_from([(0.0, 0.0), (2.0, 5.0)]),
       preset=st.sampled_from(["quick", "online", "20"]))
def test_random_tables_always_finish_and_someone_can_act(
        seed: int, people: int, players: int, timeouts: float, pauses: tuple[float, float],
        preset: str) -> None:
    rng = random.Random(seed)
    clock = ManualScheduler()
    registry = new_registry(clock)
    people = min(people, players)
    table = registry.create(preset=preset, overrides={
        "players": players, "play_timeout": timeouts, "pass_timeout": timeouts,
        "moon_timeout": timeouts, "trick_pause": pauses[0], "hand_pause": pauses[1]},
        bot_seats=players - people, name="", seed=str(seed))
    watchers: dict[int, list[Any]] = {}
    for i in range(people):
        seat, token = table.join(f"P{i}", None)
        token_hash = tokens.hash_token(token)
        watchers[seat] = [table.add_watcher(seat, token_hash)]
    assert table.game is not None
    for _ in range(3000):
        if table.is_finished:
            break
        clock.run_due()
        check_someone_can_act(table, clock)
        roll = rng.random()
        if roll < 0.55:
            chosen = random_person_action(table, rng)
            if chosen is not None:
                seat, action = chosen
                before = state(table)
                try:
                    table.act(seat, action)
                except ServiceError:
                    assert state(table) == before, "a refused action changed the table"
        elif roll < 0.65:  # a stream drops or reconnects
            seat = rng.choice(list(watchers))
            if watchers[seat] and rng.random() < 0.5:
                table.remove_watcher(watchers[seat].pop())
            elif len(watchers[seat]) < 2:
                watchers[seat].append(table.add_watcher(seat, table.seats[seat].token_hash))
        else:
            clock.advance(rng.choice([0.0, 0.5, 1.0, 3.0, 6.0]))
    # Nobody acts any more: timeouts, or the idle rule, must end the game by themselves.
    for _ in range(2000):
        if table.is_finished:
            break
        check_someone_can_act(table, clock)
        clock.advance(10.0)
    assert table.is_finished, f"stuck in {table.game.phase} (paused {table.paused_until})"
    assert table.deadline is None and table.paused_until is None
    assert registry.seated == 0, "a finished game still holds player slots"



def test_a_leave_during_a_trick_pause_keeps_the_pause_and_play_resumes() -> None:
    clock = ManualScheduler()
    registry = new_registry(clock)
    table = registry.create(preset="online", overrides={
        "play_timeout": 0.0, "pass_timeout": 0.0, "trick_pause": 2.0, "hand_pause": 5.0},
        bot_seats=2, name="", seed="4")
    seats = [table.join(f"P{i}", None)[0] for i in range(2)]
    game = table.game
    assert game is not None
    while not (game.phase is Phase.PLAYING and game.trick_number == 1):
        clock.run_due()
        if table.paused_until is not None:
            break
        to_act = [s for s in game.to_act() if s in seats]
        if to_act:
            table.act(to_act[0], game.auto_action(to_act[0]))
    assert table.paused_until is not None  # the first trick's pause
    table.act(seats[1], Leave(seats[1]))  # one person leaves during it
    assert table.paused_until is not None, "the pause must stand"
    clock.advance(2.0)
    assert table.paused_until is None, "the pause must end on time"
    for _ in range(500):  # the remaining person can play on to the end
        clock.run_due()
        if table.is_finished:
            break
        if seats[0] in game.to_act() and table.paused_until is None:
            table.act(seats[0], game.auto_action(seats[0]))
        else:
            clock.advance(2.0)
    assert table.is_finished


def test_the_last_person_leaving_ends_the_game_at_once() -> None:
    clock = ManualScheduler()
    registry = new_registry(clock)
    table = registry.create(preset="classic", overrides={
        "play_timeout": 0.0, "pass_timeout": 0.0, "trick_pause": 0.0, "hand_pause": 0.0},
        bot_seats=3, name="", seed="9")
    seat, _ = table.join("Ana", None)
    table.act(seat, Leave(seat))
    assert table.is_finished and table.game is not None
    assert table.game.end_reason is not None and table.game.end_reason.value == "ABANDONED"
    assert clock.pending() <= 1  # only the release of the finished table


def test_an_idle_game_ends_after_abandon_after() -> None:
    clock = ManualScheduler()
    registry = new_registry(clock)
    table = registry.create(preset="online", overrides={
        "play_timeout": 0.0, "pass_timeout": 0.0}, bot_seats=2, name="", seed="2")
    for i in range(2):
        table.join(f"P{i}", None)
    clock.advance(119.0)
    assert not table.is_finished
    clock.advance(2.0)
    assert table.is_finished and table.game is not None
    assert table.game.end_reason is not None and table.game.end_reason.value == "ABANDONED"

