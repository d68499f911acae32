"""Drawing a table view in the terminal with rich (used by `copas play` and `copas watch`)."""

from __future__ import annotations

import time

from copas.v1 import cards_pb2, copas_pb2
from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from clients import games
from clients.common import card_key, pretty

PHASE_TEXT = {copas_pb2.PHASE_WAITING_FOR_PLAYERS: "waiting for players",
              copas_pb2.PHASE_PASSING: "passing", copas_pb2.PHASE_PLAYING: "playing",
              copas_pb2.PHASE_MOON_CHOICE: "moon choice", copas_pb2.PHASE_GAME_OVER: "game over"}


def name_of(view: copas_pb2.TableView, seat: int) -> str:
    for p in view.players:
        if p.seat == seat:
            return p.display_name or f"seat {seat}"
    return f"seat {seat}"


def seconds_left(view: copas_pb2.TableView) -> float | None:
    if not view.HasField("deadline"):
        return None
    return max(0.0, view.deadline.ToNanoseconds() / 1e9 - time.time())


def sorted_hand(view: copas_pb2.TableView) -> list[cards_pb2.Card]:
    return sorted(view.hand, key=card_key)


def trick_text(view: copas_pb2.TableView, trick: copas_pb2.Trick) -> Text:
    text = Text()
    for i, tc in enumerate(trick.cards):
        if i:
            text.append("  ")
        text.append(f"{name_of(view, tc.seat)} ")
        text.append(pretty(tc.card), style="bold red" if tc.card.suit in (
            cards_pb2.SUIT_HEARTS, cards_pb2.SUIT_DIAMONDS) else "bold")
    return text


def hand_text(view: copas_pb2.TableView) -> Text:
    legal = {card_key(c) for c in view.legal_cards}
    text = Text()
    for i, c in enumerate(sorted_hand(view), start=1):
        style = "bold green" if card_key(c) in legal else "dim"
        text.append(f"{i}:", style="dim")
        text.append(pretty(c), style=style)
        text.append(" ")
    return text


def team_name(team: int) -> str:
    return "AB"[team] if 0 <= team < 2 else "?"


def render(view: copas_pb2.TableView, title: str = "") -> RenderableType:
    """The whole table: players, trick, last trick, hand, standings, and what its game draws
    of its own (``clients/games/``: its header, teams, lines under the players and the hand)."""
    game = games.get(view)
    header = Text(title + "  " if title else "")
    header.append(f"{PHASE_TEXT.get(view.phase, '?')}")
    if view.hand_number >= 0:
        header.append(game.header(view))
    players = Table(show_edge=False, box=None, padding=(0, 2))
    teams = list(game.teams(view))
    for col in ("seat", "player", *(("team",) if teams else ()), "cards", "hand", "total", ""):
        players.add_column(col)
    left = seconds_left(view)
    for p in view.players:
        status = []
        if p.seat in view.to_act and not view.HasField("paused_until"):
            status.append("to play" if view.phase == copas_pb2.PHASE_PLAYING else "to choose")
            if left is not None:
                status.append(f"{left:.0f}s")
        if view.phase == copas_pb2.PHASE_PASSING and p.has_passed:
            status.append("passed")
        if p.has_left:
            status.append("left")
        elif p.is_bot:
            status.append("bot")
        elif not p.is_connected:
            status.append("offline")
        me = " (you)" if view.HasField("seat") and view.seat == p.seat else ""
        team = (team_name(teams[p.seat]),) if p.seat < len(teams) else ()
        players.add_row(str(p.seat), p.display_name + me, *team, str(p.card_count),
                        str(p.hand_points), str(p.total), " ".join(status))
    parts: list[RenderableType] = [header, players]
    parts.extend(game.status_lines(view))
    if view.trick.cards:
        parts.append(Text("trick: ").append_text(trick_text(view, view.trick)))
    if view.last_trick.cards and (view.HasField("paused_until") or not view.trick.cards):
        line = Text("last trick: ").append_text(trick_text(view, view.last_trick))
        if view.HasField("last_trick_winner"):
            line.append(f"  → {name_of(view, view.last_trick_winner)}")
        parts.append(line)
    if view.HasField("paused_until"):
        parts.append(Text("(pause)", style="dim"))
    if view.hand:
        parts.append(Text("your hand: ").append_text(hand_text(view)))
    parts.extend(game.hand_lines(view))
    if view.standings:
        parts.append(standings_table(view))
    return Panel(Group(*parts), title="Copas", expand=False)


def standings_table(view: copas_pb2.TableView) -> Table:
    table = Table(title="final standings", box=None, padding=(0, 2))
    for col in ("place", "player", "points"):
        table.add_column(col)
    for row in view.standings:
        who = name_of(view, row.seat) + (" (left)" if row.has_left else "")
        table.add_row(str(row.place), who, str(row.total))
    return table


def hand_summary(event: copas_pb2.HandScored, view: copas_pb2.TableView) -> Text:
    """The line of a scored hand, as the view's game writes it."""
    return games.get(view).hand_summary(event, view)


def played_for(view: copas_pb2.TableView, seat: int, is_automatic: bool) -> str:
    """Why the server played a card: a bot's own move is not marked."""
    player = next((p for p in view.players if p.seat == seat), None)
    if not is_automatic or (player is not None and player.is_bot):
        return ""
    if player is not None and player.has_left:
        return " (played for a player who left)"
    return " (out of time: played for them)"


def event_line(event: copas_pb2.TableEvent, view: copas_pb2.TableView | None = None
               ) -> Text | None:
    """One line for the events worth a line of their own (names from ``view``, else the
    event's own)."""
    view = event.view if view is None or event.HasField("view") else view
    kind = event.WhichOneof("kind")
    if kind == "card_played":
        e = event.card_played
        return Text(f"  {name_of(view, e.seat)} plays {pretty(e.card)}"
                    f"{played_for(view, e.seat, e.is_automatic)}")
    if kind == "trick_won":
        t = event.trick_won
        return Text(f"  → {name_of(view, t.winner)} takes the trick"
                    + (f" (+{t.points})" if t.points else ""))
    own = games.get(view).event_line(event, view)
    if own is not None:
        return own
    if kind == "hand_scored":
        return hand_summary(event.hand_scored, view)
    if kind == "turn_timed_out":
        return Text(f"  {name_of(view, event.turn_timed_out.seat)} ran out of time",
                    style="yellow")
    if kind == "player_left":
        return Text(f"  {name_of(view, event.player_left.seat)} left the table", style="yellow")
    if kind == "player_joined":
        return Text(f"  {event.player_joined.display_name} joined")
    return None
