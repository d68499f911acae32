"""Moons, timeouts, leavers and the last player, through gRPC on loopback."""

from __future__ import annotations

from typing import Any

import pytest
from copas.v1 import copas_pb2

from engine import Game, MoonChoice, Phase
from tests.helpers.calls import Watch, auth, join_all, new_table, play_seat_until
from tests.helpers.games import rules_of

MOON_SEED_4 = "3"  # with automatic play, seat 0 shoots the moon in the first hand


def first_hand(events: list[Any]) -> copas_pb2.HandScored:
    return next(m.hand_scored for m in events if m.WhichOneof("kind") == "hand_scored")


@pytest.mark.parametrize(("moon", "expected"), [
    (copas_pb2.MOON_RULE_OTHERS_PLUS_26, [0, 26, 26, 26]),
    (copas_pb2.MOON_RULE_DISABLED, [26, 0, 0, 0]),
])
async def test_moon_without_a_choice(stub: Any, moon: int, expected: list[int]) -> None:
    table = await new_table(stub, seed=MOON_SEED_4, bots=3, moon=moon, max_hands=1)
    join = (await join_all(stub, table.table_id, 1))[0]
    watch = Watch(stub, table.table_id, join.player_token)
    replica = Game(rules_of(table), MOON_SEED_4)
    await play_seat_until(stub, table.table_id, join.player_token, watch, replica, 0,
                          lambda g: False)
    await watch.wait_for(lambda m: m.WhichOneof("kind") == "game_over")
    scored = first_hand(watch.messages)
    assert list(scored.taken) == [26, 0, 0, 0] and list(scored.points) == expected
    moons = [m for m in watch.messages if m.WhichOneof("kind") == "moon_shot"]
    assert len(moons) == (moon != copas_pb2.MOON_RULE_DISABLED)
    await watch.close()


@pytest.mark.parametrize(("choice", "expected"), [
    (copas_pb2.MOON_CHOICE_ADD_TO_OTHERS, [0, 26, 26, 26]),
    (copas_pb2.MOON_CHOICE_SUBTRACT_FROM_SELF, [0, 0, 0, 0]),  # floored at 0
])
async def test_shooter_chooses_with_choose_moon(stub: Any, choice: int,
                                                expected: list[int]) -> None:
    table = await new_table(stub, preset="classic", seed=MOON_SEED_4, bots=3)
    join = (await join_all(stub, table.table_id, 1))[0]
    token = join.player_token
    watch = Watch(stub, table.table_id, token)
    replica = Game(rules_of(table), MOON_SEED_4)
    await play_seat_until(stub, table.table_id, token, watch, replica, 0,
                          lambda g: g.phase is Phase.MOON_CHOICE)
    event = await watch.wait_for(lambda m: m.view.phase == copas_pb2.PHASE_MOON_CHOICE)
    assert event.view.moon_shooter == 0 and list(event.view.to_act) == [0]
    assert set(event.view.moon_choices) == {copas_pb2.MOON_CHOICE_ADD_TO_OTHERS,
                                            copas_pb2.MOON_CHOICE_SUBTRACT_FROM_SELF}
    await stub.ChooseMoon(copas_pb2.ChooseMoonRequest(table_id=table.table_id, choice=choice),
                          metadata=auth(token))
    chosen = await watch.wait_for(lambda m: m.WhichOneof("kind") == "moon_chosen")
    assert chosen.moon_chosen.choice == choice and not chosen.moon_chosen.is_automatic
    scored = (await watch.wait_for(lambda m: m.WhichOneof("kind") == "hand_scored")).hand_scored
    assert list(scored.totals) == expected and scored.moon_shooter == 0
    await watch.close()


async def test_moon_choice_times_out_to_the_automatic_choice(stub: Any) -> None:
    table = await new_table(stub, preset="classic", seed=MOON_SEED_4, bots=3,
                            moon_timeout_seconds=0.05)
    join = (await join_all(stub, table.table_id, 1))[0]
    watch = Watch(stub, table.table_id, join.player_token)
    replica = Game(rules_of(table), MOON_SEED_4)
    await play_seat_until(stub, table.table_id, join.player_token, watch, replica, 0,
                          lambda g: g.phase is Phase.MOON_CHOICE)
    timed_out = await watch.wait_for(lambda m: m.WhichOneof("kind") == "turn_timed_out")
    assert timed_out.turn_timed_out.phase == copas_pb2.PHASE_MOON_CHOICE
    chosen = await watch.wait_for(lambda m: m.WhichOneof("kind") == "moon_chosen")
    assert chosen.moon_chosen.is_automatic
    assert chosen.moon_chosen.choice == copas_pb2.MOON_CHOICE_ADD_TO_OTHERS
    assert replica.auto_moon_choice() is MoonChoice.ADD_TO_OTHERS
    await watch.close()


