"""Game records: (rules, seed, actions) as JSON, and replay through the engine.

A record also carries the result (per-hand points, moons, standings, leavers) so a reader
needs no engine to see who won; ``replay`` recomputes it and checks that it matches.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from engine.actions import Action, action_from_json, action_to_json
from engine.cards import cards_of
from engine.errors import EngineError, RecordError
from engine.game import Game
from engine.rules import Rules

RECORD_FORMAT = 1


def result_of(game: Game) -> dict[str, Any]:
    """Everything a championship needs from a game, as JSON-ready data."""
    return {
        "is_over": game.is_over,
        "end_reason": str(game.end_reason) if game.end_reason else None,
        "totals": list(game.totals),
        "hands": [
            {"hand_number": h.hand_number, "pass_direction": str(h.pass_direction),
             "taken": list(h.taken), "points": list(h.points), "totals": list(h.totals),
             "moon_shooter": h.moon_shooter,
             "moon_choice": str(h.moon_choice) if h.moon_choice else None}
            for h in game.hands_played
        ],
        "leavers": [{"seat": lv.seat, "hand_number": lv.hand_number,
                     "trick_number": lv.trick_number} for lv in game.left],
        "standings": [{"seat": r.seat, "place": r.place, "total": r.total,
                       "has_left": r.has_left} for r in game.standings],
    }


def to_record(game: Game) -> dict[str, Any]:
    return {
        "format": RECORD_FORMAT,
        "rules": game.rules.to_dict(),
        "seed": game.seed,
        "actions": [action_to_json(a) for a in game.actions],
        "result": result_of(game),
    }


def dumps(game: Game) -> str:
    return json.dumps(to_record(game), separators=(",", ":"))


def replay_actions(rules: Rules, seed: int | str, actions: Iterable[Action]) -> Game:
    """The game that (rules, seed, actions) produce."""
    game = Game(rules, seed)
    for action in actions:
        game.apply(action)
    return game


def deals_of(rules: Rules, seed: int | str, actions: Iterable[Action]) -> list[list[list[str]]]:
    """Each hand's deal, by replaying the seed: per hand played, each seat's cards as dealt
    (before the pass), as text in the engine's order (♣ ♦ ♠ ♥, then rank). A record shows it
    once its game is over, when the seed is public too.

    :raises EngineError: the actions do not replay from ``seed``.
    """
    game = Game(rules, seed)
    deals = [[[c.text for c in cards_of(mask)] for mask in game.dealt]]
    for action in actions:
        game.apply(action)
        if game.hand_number >= len(deals):
            deals.append([[c.text for c in cards_of(mask)] for mask in game.dealt])
    return deals


def replay(record: dict[str, Any] | str, *, check_result: bool = True) -> Game:
    """Re-run a record through the engine; with ``check_result``, raise RecordError when
    the recomputed result differs from the stored one."""
    try:
        data = json.loads(record) if isinstance(record, str) else record
        if data.get("format") != RECORD_FORMAT:
            raise RecordError(f"unsupported record format {data.get('format')!r}")
        rules = Rules.from_dict(data["rules"])
        seed = data["seed"]
        actions = [action_from_json(a) for a in data["actions"]]
    except (KeyError, TypeError, AttributeError, json.JSONDecodeError) as exc:
        raise RecordError(f"unreadable game record: {exc}") from None
    try:
        game = replay_actions(rules, seed, actions)
    except EngineError as exc:
        raise RecordError(f"record does not replay: {exc}") from None
    if check_result and "result" in data and data["result"] != result_of(game):
        raise RecordError("replayed result differs from the recorded one")
    return game
