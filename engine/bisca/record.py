"""Bisca game records: (rules, seed, actions) as JSON, and replay through the engine.

A record says which game it holds (``"game": "bisca"``) and carries the result (per-hand
points, game points, leavers, standings), so a reader needs no engine to see who won;
``replay`` recomputes it and checks that it matches.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from engine.bisca.actions import Action, action_from_json, action_to_json
from engine.bisca.cards import cards_of
from engine.bisca.game import Game
from engine.bisca.rules import BiscaRules
from engine.errors import EngineError, RecordError

GAME = "bisca"
RECORD_FORMAT = 1


def result_of(game: Game) -> dict[str, Any]:
    """The game's result as JSON-ready data."""
    return {
        "is_over": game.is_over,
        "end_reason": str(game.end_reason) if game.end_reason else None,
        "totals": list(game.totals),
        "hands": [
            {"hand_number": h.hand_number, "trump_card": str(h.trump_card),
             "points": list(h.points), "side_points": list(h.side_points),
             "winner": h.winner, "game_points": list(h.game_points), "totals": list(h.totals)}
            for h in game.hands_played
        ],
        "leavers": [{"seat": lv.seat, "hand_number": lv.hand_number,
                     "trick_number": lv.trick_number} for lv in game.left],
        "standings": [{"seat": r.seat, "place": r.place, "side": r.side, "total": r.total,
                       "has_left": r.has_left} for r in game.standings],
    }


def to_record(game: Game) -> dict[str, Any]:
    return {
        "game": GAME,
        "format": RECORD_FORMAT,
        "rules": game.rules.to_dict(),
        "seed": game.seed,
        "actions": [action_to_json(a) for a in game.actions],
        "result": result_of(game),
    }


def dumps(game: Game) -> str:
    return json.dumps(to_record(game), separators=(",", ":"), ensure_ascii=False)


def replay_actions(rules: BiscaRules, seed: int | str, actions: Iterable[Action]) -> Game:
    """The game that (rules, seed, actions) produce."""
    game = Game(rules, seed)
    for action in actions:
        game.apply(action)
    return game


def deals_of(rules: BiscaRules, seed: int | str, actions: Iterable[Action]
             ) -> list[list[list[str]]]:
    """Each hand's deal, by replaying the seed: per hand played, each seat's cards as dealt
    (the cards drawn after each trick are not in it), as text in the engine's order. A record
    shows it once its game is over, when the seed is public too.

    :raises EngineError: the actions do not replay from ``seed``.
    """
    game = Game(rules, seed)
    deals = [[[str(c) for c in cards_of(mask)] for mask in game.dealt]]
    for action in actions:
        game.apply(action)
        if game.hand_number >= len(deals):
            deals.append([[str(c) for c in cards_of(mask)] for mask in game.dealt])
    return deals


def replay(record: dict[str, Any] | str, *, check_result: bool = True) -> Game:
    """Re-run a record through the engine; with ``check_result``, raise RecordError when the
    recomputed result differs from the stored one.

    :raises RecordError: not a Bisca record, unreadable, or it does not replay.
    """
    try:
        data = json.loads(record) if isinstance(record, str) else record
        if data.get("game") != GAME:
            raise RecordError(f"not a Bisca record (game {data.get('game')!r})")
        if data.get("format") != RECORD_FORMAT:
            raise RecordError(f"unsupported Bisca record format {data.get('format')!r}")
        rules = BiscaRules.from_dict(data["rules"])
        seed = data["seed"]
        actions = [action_from_json(a) for a in data["actions"]]
    except (KeyError, TypeError, AttributeError, json.JSONDecodeError) as exc:
        raise RecordError(f"unreadable Bisca record: {exc}") from None
    except RecordError:
        raise
    except EngineError as exc:
        raise RecordError(f"unreadable Bisca record: {exc}") from None
    try:
        game = replay_actions(rules, seed, actions)
    except EngineError as exc:
        raise RecordError(f"Bisca record does not replay: {exc}") from None
    if check_result and "result" in data and data["result"] != result_of(game):
        raise RecordError("replayed result differs from the recorded one")
    return game
