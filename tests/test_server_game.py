"""Whole games through the public API on a real server on loopback."""

from __future__ import annotations

import random
from typing import Any

import pytest
import structlog
from copas.v1 import copas_pb2
from structlog.testing import capture_logs

from engine import Game, MoonRule, PassCards, Phase, PlayCard, Rules
from engine.cards import cards_of
from tests.helpers.calls import Watch, auth, card_pb, cards_text, join_all, new_table


def rules_of(table: copas_pb2.TableSummary) -> Rules:
    r = table.rules
    moon = {1: MoonRule.OTHERS_PLUS_26, 2: MoonRule.SHOOTER_CHOICE, 3: MoonRule.DISABLED}[r.moon]
    return Rules(players=r.players, max_hands=r.max_hands, point_limit=r.point_limit, moon=moon,
                 points_on_first_trick=r.points_on_first_trick,
                 queen_breaks_hearts=r.queen_breaks_hearts, play_timeout=r.play_timeout_seconds,
                 pass_timeout=r.pass_timeout_seconds, moon_timeout=r.moon_timeout_seconds,
                 trick_pause=r.trick_pause_seconds, hand_pause=r.hand_pause_seconds)


def texts(cards: Any) -> set[str]:
    return {str(c) for c in cards}


def private_cards(view: copas_pb2.TableView) -> set[str]:
    return (set(cards_text(view.hand)) | set(cards_text(view.pass_choice))
            | set(cards_text(view.received)) | set(cards_text(view.legal_cards)))


def all_card_texts(event: copas_pb2.TableEvent) -> set[str]:
    """Every card text anywhere in a message, found by walking the message tree."""
    found: set[str] = set()

    def walk(message: Any) -> None:
        for field, value in message.ListFields():
            if field.message_type is not None:
                items = value if field.is_repeated else [value]
                for item in items:
                    if field.message_type.full_name == "copas.v1.Card":
                        found.add(item.text)
                    else:
                        walk(item)

    walk(event)
    return found


async def test_four_clients_play_a_whole_game(stub: Any) -> None:
    with capture_logs(processors=[structlog.contextvars.merge_contextvars]) as logs:
        table = await new_table(stub, seed="42")
        replica = Game(rules_of(table), "42")
        joins = await join_all(stub, table.table_id, 4)
        tokens = {j.seat: j.player_token for j in joins}
        watches = {s: Watch(stub, table.table_id, tokens[s]) for s in range(4)}
        spectator = Watch(stub, table.table_id)
        rng = random.Random(7)
        dealt: dict[int, list[int]] = {}
        received: dict[int, list[int]] = {}
        while not replica.is_over:
            h = replica.hand_number
            dealt.setdefault(h, list(replica.dealt))
            received.setdefault(h, [0] * 4)
            if replica.phase is Phase.PASSING:
                for s in replica.to_act():
                    event = await watches[s].wait_for(
                        lambda m, s=s, h=h: m.view.hand_number == h
                        and m.view.phase == copas_pb2.PHASE_PASSING and s in m.view.to_act)
                    assert set(cards_text(event.view.legal_cards)) == texts(replica.hand(s))
                    chosen = rng.sample(replica.legal_cards(s), 3)
                    await stub.PassCards(copas_pb2.PassCardsRequest(
                        table_id=table.table_id, cards=[card_pb(c) for c in chosen]),
                        metadata=auth(tokens[s]))
                    replica.apply(PassCards(s, tuple(chosen)))
                received[h] = list(replica.received)
                continue
            s = replica.turn
            n_trick = len(replica.trick_cards)
            event = await watches[s].wait_for(
                lambda m, s=s, h=h, t=replica.trick_number, k=n_trick: m.view.hand_number == h
                and m.view.trick_number == t and len(m.view.trick.cards) == k
                and s in m.view.to_act and m.view.phase == copas_pb2.PHASE_PLAYING)
            view = event.view
            assert set(cards_text(view.legal_cards)) == texts(replica.legal_cards(s))
            assert set(cards_text(view.hand)) == texts(replica.hand(s))
            assert [p.total for p in view.players] == replica.totals
            assert [p.hand_points for p in view.players] == replica.taken
            assert [p.card_count for p in view.players] == [x.bit_count() for x in replica.hands]
            c = rng.choice(replica.legal_cards(s))
            response = await stub.PlayCard(copas_pb2.PlayCardRequest(
                table_id=table.table_id, card=card_pb(c)), metadata=auth(tokens[s]))
            assert response.sequence > 0
            replica.apply(PlayCard(s, c))
        for w in (*watches.values(), spectator):
            over = await w.wait_for(lambda m: m.WhichOneof("kind") == "game_over")
            assert [(r.seat, r.place, r.total) for r in over.game_over.standings] == [
                (r.seat, r.place, r.total) for r in replica.standings]
            assert over.view.phase == copas_pb2.PHASE_GAME_OVER
        # No leaks: a seat's private fields hold only its own dealt and received cards.
        for s, w in watches.items():
            assert w.messages[0].WhichOneof("kind") == "snapshot"
            for m in w.messages:
                h = m.view.hand_number
                if h < 0:
                    assert not private_cards(m.view)
                    continue
                own = texts(_cards(dealt[h][s] | received[h][s]))
                assert private_cards(m.view) <= own, f"seat {s} saw {private_cards(m.view) - own}"
                # Anything else it sees is on the table (public).
                assert all_card_texts(m) - private_cards(m.view) <= table_cards(m)
        for m in spectator.messages:
            assert not private_cards(m.view) and not m.view.HasField("seat")
            h = m.view.hand_number
            assert all_card_texts(m) <= table_cards(m)
        for w in (*watches.values(), spectator):
            await w.close()
    for entry in logs:
        line = repr(entry)
        assert not any(token in line for token in tokens.values()), "a token reached a log"
        assert "hand" not in entry or isinstance(entry["hand"], int) or entry["hand"] is None
    rpc_lines = [e for e in logs if e.get("event") == "rpc"]
    assert rpc_lines and all("code" in e and "rpc" in e for e in rpc_lines)
    assert any(e.get("event") == "game_event" and e.get("table_id") == table.table_id
               for e in logs)


