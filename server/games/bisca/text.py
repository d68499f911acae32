"""What the terminal tools show of a Bisca game: ``copas-demo``'s events and ``copas replay``'s
hands, as text (the demo sees every card: its players are all bots; the draws it shows by
their count only, as a seat's neighbours see them)."""

from __future__ import annotations

from typing import Any

from engine.bisca import (
    CardPlayed,
    CardsDrawn,
    Event,
    GameOver,
    HandScored,
    HandStarted,
    TrickWon,
)
from engine.bisca import record as bisca_record


def event_text(event: Event) -> str:
    """An event as the demo prints it ("": not shown); a card played ends no line (its trick's
    winner follows on it)."""
    if isinstance(event, HandStarted):
        return (f"\n== hand {event.hand_number + 1}: trumps {event.trump_card}, "
                f"seat {event.leader} leads\n")
    if isinstance(event, CardPlayed):
        return f"  seat {event.seat}: {event.card}"
    if isinstance(event, TrickWon):
        return f"   -> seat {event.winner} takes {event.points}\n"
    if isinstance(event, CardsDrawn):
        return f"  drawn, {event.stock_size} left in the stock\n" if event.stock_size else ""
    if isinstance(event, HandScored):
        return (f"  card points {list(event.side_points)}, game points "
                f"{list(event.game_points)}, totals {list(event.totals)}\n")
    if isinstance(event, GameOver):
        return f"\nGAME OVER ({event.reason}):\n" + "".join(
            f"  {row.place}. seat {row.seat} (side {row.side})  {row.total} game points\n"
            for row in event.standings)
    return ""


def replay_record(data: dict[str, Any]) -> str:
    """The record replayed through the engine, its result checked: its end reason.

    :raises RecordError: (a ValueError) it does not replay, or its result differs."""
    end: str = bisca_record.result_of(bisca_record.replay(data))["end_reason"]
    return end


def hand_lines(data: dict[str, Any]) -> list[str]:
    """Each hand of a record in a line: trumps, card points, the winner, game points, totals."""
    lines = []
    for hand in data["result"]["hands"]:
        winner = "tied" if hand["winner"] is None else f"side {hand['winner']} wins"
        lines.append(f"hand {hand['hand_number'] + 1} (trumps {hand['trump_card']}): card "
                     f"points {hand['side_points']} ({winner}), game points "
                     f"{hand['game_points']}, totals {hand['totals']}")
    return lines
