"""Bisca over the contract, for the server's tests: a table made and played through unary calls
or Play streams against a replica engine game of the same rules and seed, and the check of
every message a seat or a spectator receives (never another seat's hand, a card another seat
drew, or the stock's order)."""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import grpc
from copas.v1 import cards_pb2, copas_pb2, copas_pb2_grpc
from google.protobuf.message import Message

from engine.bisca import BiscaRules, Card, Game, PlayCard
from tests.helpers.calls import PlayStream, Watch, auth

Key = tuple[int, int, int]  # (hand, trick, cards in the trick): one state of a running hand


def key_of(game: Game) -> Key:
    return (game.hand_number, game.trick_number, len(game.trick_cards))


def view_key(view: copas_pb2.TableView) -> Key:
    return (view.hand_number, view.trick_number, len(view.trick.cards))


async def new_bisca_table(stub: copas_pb2_grpc.CopasServiceStub, *, preset: str = "bisca3",
                          seed: str | None = "1", bots: int = 0, timeout: float = 0.0,
                          bot_policy: str = "", **bisca: Any) -> copas_pb2.TableSummary:
    """A Bisca table with no pauses and (by default) no clock."""
    request = copas_pb2.CreateTableRequest(
        game="bisca", preset=preset, bot_seats=bots, display_name="bisca test",
        bot_policy=bot_policy, request_id=f"create-{uuid.uuid4().hex}",
        rules=copas_pb2.RulesOverrides(trick_pause_seconds=0.0, hand_pause_seconds=0.0,
                                       play_timeout_seconds=timeout,
                                       bisca=copas_pb2.BiscaRulesOverrides(**bisca)))
    if seed is not None:
        request.seed = seed
    return (await retried(lambda: stub.CreateTable(request))).table


async def retried(call: Callable[[], Awaitable[Any]], attempts: int = 40) -> Any:
    """``call()``, sent again while the answer is UNAVAILABLE (a node renewing its lease, a
    relayed call not answered in time on a loaded machine), as the reference client does: the
    calls sent this way carry a request id, so a retry is answered, never applied twice."""
    for attempt in range(attempts):
        try:
            return await call()
        except grpc.aio.AioRpcError as error:
            if error.code() != grpc.StatusCode.UNAVAILABLE or attempt == attempts - 1:
                raise
            await asyncio.sleep(0.25)  # the refusal names no event to await
    raise AssertionError("unreachable")


def replica_of(table: copas_pb2.TableSummary, seed: str) -> Game:
    """The engine game the server plays at ``table`` (its rules as the summary shows them)."""
    from server.games.bisca import MODULE

    rules = MODULE.rules_from_dict(_rules_dict(table.rules))
    return Game(rules, seed)


def _rules_dict(rules: copas_pb2.Rules) -> dict[str, Any]:
    b = rules.bisca
    return {"players": rules.players, "partnerships": b.partnerships, "hand_size": b.hand_size,
            "follow_suit": copas_pb2.BiscaFollowSuit.Name(b.follow_suit).removeprefix(
                "BISCA_FOLLOW_SUIT_"),
            "margin_bonus": b.margin_bonus,
            "tie": copas_pb2.BiscaTie.Name(b.tie).removeprefix("BISCA_TIE_"),
            "target": b.target, "max_hands": rules.max_hands,
            "play_timeout": rules.play_timeout_seconds,
            "trick_pause": rules.trick_pause_seconds, "hand_pause": rules.hand_pause_seconds}


class Oracle:
    """What each seat held at each state of the game, from the replica, to check the views
    against: a seat's view holds exactly its own hand, and no other card that is not public."""

    def __init__(self, replica: Game) -> None:
        self.replica = replica
        self.hands: dict[Key, list[frozenset[str]]] = {}
        self.checked = 0
        self.remember()

    def remember(self) -> None:
        g = self.replica
        if not g.is_over:
            self.hands[key_of(g)] = [frozenset(map(str, g.hand(s))) for s in range(g.players)]

    def apply(self, action: Any, is_automatic: bool = False) -> None:
        self.replica.apply(action, is_automatic=is_automatic)
        self.remember()

    def check(self, seat: int | None, message: copas_pb2.TableEvent) -> None:
        """``message`` (an event and its view), as ``seat`` (None: a spectator) got it."""
        view = message.view
        hand = {c.text for c in view.hand}
        legal = {c.text for c in view.legal_cards}
        drawn = view.bisca.drawn_card.text if view.bisca.HasField("drawn_card") else ""
        if seat is None or view.phase != copas_pb2.PHASE_PLAYING:
            assert not drawn and (seat is not None or not hand) and legal <= hand
        if seat is None:
            assert not hand and not legal and not view.HasField("seat"), "a spectator saw a hand"
        elif view.phase == copas_pb2.PHASE_PLAYING:
            known = self.hands.get(view_key(view))
            assert known is not None, f"a view of a state never reached: {view_key(view)}"
            assert hand == known[seat], f"seat {seat} saw {hand}, held {known[seat]}"
            assert legal <= hand and (not drawn or drawn in hand)
            others = set().union(*(known[s] for s in range(len(known)) if s != seat))
            assert not hand & others
        # No other card anywhere in the message is hidden: every card outside the seat's own
        # fields is the trump card or one played.
        played = self.played_cards()
        trump = {str(self.replica.trump_card)} | {h.trump_card for h in self.trumps()}
        for card in public_cards(message):
            assert card in played or card in trump, f"{card} shown to {seat} before it was played"
        self.checked += 1

    def played_cards(self) -> set[str]:
        return {str(a.card) for a in self.replica.actions if isinstance(a, PlayCard)} | {
            str(c) for t in self.replica.tricks for c in t.cards}

    def trumps(self) -> list[Any]:
        return list(self.replica.hands_played)


