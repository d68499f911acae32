"""Hearts in the terminal clients: its header (the pass, whether hearts are broken), its hand
scores (the moon), its pass and moon lines, and ``greedy``, the clients' original policy, which
ducks Hearts's points (offered at every table: any policy chooses among the legal cards)."""

from __future__ import annotations

import random

from copas.v1 import cards_pb2, copas_pb2
from rich.text import Text

from clients.common import DIRECTION_TEXT, card_key, pass_target, pretty
from clients.games import ClientGame
from clients.render import name_of

HEARTS, SPADES = cards_pb2.SUIT_HEARTS, cards_pb2.SUIT_SPADES


def _points(card: cards_pb2.Card) -> int:
    if card.suit == HEARTS:
        return 1
    return 13 if card.suit == SPADES and card.rank == 12 else 0


def choose_greedy(view: copas_pb2.TableView, rng: random.Random) -> list[cards_pb2.Card]:
    """Ducks points: follows under the winning card when it can, otherwise plays its highest
    card of the suit; when void, sheds Q♠, then its highest heart, then its highest card; leads
    its lowest card; passes Q♠ A♠ K♠ and its highest hearts and cards."""
    legal = list(view.legal_cards)
    if view.phase == copas_pb2.PHASE_PASSING:
        def danger(c: cards_pb2.Card) -> tuple[int, int, int]:
            is_top_spade = c.suit == SPADES and c.rank >= 12
            return (is_top_spade, c.suit == HEARTS, c.rank)
        return sorted(legal, key=danger, reverse=True)[:3]
    trick = list(view.trick.cards)
    if not trick:  # lead low, avoiding points
        return [min(legal, key=lambda c: (_points(c) > 0, c.rank))]
    led = trick[0].card.suit
    following = [c for c in legal if c.suit == led]
    if following:
        winning = max(t.card.rank for t in trick if t.card.suit == led)
        under = [c for c in following if c.rank < winning]
        if under:
            return [max(under, key=lambda c: c.rank)]
        no_points_yet = not any(_points(t.card) for t in trick)
        last_to_play = len(trick) == len(view.players) - 1
        if last_to_play and no_points_yet:
            return [max(following, key=lambda c: c.rank)]
        return [min(following, key=lambda c: c.rank)]
    return [max(legal, key=lambda c: (_points(c), c.rank))]


def pass_text(view: copas_pb2.TableView, direction: copas_pb2.PassDirection.ValueType) -> str:
    """'pass left, to Ana' for a player; 'pass left' for a spectator; 'no passing'."""
    if direction == copas_pb2.PASS_DIRECTION_HOLD:
        return "no passing"
    text = f"pass {DIRECTION_TEXT.get(direction, '?')}"
    target = pass_target(view, view.seat) if view.HasField("seat") else None
    return text + (f", to {name_of(view, target)}" if target is not None else "")


def header(view: copas_pb2.TableView) -> str:
    return (f" · hand {view.hand_number + 1} · {pass_text(view, view.pass_direction)}"
            f" · hearts {'broken' if view.hearts_broken else 'not broken'}")


def hand_summary(event: copas_pb2.HandScored, view: copas_pb2.TableView) -> Text:
    text = Text(f"hand {event.hand_number + 1} scored: ", style="bold")
    text.append(", ".join(f"{name_of(view, s)} +{p} (total {t})"
                          for s, (p, t) in enumerate(zip(event.points, event.totals,
                                                         strict=True))))
    if event.HasField("moon_shooter"):
        text.append(f"  — {name_of(view, event.moon_shooter)} shot the moon!")
    return text


def hand_lines(view: copas_pb2.TableView) -> list[Text]:
    """The three cards passed to the seat this hand."""
    if not view.received:
        return []
    return [Text("received: " + " ".join(pretty(c) for c in sorted(view.received, key=card_key)))]


def event_line(event: copas_pb2.TableEvent, view: copas_pb2.TableView) -> Text | None:
    kind = event.WhichOneof("kind")
    if kind == "hand_started":
        return Text(f"— hand {event.hand_started.hand_number + 1}: "
                    f"{pass_text(view, event.hand_started.pass_direction)}", style="bold")
    if kind == "moon_shot":
        return Text(f"  {name_of(view, event.moon_shot.seat)} shot the moon!", style="bold")
    if kind == "cards_exchanged":
        received = " ".join(pretty(c) for c in sorted(view.received, key=card_key))
        return Text("  cards exchanged" + (f": you received {received}" if received else ""))
    return None


GAME = ClientGame(name="hearts", title="Hearts", first_preset="online", is_default=True,
                  header=header, hand_summary=hand_summary, hand_lines=hand_lines,
                  event_line=event_line,
                  view_policies={"greedy": choose_greedy})
