"""Away seats and quick-match reservations on a manual clock (issue 27, finding 3): what the
table did, step by step, and that its log replays to the same state."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from engine import Phase
from server import tokens
from server.errors import ServiceError
from server.store.base import TableMeta
from server.tables.clock import ManualScheduler
from server.tables.log_entries import TimedOut, loads
from server.tables.registry import TableRegistry
from server.tables.timers import AWAY_GRACE
from tests.helpers.logged import new_registry, replayed, store_log

CLOCK = {"play_timeout": 60.0, "pass_timeout": 60.0, "moon_timeout": 60.0,
         "trick_pause": 0.0, "hand_pause": 0.0}


def away(table: Any, seat: int) -> tuple[bool, bool]:
    """Seat ``seat``'s away flag in another seat's view and in the summary."""
    other = (seat + 1) % len(table.seats)
    return (table.view(other).players[seat].is_away, table.summary().seats[seat].is_away)


def timed_out_seats(table: Any, after: int = 0) -> list[int]:
    return [e.turn_timed_out.seat for e in table.history
            if e.sequence > after and e.WhichOneof("kind") == "turn_timed_out"]


def seated_table(clock: ManualScheduler, registry: TableRegistry) -> tuple[Any, dict[int, Any]]:
    """A table of four people on a 60-second clock, each with a stream open."""
    table = registry.create(preset="online", overrides=CLOCK, bot_seats=0, name="", seed="7")
    watchers = {}
    for i in range(4):
        seat, token = table.join(f"P{i}", None)
        watchers[seat] = table.add_watcher(seat, tokens.hash_token(token))
    return table, watchers


def test_a_seat_not_connected_at_its_turn_is_played_at_once_shown_away_and_back_on_acting(
        ) -> None:
    clock = ManualScheduler()
    registry = new_registry(clock)
    table, watchers = seated_table(clock, registry)
    game = table.game
    assert game is not None and game.phase is Phase.PASSING
    for seat in (0, 2, 3):
        table.act(seat, game.auto_action(seat))
    table.remove_watcher(watchers[1])  # seat 1's stream ends while it must pass
    assert table.deadline is not None  # it was connected when the turn began: its clock runs
    clock.advance(60.0)  # its pass times out (one timeout: not away yet)
    assert timed_out_seats(table) == [1] and away(table, 1) == (False, False)
    # Its turns now come while it has no stream: each is played at once, no clock.
    while game.phase is Phase.PLAYING and 1 not in game.to_act():
        seat = game.to_act()[0]
        table.act(seat, game.auto_action(seat))
    before = table.sequence
    assert 1 in game.to_act() and table.deadline is None  # its turn takes no clock
    assert clock.run_due() >= 1  # played now, not after 60 seconds
    assert timed_out_seats(table, before) == [1]
    assert away(table, 1) == (True, True)
    assert table.view(1).players[1].is_away  # every view says so
    # Back: a stream again and an action of its own.
    watchers[1] = table.add_watcher(1, table.seats[1].token_hash)
    while 1 not in game.to_act():
        seat = game.to_act()[0]
        if seat != 1:
            table.act(seat, game.auto_action(seat))
    assert table.deadline == clock.now() + AWAY_GRACE  # connected and away: a short clock
    table.act(1, game.auto_action(1))
    assert away(table, 1) == (False, False)
    rebuilt = replayed(registry, table)
    assert [s.is_away for s in rebuilt.seats] == [s.is_away for s in table.seats]
    assert rebuilt.game.actions == game.actions and rebuilt.sequence == table.sequence


def test_two_timeouts_in_a_row_make_a_connected_seat_away() -> None:
    clock = ManualScheduler()
    registry = new_registry(clock)
    table, _ = seated_table(clock, registry)
    game = table.game
    assert game is not None
    for seat in (1, 2, 3):
        table.act(seat, game.auto_action(seat))
    clock.advance(60.0)  # seat 0, connected, lets its pass time out: once
    assert away(table, 0) == (False, False)
    while 0 not in game.to_act():
        seat = game.to_act()[0]
        table.act(seat, game.auto_action(seat))
    assert table.deadline is not None  # connected and not away: the full clock
    clock.advance(60.0)  # twice in a row
    assert timed_out_seats(table).count(0) == 2
    assert away(table, 0) == (True, True)
    while 0 not in game.to_act():
        seat = game.to_act()[0]
        table.act(seat, game.auto_action(seat))
    before = table.sequence
    assert table.deadline == clock.now() + AWAY_GRACE  # away and connected: not 60 seconds
    clock.advance(AWAY_GRACE)
    assert timed_out_seats(table, before) == [0]
    rebuilt = replayed(registry, table)
    assert [s.is_away for s in rebuilt.seats] == [s.is_away for s in table.seats]
    assert rebuilt.game.actions == game.actions


def quick_joins(registry: TableRegistry, count: int) -> list[tuple[Any, int, str]]:
    return [registry.join("", f"P{i}", None, preset="quick", address=f"198.51.100.{i}")
            for i in range(count)]


def test_a_quick_match_starts_only_when_every_reservation_is_taken_up() -> None:
    clock = ManualScheduler()
    registry = new_registry(clock, reservation_seconds=15.0)
    joined = quick_joins(registry, 4)
    table = joined[0][0]
    assert {j[0].id for j in joined} == {table.id} and table.seats.is_full()
    assert table.game is None  # full, but nobody has connected
    for _, seat, token in joined[:3]:
        table.add_watcher(seat, tokens.hash_token(token))
    assert table.game is None  # one reservation is still not taken up
    clock.advance(15.0)
    assert table.game is None and sum(s.is_taken for s in table.seats) == 3
    with pytest.raises(ServiceError) as expired:
        registry.authenticate(tokens.hash_token(joined[3][2]), table.id)
    assert expired.value.reason == "RESERVATION_EXPIRED"
    assert not replayed(registry, table).seats.is_full()  # the expired join left the log
    again, seat, token = registry.join("", "Late", None, preset="quick", address="203.0.113.9")
    assert again is table and table.game is None
    table.add_watcher(seat, tokens.hash_token(token))
    assert table.game is not None  # every seat taken up: it starts
    rebuilt = replayed(registry, table)
    assert rebuilt.game is not None and rebuilt.sequence == table.sequence


def test_one_client_holds_one_seat_of_a_quick_match_table() -> None:
    clock = ManualScheduler()
    registry = new_registry(clock, quick_match_seats_per_client=1)
    table, _, _ = registry.join("", "Bait", None, preset="quick", address="192.0.2.66")
    for _ in range(2):
        with pytest.raises(ServiceError) as refused:
            registry.join("", "Bait", None, preset="quick", address="192.0.2.66")
        assert refused.value.reason == "ALREADY_SEATED"
        with pytest.raises(ServiceError) as by_id:
            registry.join(table.id, "Bait", None, address="192.0.2.66")
        assert by_id.value.reason == "ALREADY_SEATED"
    assert sum(s.is_taken for s in table.seats) == 1
    other, _, _ = registry.join("", "Honest", None, preset="quick", address="198.51.100.1")
    assert other is table and sum(s.is_taken for s in table.seats) == 2


def test_a_quick_match_table_with_an_expired_reservation_and_an_away_seat_replays_the_same(
        ) -> None:
    """Replay gives back what the live table did: the reservation that went back (its join is
    not in the log), who holds each seat (account or address, for one seat each), the
    timeouts played at once for an away seat and its away flag."""
    clock = ManualScheduler()
    registry = new_registry(clock, reservation_seconds=15.0, quick_match_seats_per_client=1)
    joined = quick_joins(registry, 3)
    table = joined[0][0]
    account, _, account_token = registry.join("", "Ana", None, preset="quick",
                                              account_id="a_ana", address="198.51.100.9")
    assert account is table and table.seats.is_full() and table.meta.is_quick
    for meta in (table.meta, dataclasses.replace(table.meta, rating="with_bots")):
        assert TableMeta.from_json(meta.to_json()) == meta  # is_quick beside the rating
    watchers = {seat: table.add_watcher(seat, tokens.hash_token(token))
                for _, seat, token in joined[1:]}
    watchers[3] = table.add_watcher(3, tokens.hash_token(account_token))
    clock.advance(15.0)  # seat 0 never connected: its reservation goes back
    assert table.game is None and not table.seats[0].is_taken
    waiting = replayed(registry, table, quick_match_seats_per_client=1)
    assert [(s.is_taken, s.address, s.account_id) for s in waiting.seats] == \
        [(s.is_taken, s.address, s.account_id) for s in table.seats]
    with pytest.raises(ServiceError) as refused:  # one seat each, after a replay too
        waiting.join("P1", None, address="198.51.100.1")
    assert refused.value.reason == "ALREADY_SEATED"
    _, seat, token = registry.join("", "Late", None, preset="quick", address="203.0.113.9")
    watchers[seat] = table.add_watcher(seat, tokens.hash_token(token))
    game = table.game
    assert game is not None and seat == 0
    gone = 2
    table.remove_watcher(watchers.pop(gone))  # its person goes: its turns play at once
    for _ in range(500):
        if table.seats[gone].is_away or game.is_over:
            break
        others = [s for s in game.to_act() if s != gone]
        if others and table.paused_until is None:
            table.act(others[0], game.auto_action(others[0]))
        else:
            due = clock.next_due()
            assert due is not None
            clock.advance(max(0.0, due - clock.now()))
    clock.run_due()  # its turn, shown away from the moment it came, is played (and logged)
    assert table.seats[gone].is_away and away(table, gone) == (True, True)
    assert any(isinstance(e, TimedOut) and e.is_away
               for e in map(loads, store_log(registry, table)))
    rebuilt = replayed(registry, table)
    assert [(s.is_away, s.name, s.address, s.account_id) for s in rebuilt.seats] == \
        [(s.is_away, s.name, s.address, s.account_id) for s in table.seats]
    assert rebuilt.game.actions == game.actions and rebuilt.sequence == table.sequence
    live, again = table.summary(), rebuilt.summary()
    for seat in live.seats:  # the rebuilt table has no streams yet: nobody is connected
        seat.is_connected = False
    assert again == live


def test_a_table_made_with_a_seed_is_no_quick_match_table() -> None:
    """A quick match never opens a table whose deal someone chose (--allow-seed): such a
    table with a quick match's rules seats people as any table does, and no quick match
    joins it; without the seed the same table is a quick match's."""
    clock = ManualScheduler()
    registry = new_registry(clock, quick_match_seats_per_client=1)
    seeded = registry.create(preset="quick", overrides={}, bot_seats=0, name="", seed="11")
    assert not seeded.meta.is_quick
    for name in ("Ann", "Bo"):
        seeded.join(name, None, address="192.0.2.66")  # one address, two seats
    assert [s.reserved_until for s in seeded.seats[:2]] == [None, None]  # no reservations
    quick, _, _ = registry.join("", "Bo", None, preset="quick", address="198.51.100.1")
    assert quick is not seeded and quick.meta.is_quick