def _cards(mask: int) -> list[Any]:
    return list(cards_of(mask))


def table_cards(m: copas_pb2.TableEvent) -> set[str]:
    """Cards on the table in a message: the trick, the last trick, a card just played."""
    out = set(cards_text(c.card for c in m.view.trick.cards)) | set(
        cards_text(c.card for c in m.view.last_trick.cards))
    kind = m.WhichOneof("kind")
    if kind == "card_played":
        out.add(m.card_played.card.text)
    elif kind == "trick_won":
        out |= set(cards_text(c.card for c in m.trick_won.trick.cards))
    elif kind == "snapshot":
        for missed in m.snapshot.missed_events:
            out |= table_cards(missed)
    return out


@pytest.mark.parametrize(("players", "seed"), [(3, "1"), (5, "13")])
async def test_bot_tables_in_3_and_5_players(stub: Any, players: int, seed: str) -> None:
    table = await new_table(stub, preset="quick", seed=seed, bots=players - 1, players=players,
                            moon=copas_pb2.MOON_RULE_DISABLED)
    join = (await join_all(stub, table.table_id, 1))[0]
    assert join.seat == 0
    replica = Game(rules_of(table), seed)
    watch = Watch(stub, table.table_id, join.player_token)
    while not replica.is_over:
        if 0 not in replica.to_act():
            replica.apply(replica.auto_action(replica.to_act()[0]), is_automatic=True)
            continue
        h, t, k = replica.hand_number, replica.trick_number, len(replica.trick_cards)
        phase = replica.phase
        event = await watch.wait_for(
            lambda m: m.view.hand_number == h and m.view.trick_number == t
            and len(m.view.trick.cards) == k and 0 in m.view.to_act
            and m.view.phase == {Phase.PASSING: copas_pb2.PHASE_PASSING,
                                 Phase.PLAYING: copas_pb2.PHASE_PLAYING}[phase])
        assert len(event.view.hand) == replica.hand(0).__len__()
        action = replica.auto_action(0)
        if isinstance(action, PassCards):
            await stub.PassCards(copas_pb2.PassCardsRequest(
                table_id=table.table_id, cards=[card_pb(c) for c in action.cards]),
                metadata=auth(join.player_token))
        else:
            assert isinstance(action, PlayCard)
            await stub.PlayCard(copas_pb2.PlayCardRequest(
                table_id=table.table_id, card=card_pb(action.card)),
                metadata=auth(join.player_token))
        replica.apply(action)
    over = await watch.wait_for(lambda m: m.WhichOneof("kind") == "game_over")
    assert [r.total for r in sorted(over.game_over.standings, key=lambda r: r.seat)] == \
        replica.totals
    assert len(over.view.players) == players and all(p.is_bot for p in over.view.players[1:])
    await watch.close()
