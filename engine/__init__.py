"""Copas rules engine: pure Python, standard library only, no I/O, no clock.

Start with ``Game(Rules.preset("online"), seed)``; act with ``game.apply(action)``; read
what a seat may see with ``player_view`` / ``public_view``.
"""

from engine.actions import (
    Action,
    CardPlayed,
    CardsExchanged,
    ChooseMoon,
    Event,
    GameEndReason,
    GameOver,
    HandScored,
    HandStarted,
    Leave,
    MoonChoice,
    MoonChosen,
    MoonShot,
    PassCards,
    PassChosen,
    PassDirection,
    Phase,
    PlayCard,
    PlayerLeft,
    Standing,
    TrickWon,
    action_from_json,
    action_to_json,
)
from engine.cards import CARDS, QUEEN_SPADES, TWO_CLUBS, Card, Suit, card
from engine.errors import (
    EngineError,
    IllegalActionError,
    InvalidActionError,
    InvalidCardError,
    Reason,
    RecordError,
    RulesError,
)
from engine.game import Game, auto_pass, auto_play, compute_standings, pass_direction_for
from engine.record import dumps, replay, replay_actions, result_of, to_record
from engine.rules import PRESETS, MoonRule, Rules
from engine.views import View, player_view, public_view

__all__ = [
    "CARDS", "PRESETS", "QUEEN_SPADES", "TWO_CLUBS", "Action", "Card", "CardPlayed",
    "CardsExchanged", "ChooseMoon", "EngineError", "Event", "Game", "GameEndReason", "GameOver",
    "HandScored", "HandStarted", "IllegalActionError", "InvalidActionError", "InvalidCardError",
    "Leave", "MoonChoice", "MoonChosen", "MoonRule", "MoonShot", "PassCards", "PassChosen",
    "PassDirection", "Phase", "PlayCard", "PlayerLeft", "Reason", "RecordError", "Rules",
    "RulesError", "Standing", "Suit", "TrickWon", "View", "action_from_json", "action_to_json",
    "auto_pass", "auto_play", "card", "compute_standings", "dumps", "pass_direction_for",
    "player_view", "public_view", "replay", "replay_actions", "result_of", "to_record",
]