async def test_pass_and_turn_timeouts_play_the_automatic_choice(stub: Any) -> None:
    # The first deadline leaves the stream ample time to open (its first message is awaited)
    # before the timeout it must see.
    table = await new_table(stub, seed="5", bots=3, pass_timeout_seconds=1.0,
                            play_timeout_seconds=0.05)
    join = (await join_all(stub, table.table_id, 1))[0]
    watch = Watch(stub, table.table_id, join.player_token)
    await watch.opened()
    replica = Game(rules_of(table), "5")
    expected_pass = replica.auto_action(0)
    event = await watch.wait_for(lambda m: m.WhichOneof("kind") == "turn_timed_out"
                                 and m.turn_timed_out.seat == 0)
    assert event.turn_timed_out.seat == 0
    assert event.turn_timed_out.phase == copas_pb2.PHASE_PASSING
    chosen = await watch.wait_for(lambda m: m.WhichOneof("kind") == "pass_chosen"
                                  and m.pass_chosen.seat == 0)
    assert chosen.pass_chosen.is_automatic
    assert sorted(c.text for c in chosen.view.pass_choice) == sorted(
        str(c) for c in expected_pass.cards)  # type: ignore[union-attr]
    # Everyone else plays automatically too, so the replica knows seat 0's first card.
    while not (replica.phase is Phase.PLAYING and replica.turn == 0):
        replica.apply(replica.auto_action(replica.to_act()[0]))
    expected_card = str(replica.auto_action(0).card)  # type: ignore[union-attr]
    timed_out = await watch.wait_for(lambda m: m.WhichOneof("kind") == "turn_timed_out"
                                     and m.turn_timed_out.phase == copas_pb2.PHASE_PLAYING)
    played = await watch.wait_for(lambda m: m.WhichOneof("kind") == "card_played"
                                  and m.card_played.seat == 0)
    assert played.sequence == timed_out.sequence + 1
    assert played.card_played.is_automatic and played.card_played.card.text == expected_card
    # The player leaves: the rest of the game is played at once, the leaver placed last.
    await stub.LeaveTable(copas_pb2.LeaveTableRequest(table_id=table.table_id),
                          metadata=auth(join.player_token))
    over = await watch.wait_for(lambda m: m.WhichOneof("kind") == "game_over")
    last = over.game_over.standings[-1]
    assert last.seat == 0 and last.has_left and last.place == 4
    await watch.close()


async def test_a_leaver_becomes_automatic_and_is_ranked_last(stub: Any) -> None:
    table = await new_table(stub, seed="8", bots=2)
    joins = await join_all(stub, table.table_id, 2)
    watch = Watch(stub, table.table_id, joins[0].player_token)
    spectator = Watch(stub, table.table_id)
    await spectator.opened()
    await watch.wait_for(lambda m: m.view.phase == copas_pb2.PHASE_PASSING)
    await stub.LeaveTable(copas_pb2.LeaveTableRequest(table_id=table.table_id),
                          metadata=auth(joins[1].player_token))
    left = await spectator.wait_for(lambda m: m.WhichOneof("kind") == "player_left")
    assert left.player_left.seat == 1 and left.view.players[1].has_left
    replica = Game(rules_of(table), "8")
    replica.leave(1)
    await play_seat_until(stub, table.table_id, joins[0].player_token, watch, replica, 0,
                          lambda g: False)
    over = await watch.wait_for(lambda m: m.WhichOneof("kind") == "game_over")
    assert [(r.seat, r.place) for r in over.game_over.standings][-1] == (1, 4)
    assert [(r.seat, r.total) for r in over.game_over.standings] == [
        (r.seat, r.total) for r in replica.standings]
    with pytest.raises(Exception) as err:  # the seat has left for good
        await stub.LeaveTable(copas_pb2.LeaveTableRequest(table_id=table.table_id),
                              metadata=auth(joins[1].player_token))
    assert "FAILED_PRECONDITION" in str(err.value)
    await watch.close()
    await spectator.close()


async def test_the_last_remaining_player_wins_at_once(stub: Any) -> None:
    table = await new_table(stub, seed="2", players=3)
    joins = await join_all(stub, table.table_id, 3)
    watch = Watch(stub, table.table_id, joins[0].player_token)
    await watch.opened()
    for j in joins[1:]:
        await stub.LeaveTable(copas_pb2.LeaveTableRequest(table_id=table.table_id),
                              metadata=auth(j.player_token))
    over = await watch.wait_for(lambda m: m.WhichOneof("kind") == "game_over")
    assert over.game_over.reason == copas_pb2.GAME_END_REASON_LAST_PLAYER
    assert [(r.seat, r.place) for r in over.game_over.standings] == [(0, 1), (2, 2), (1, 3)]
    await watch.close()
