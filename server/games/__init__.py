"""The seam between the generic machine and a game: what a table asks of its game
(``GameModule``), the read-only face a table shows a game's view builder (``TableFacts``),
and the registry of the games this server plays, by name.

Modelled on OpenSpiel's ``Game``/``State`` (a game's parameters and a new initial state; whose
turn, legal actions, apply, returns, an observer per player) and boardgame.io's game object
handed to a game-agnostic ``Master`` (setup, moves, endIf, playerView). The table machine
(``server/tables``) holds a game's state, actions and events as opaque values and calls its
module for everything that depends on the rules; a game lives in its engine package and its
module, ``server/games/<name>/``, which exports ``MODULE``. Nothing here names a game but the
registry's list of names and the default one (the game of a table or record that says none).
"""

from __future__ import annotations

from importlib import import_module

from server.games.base import (
    BotPool,
    GameAction,
    GameEvent,
    GameModule,
    GameRules,
    GameState,
    RecordFacts,
    RuleLimits,
    RuleOverrides,
    SeatFacts,
    TableFacts,
)
from server.games.names import DEFAULT_GAME, GAMES

__all__ = ["DEFAULT_GAME", "GAMES", "BotPool", "GameAction", "GameEvent", "GameModule",
           "GameRules", "GameState", "RecordFacts", "RuleLimits", "RuleOverrides", "SeatFacts",
           "TableFacts", "bot_policies", "get"]

_LOADED: dict[str, GameModule] = {}


def get(name: str = "") -> GameModule:
    """The module of game ``name`` ("" for the default).

    :raises KeyError: this server plays no game of that name."""
    name = name or DEFAULT_GAME
    module = _LOADED.get(name)
    if module is None:
        if name not in GAMES:
            raise KeyError(name)
        module = _LOADED[name] = import_module(f"server.games.{name}").MODULE
    return module


def bot_policies() -> tuple[str, ...]:
    """The bot policies of every game ("auto" first)."""
    names = {policy for game in GAMES for policy in get(game).bot_policies}
    return ("auto", *sorted(names - {"auto"}))
