"""Bisca in the terminal clients (docs/RULES.md, "Bisca"): the trump card under the stock and
the cards left in it (then who drew the trump card), the teams, each side's card points this
hand and game points, the card the seat drew, who drew after each trick, its hand scores; and
the seats of its presets, for the table ``copas play --game bisca`` makes."""

from __future__ import annotations

from copas.v1 import copas_pb2
from rich.text import Text

from clients.common import SUIT_SYMBOL, pretty
from clients.games import ClientGame
from clients.render import name_of, team_name


def header(view: copas_pb2.TableView) -> str:
    """' · hand 1 · trumps ♥: 7♥ under the stock, 12 cards left' (or who drew the trump card)."""
    b = view.bisca
    trump = pretty(b.trump_card)
    text = f" · hand {view.hand_number + 1} · trumps {SUIT_SYMBOL.get(b.trump_card.suit, '?')}"
    if b.HasField("trump_drawn_by"):
        return text + f": {trump} drawn by {name_of(view, b.trump_drawn_by)}, stock empty"
    return text + f": {trump} under the stock, {b.stock_size} cards left"


def teams(view: copas_pb2.TableView) -> list[int]:
    return list(view.bisca.teams)


def sides(view: copas_pb2.TableView) -> list[Text]:
    """Each side's card points this hand and game points: by seat, or by team."""
    if view.hand_number < 0:
        return []
    b = view.bisca
    parts = []
    for side, (points, total) in enumerate(zip(b.side_points, b.side_totals, strict=False)):
        if b.teams:
            names = ", ".join(name_of(view, s) for s, t in enumerate(b.teams) if t == side)
            who = f"team {team_name(side)} ({names})"
        else:
            who = name_of(view, side)
        parts.append(f"{who} {points} card points, {total} game points")
    text = Text("; ".join(parts))
    if b.carried_over:
        text.append(f"  ({b.carried_over} tied hand(s) carried over)")
    return [text]


def drawn(view: copas_pb2.TableView) -> list[Text]:
    """The card the seat drew after the last trick, while it holds it."""
    if not view.bisca.HasField("drawn_card"):
        return []
    return [Text(f"you drew: {pretty(view.bisca.drawn_card)}")]


def hand_summary(event: copas_pb2.HandScored, view: copas_pb2.TableView) -> Text:
    """Card points taken; game points scored and held (by seat)."""
    text = Text(f"hand {event.hand_number + 1} scored: ", style="bold")
    text.append(", ".join(f"{name_of(view, s)} {taken} card points, +{p} (total {t})"
                          for s, (taken, p, t) in enumerate(zip(
                              event.taken, event.points, event.totals, strict=True))))
    return text


def event_line(event: copas_pb2.TableEvent, view: copas_pb2.TableView) -> Text | None:
    kind = event.WhichOneof("kind")
    if kind == "hand_started":
        started = event.hand_started
        return Text(f"— hand {started.hand_number + 1}: trumps {pretty(started.trump_card)}, "
                    f"dealt by {name_of(view, started.dealer)}", style="bold")
    if kind == "cards_drawn":
        d = event.cards_drawn
        line = Text(f"  drawn by {', '.join(name_of(view, s) for s in d.seats)}: "
                    f"{d.stock_size} left in the stock")
        if d.HasField("trump_drawn_by"):
            line.append(f" ({name_of(view, d.trump_drawn_by)} took the trump card)")
        return line
    return None


GAME = ClientGame(
    name="bisca", title="Bisca", first_preset="bisca3", header=header,
    hand_summary=hand_summary, players=2,
    # Seats at a preset that does not seat 2: its bots fill the rest.
    preset_players={"pairs": 4, "four": 4, "three": 3, "six": 6},
    unused_timeouts=("pass_timeout_seconds", "moon_timeout_seconds"),  # no pass, no moon
    teams=teams, status_lines=sides, hand_lines=drawn, event_line=event_line)
