"""What the terminal tools show of a Hearts game: ``copas-demo``'s events and ``copas replay``'s
hands, as text (the demo sees every card: its players are all bots)."""

from __future__ import annotations

from typing import Any

from engine import (
    CardPlayed,
    GameOver,
    HandScored,
    HandStarted,
    MoonShot,
    TrickWon,
    replay,
    result_of,
)
from engine import actions as ev


def event_text(event: ev.Event) -> str:
    """An event as the demo prints it ("": not shown); a card played ends no line (its trick's
    winner follows on it)."""
    if isinstance(event, HandStarted):
        return f"\n== hand {event.hand_number + 1}: pass {event.pass_direction}\n"
    if isinstance(event, CardPlayed):
        return f"  seat {event.seat}: {event.card}"
    if isinstance(event, TrickWon):
        return f"   -> seat {event.winner} takes {event.points}\n"
    if isinstance(event, MoonShot):
        return f"  seat {event.seat} shoots the moon!\n"
    if isinstance(event, HandScored):
        return f"  hand points {list(event.points)}, totals {list(event.totals)}\n"
    if isinstance(event, GameOver):
        return f"\nGAME OVER ({event.reason}):\n" + "".join(
            f"  {row.place}. seat {row.seat}  {row.total} points\n" for row in event.standings)
    return ""


def replay_record(data: dict[str, Any]) -> str:
    """The record replayed through the engine, its result checked: its end reason.

    :raises RecordError: (a ValueError) it does not replay, or its result differs."""
    end: str = result_of(replay(data))["end_reason"]
    return end


def hand_lines(data: dict[str, Any]) -> list[str]:
    """Each hand of a record in a line: pass, points taken and scored, totals, the moon."""
    names = {s["seat"]: s["name"] for s in data.get("seats", [])}
    lines = []
    for hand in data["result"]["hands"]:
        moon = ""
        if hand["moon_shooter"] is not None:
            choice = f", {hand['moon_choice']}" if hand["moon_choice"] else ""
            moon = f"  moon by {names.get(hand['moon_shooter'], hand['moon_shooter'])}{choice}"
        lines.append(f"hand {hand['hand_number'] + 1} (pass {hand['pass_direction'].lower()}): "
                     f"taken {hand['taken']}, points {hand['points']}, totals "
                     f"{hand['totals']}{moon}")
    return lines