def public_cards(message: Message) -> Iterator[str]:
    """Every card in ``message`` but a seat's own (its hand, legal cards and drawn card)."""
    for field, value in message.ListFields():
        if field.name in ("hand", "legal_cards", "drawn_card"):
            continue
        if field.message_type is None:
            continue
        items = [value] if isinstance(value, Message) else value
        for item in items:
            if isinstance(item, cards_pb2.Card):
                yield item.text
            else:
                yield from public_cards(item)


def card_pb(card: Card | str) -> cards_pb2.Card:
    return cards_pb2.Card(text=str(card))


def is_turn(seat: int, key: Key) -> Callable[[copas_pb2.TableEvent], bool]:
    return lambda m: (view_key(m.view) == key and seat in m.view.to_act
                      and m.view.phase == copas_pb2.PHASE_PLAYING
                      and not m.view.HasField("paused_until"))


async def play_unary(stub: copas_pb2_grpc.CopasServiceStub, table_id: str,
                     tokens: dict[int, str], watches: dict[int, Watch], oracle: Oracle,
                     rng: random.Random, stop: Callable[[Game], bool] = lambda g: False,
                     answers: list[copas_pb2.PlayCardResponse] | None = None) -> int:
    """Play every seat of ``tokens`` by PlayCard with a random legal card from its view (the
    view's legal cards checked against the replica's), each call with a request_id naming
    its action's index ("bisca-<n>"); other seats are advanced in the replica with the
    timeout card. Returns the cards played by calls (their answers into ``answers``)."""
    game, calls = oracle.replica, 0
    while not game.is_over and not stop(game):
        seat = game.to_act()[0]
        if seat not in tokens:  # a bot or a leaver: the server plays it at once
            oracle.apply(game.auto_action(seat), is_automatic=True)
            continue
        found = await watches[seat].wait_for(is_turn(seat, key_of(game)), timeout=30)
        legal = sorted(c.text for c in found.view.legal_cards)
        assert legal == sorted(map(str, game.legal_cards(seat)))
        card = rng.choice(legal)
        request_id = f"bisca-{len(game.actions)}"
        oracle.apply(PlayCard(seat, Card.parse(card)))  # before: its events may come first
        request = copas_pb2.PlayCardRequest(table_id=table_id, card=card_pb(card),
                                            request_id=request_id)
        answer = await retried(lambda: stub.PlayCard(request, metadata=auth(tokens[seat]),
                                                     timeout=20))
        if answers is not None:
            answers.append(answer)
        calls += 1
    return calls


async def play_streams(streams: dict[int, PlayStream], oracle: Oracle, rng: random.Random,
                       stop: Callable[[Game], bool] = lambda g: False) -> int:
    """As ``play_unary``, each seat through its Play stream (a card as a Play action)."""
    game, calls = oracle.replica, 0
    while not game.is_over and not stop(game):
        seat = game.to_act()[0]
        if seat not in streams:
            oracle.apply(game.auto_action(seat), is_automatic=True)
            continue
        found = await streams[seat].wait_event(is_turn(seat, key_of(game)), timeout=30)
        card = rng.choice(sorted(c.text for c in found.view.legal_cards))
        oracle.apply(PlayCard(seat, Card.parse(card)))  # before: its events may come first
        result = await streams[seat].act(
            play_card=copas_pb2.PlayCardRequest(card=card_pb(card)), timeout=20)
        assert not result.HasField("error"), result
        calls += 1
    return calls


def rules_for(players: int, partnerships: bool = False) -> BiscaRules:
    return BiscaRules(players=players, partnerships=partnerships)
