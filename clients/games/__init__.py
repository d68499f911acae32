"""The games the reference clients know, each in a module of this package named as the game
(``<game>.py``) exporting ``GAME``, a ``ClientGame``: found by listing the package, never by name
(as the server reaches ``server/games/<name>/`` through ``server.games.get``). The generic
clients (``render``, ``play``, ``bots``, ``cli``) ask ``get(view or name)`` for what depends on
a game's rules: its screen's lines, its table's seats, the timeouts it has no use for."""

from __future__ import annotations

import argparse
import pkgutil
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import import_module

from copas.v1 import cards_pb2, copas_pb2
from rich.console import RenderableType
from rich.text import Text

ViewChoice = Callable[[copas_pb2.TableView, random.Random], list[cards_pb2.Card]]
ViewLines = Callable[[copas_pb2.TableView], Sequence[RenderableType]]
EventLine = Callable[[copas_pb2.TableEvent, copas_pb2.TableView], Text | None]


def _no_lines(view: copas_pb2.TableView) -> Sequence[RenderableType]:
    return ()


def _no_event_line(event: copas_pb2.TableEvent, view: copas_pb2.TableView) -> Text | None:
    return None


def _no_teams(view: copas_pb2.TableView) -> Sequence[int]:
    return ()


@dataclass(frozen=True)
class ClientGame:
    """What the terminal clients need of one game (the contract's ``Rules.game``)."""

    name: str
    """The game's name in the contract (``CreateTableRequest.game``, ``Rules.game``)."""
    title: str
    """Its name in a sentence ('copas: clients of ...')."""
    first_preset: str
    """The preset the server takes when a request names none (the help text says it)."""
    header: Callable[[copas_pb2.TableView], str]
    """The screen's header after its phase, once a hand is dealt: ' · hand 1 · ...'."""
    hand_summary: Callable[[copas_pb2.HandScored, copas_pb2.TableView], Text]
    """The line of a scored hand."""
    is_default: bool = False
    """The contract's game when a request or a view names none (exactly one game says so): a
    table of it is made without naming it, as clients before the second game made it."""
    players: int = 4
    """Seats at a table ``copas play`` makes when neither ``--players`` nor its preset says."""
    preset_players: Mapping[str, int] = field(default_factory=dict)
    """Seats of the presets that do not seat ``players`` (the server's presets are the truth:
    a preset and a count that do not go together are refused with the accepted values)."""
    unused_timeouts: tuple[str, ...] = ()
    """``RulesOverrides`` timeouts of decisions this game has not (cleared when a bot table is
    made with every timeout zero)."""
    teams: Callable[[copas_pb2.TableView], Sequence[int]] = _no_teams
    """Each seat's team (by seat), empty without partnerships."""
    status_lines: ViewLines = _no_lines
    """Lines drawn under the players' table (e.g. each side's points)."""
    hand_lines: ViewLines = _no_lines
    """Lines drawn under the seat's hand (e.g. the card it drew)."""
    event_line: EventLine = _no_event_line
    """The line of an event of this game's own (None: the generic line, if any)."""
    view_policies: Mapping[str, ViewChoice] = field(default_factory=dict)
    """Bot policies that are plain functions of the view, by name, offered at every table (a
    policy chooses among the view's legal cards, whichever the game)."""


_GAMES: dict[str, ClientGame] = {}


def _load() -> dict[str, ClientGame]:
    """Every module of this package, imported once: the default game first, then by name."""
    if not _GAMES:
        found = [import_module(f"{__name__}.{m.name}").GAME
                 for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")]
        defaults = [g.name for g in found if g.is_default]
        if len(defaults) != 1:
            raise RuntimeError(f"clients.games: exactly one default game, not {defaults}")
        for game in sorted(found, key=lambda g: (not g.is_default, g.name)):
            _GAMES[game.name] = game
    return _GAMES


def every() -> tuple[ClientGame, ...]:
    """Every game, the default first."""
    return tuple(_load().values())


def names() -> tuple[str, ...]:
    """The games' names, the default first."""
    return tuple(_load())


def default() -> ClientGame:
    return next(iter(_load().values()))


def get(game: str | copas_pb2.TableView = "") -> ClientGame:
    """The game of a name ("": the default one), or of a view (its ``rules.game``: the default
    game's screen for a game these clients do not know, a newer server's).

    :raises KeyError: the clients know no game of that name."""
    if isinstance(game, str):
        return _load()[game] if game else default()
    return _load().get(game.rules.game) or default()




def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--game`` and ``--preset`` of a table a client makes."""
    every_game = every()
    parser.add_argument("--game", choices=names(), default=every_game[0].name,
                        help="the game of a created table")
    firsts = ", ".join(g.first_preset for g in every_game)
    parser.add_argument("--preset", default="", help="preset of a created table (default: the "
                                                     f"game's first: {firsts})")
