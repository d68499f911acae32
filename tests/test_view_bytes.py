"""The views travel pre-serialized (built from cached parts, concatenated on the wire); they
must be exactly the views built field by field from the engine's `public_view` and
`private_view`, at every step of random games, for every seat and for spectators."""

from __future__ import annotations

import random

from copas.v1 import copas_pb2
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import Leave, PassCards, Phase, PlayCard, private_view
from server import tokens
from server.games.hearts import codec
from server.tables import views
from server.tables.clock import ManualScheduler
from server.tables.fanout import Fanout, Watcher, batch_body, batch_response, response, with_results
from tests.helpers.budget import budget
from tests.helpers.servers import registry_for_tests


def reference_view(table: object, seat: int | None) -> copas_pb2.TableView:
    """The view built field by field, the plain way."""
    message = views.public(table)  # type: ignore[arg-type]
    if seat is None:
        return message
    message.seat = seat
    game = table.game  # type: ignore[attr-defined]
    if game is None or game.has_left[seat]:  # a leaver sees what a spectator sees (issue 27)
        return message
    mine = private_view(game, seat)
    message.hand.extend(codec.CARD_PB[c] for c in mine.hand)
    message.pass_choice.extend(codec.CARD_PB[c] for c in mine.pass_choice)
    message.received.extend(codec.CARD_PB[c] for c in mine.received)
    if table.paused_until is None:  # type: ignore[attr-defined]
        message.legal_cards.extend(codec.CARD_PB[c] for c in mine.legal_cards)
        message.moon_choices.extend(codec.MOON_CHOICE_TO_PB[c] for c in mine.moon_choices)
    return message


def check(table: object) -> None:
    shared = views.public_bytes(table)  # type: ignore[arg-type]
    for seat in (None, *range(len(table.seats))):  # type: ignore[attr-defined]
        fast = copas_pb2.TableView.FromString(views.view_bytes(table, shared, seat))  # type: ignore[arg-type]
        assert fast == reference_view(table, seat), f"seat {seat}"


@settings(max_examples=budget(10, 40), deadline=None)
@given(seed=st.integers(0, 10**6), players=st.sampled_from([3, 4, 5]),
       pauses=st.booleans(), moon=st.sampled_from(["OTHERS_PLUS_26", "SHOOTER_CHOICE"]))
def test_pre_serialized_views_equal_the_plain_ones(seed: int, players: int, pauses: bool,
                                                   moon: str) -> None:
    rng = random.Random(seed)
    clock = ManualScheduler()
    registry = registry_for_tests(clock, allow_seed=True)
    table = registry.create(preset="quick", overrides={
        "players": players, "moon": moon, "play_timeout": 5.0, "pass_timeout": 5.0,
        "trick_pause": 1.0 if pauses else 0.0, "hand_pause": 2.0 if pauses else 0.0},
        bot_seats=1, name="", seed=str(seed))
    check(table)
    holders = []
    for i in range(players - 1):
        seat, token = table.join(f"P{i}", None)
        holders.append(tokens.hash_token(token))
        check(table)
    watcher = table.add_watcher(0, holders[0])
    game = table.game
    assert game is not None
    while not game.is_over:
        check(table)
        clock.run_due()
        to_act = [s for s in game.to_act() if s < players - 1]
        if table.paused_until is not None or not to_act:
            clock.advance(rng.choice([0.5, 1.0, 5.0]))
            continue
        seat = rng.choice(to_act)
        if rng.random() < 0.01:
            table.act(seat, Leave(seat))
        elif game.phase is Phase.PASSING:
            table.act(seat, PassCards(seat, tuple(rng.sample(game.hand(seat), 3))))
        elif game.phase is Phase.PLAYING:
            table.act(seat, PlayCard(seat, rng.choice(game.legal_cards(seat))))
        else:
            table.act(seat, game.auto_action(seat))
    check(table)
    table.remove_watcher(watcher)


def test_a_stream_message_is_the_event_with_its_view() -> None:
    event = copas_pb2.TableEvent(sequence=7, card_played=copas_pb2.CardPlayed(seat=2),
                                 is_last_in_action=True)
    view = copas_pb2.TableView(table_id="t_x", seat=0, hand_number=3)
    wire = response(event.SerializeToString(), view.SerializeToString())
    expected = copas_pb2.TableEvent()
    expected.CopyFrom(event)
    expected.view.CopyFrom(view)
    assert copas_pb2.WatchTableResponse.FromString(wire) == \
        copas_pb2.WatchTableResponse(event=expected)


def _event(sequence: int, seat: int, is_last: bool = False) -> bytes:
    return copas_pb2.TableEvent(sequence=sequence, card_played=copas_pb2.CardPlayed(seat=seat),
                                is_last_in_action=is_last).SerializeToString()


def test_a_batch_is_its_events_with_the_view_on_the_last_and_its_results() -> None:
    """Issue 29: an EventBatch built by concatenation is the message built field by field,
    as a WatchTableResponse and a PlayResponse alike; results appended go in the batch."""
    view = copas_pb2.TableView(table_id="t_x", seat=1, hand_number=2)
    events = [_event(4, 0), _event(5, 1, is_last=True)]
    wire = batch_response(batch_body(events, view.SerializeToString()))
    expected = copas_pb2.EventBatch(events=[copas_pb2.TableEvent.FromString(e) for e in events])
    expected.events[-1].view.CopyFrom(view)
    assert copas_pb2.WatchTableResponse.FromString(wire) == \
        copas_pb2.WatchTableResponse(batch=expected)
    assert copas_pb2.PlayResponse.FromString(wire) == copas_pb2.PlayResponse(batch=expected)
    result = copas_pb2.PlayResult(request_id="r", sequence=4, last_sequence=5)
    answered = copas_pb2.PlayResponse.FromString(
        with_results(wire, [result.SerializeToString()]))
    assert list(answered.batch.events) == list(expected.events)
    assert list(answered.batch.results) == [result]
    alone = copas_pb2.PlayResponse.FromString(with_results(None, [result.SerializeToString()]))
    assert alone == copas_pb2.PlayResponse(batch=copas_pb2.EventBatch(results=[result]))


def test_one_commit_is_one_message_per_batched_stream_and_one_per_event_for_the_others(
        ) -> None:
    """Two steps committed together: a batched stream gets one message (both steps' events,
    the later step's view on the last), built once for its seat; a stream that is not
    batched gets each event with its own step's view."""
    fanout = Fanout()
    batched = [Watcher(1, "a", 100, 1 << 20, is_batched=True) for _ in range(2)]
    plain = Watcher(1, "b", 100, 1 << 20)
    for watcher in (*batched, plain):
        fanout.add(watcher)
    views = [copas_pb2.TableView(seat=1, trick_number=n).SerializeToString() for n in (1, 2)]
    fanout.stage([(1, _event(1, 0, True))], {1: views[0]})
    fanout.stage([(2, _event(2, 1)), (3, _event(3, 2, True))], {1: views[1]})
    fanout.deliver(3, lambda: None)
    first, second = (w.pop() for w in batched)
    assert first == second and first[1] is second[1]  # the same bytes, built once
    assert first[0] == 3 and not batched[0].queue
    batch = copas_pb2.WatchTableResponse.FromString(first[1]).batch
    assert [e.sequence for e in batch.events] == [1, 2, 3]
    assert [e.HasField("view") for e in batch.events] == [False, False, True]
    assert batch.events[-1].view.SerializeToString() == views[1]
    shown = [copas_pb2.WatchTableResponse.FromString(plain.pop()[1]).event for _ in range(3)]
    assert [e.view.trick_number for e in shown] == [1, 2, 2]
