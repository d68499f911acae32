"""Quick match alone does not wait forever (issue 40): on a manual clock, a quick-match table
that a person waited at for --quick-match-bots-after seconds gives its free seats to bots and
its game starts (once the person's reserved seat is taken up); its log replays to the same
seats; a table made for friends, one whose people gave their seats up, and a server with the
flag at 0 get no bots."""

from __future__ import annotations

from typing import Any

from server import tokens
from server.tables.clock import ManualScheduler
from server.tables.registry import TableRegistry
from tests.helpers.logged import new_registry, replayed

WAIT = 20.0


def alone(registry: TableRegistry, address: str = "198.51.100.7") -> tuple[Any, int, str]:
    """A quick match of a person from ``address`` (named after it)."""
    return registry.join("", f"P{address.rsplit('.', 1)[-1]}", None, preset="quick",
                         address=address)


def people(table: Any) -> list[int]:
    return [s.number for s in table.seats if s.is_taken and not s.is_bot]


def test_bots_take_the_free_seats_after_the_wait_and_the_game_starts() -> None:
    clock = ManualScheduler()
    registry = new_registry(clock, quick_match_bots_after=WAIT, reservation_seconds=60.0)
    table, seat, token = alone(registry)
    table.add_watcher(seat, tokens.hash_token(token))  # the page's stream: taken up
    clock.advance(WAIT / 2)
    other, second, other_token = alone(registry, "203.0.113.8")  # a second person, later
    assert other is table and table.game is None
    clock.advance(WAIT / 2 - 0.01)
    assert table.game is None and registry.quick_fill.armed() == 1  # the first one's wait
    clock.advance(0.01)
    assert [s.is_bot for s in table.seats] == [False, False, True, True]
    assert table.game is None  # the second person has not connected yet
    table.add_watcher(second, tokens.hash_token(other_token))
    assert table.game is not None and registry.quick_fill.armed() == 0
    assert people(table) == [seat, second]
    rebuilt = replayed(registry, table)  # the bots' joins are in the log
    assert [(s.is_bot, s.name) for s in rebuilt.seats] == [(s.is_bot, s.name) for s in table.seats]
    assert rebuilt.game is not None and rebuilt.sequence == table.sequence


def test_a_full_quick_match_before_the_wait_has_no_bots() -> None:
    clock = ManualScheduler()
    registry = new_registry(clock, quick_match_bots_after=WAIT)
    joined = [alone(registry, f"198.51.100.{i}") for i in range(4)]
    table = joined[0][0]
    for _, seat, token in joined:
        table.add_watcher(seat, tokens.hash_token(token))
    assert table.game is not None
    clock.advance(WAIT)
    assert not any(s.is_bot for s in table.seats) and registry.quick_fill.armed() == 0


def test_no_bots_at_a_table_for_friends_nor_where_nobody_is_left_nor_with_the_flag_at_0(
        ) -> None:
    clock = ManualScheduler()
    registry = new_registry(clock, quick_match_bots_after=WAIT)
    # A table made for friends, with a quick match's rules: only a quick match arms the wait.
    friends = registry.create(preset="quick", overrides={}, bot_seats=0, name="", seed=None)
    friends.join("Bea", None)
    clock.advance(WAIT)
    assert not any(s.is_bot for s in friends.seats) and friends.game is None
    # A quick match whose person gave the seat up before the wait ended: nobody to play with.
    registry = new_registry(clock, quick_match_bots_after=WAIT)
    gone, seat, _ = alone(registry)
    gone.remove_person(seat)
    clock.advance(WAIT)
    assert not any(s.is_bot for s in gone.seats) and gone.game is None
    off = new_registry(ManualScheduler(), quick_match_bots_after=0.0)
    waiting, _, _ = alone(off)
    off.scheduler.advance(10 * WAIT)  # type: ignore[attr-defined]
    assert not any(s.is_bot for s in waiting.seats) and off.quick_fill.armed() == 0
