"""Bisca, the Portuguese point-trick game of the 40-card pack: pure Python, standard library
only, no I/O, no clock (docs/RULES.md, "Bisca").

Start with ``Game(BiscaRules.preset("bisca3"), seed)``; act with ``game.apply(action)`` (or
the OpenSpiel-shaped ``current_player`` / ``legal_actions`` / ``apply_action``); read what a
seat may see with ``player_view`` / ``public_view``; record and replay with ``to_record`` /
``replay``.
"""

from engine.bisca.actions import (
    Abandon,
    Action,
    CardPlayed,
    CardsDrawn,
    Close,
    Event,
    GameOver,
    HandScored,
    HandStarted,
    Leave,
    Phase,
    PlayCard,
    PlayerLeft,
    Standing,
    TimeUp,
    TrickWon,
    action_from_json,
    action_to_json,
)
from engine.bisca.cards import CARD_POINTS, CARDS, Card, card, cards_of, pack_for
from engine.bisca.game import (
    Game,
    HandResult,
    auto_card,
    compute_standings,
    game_points_for,
    legal_mask,
    trick_winner,
)
from engine.bisca.record import dumps, replay, replay_actions, result_of, to_record
from engine.bisca.rules import PRESETS, BiscaRules, FollowSuit, TieRule
from engine.bisca.views import View, player_view, public_view

__all__ = [
    "CARDS",
    "CARD_POINTS",
    "PRESETS",
    "Abandon",
    "Action",
    "BiscaRules",
    "Card",
    "CardPlayed",
    "CardsDrawn",
    "Close",
    "Event",
    "FollowSuit",
    "Game",
    "GameOver",
    "HandResult",
    "HandScored",
    "HandStarted",
    "Leave",
    "Phase",
    "PlayCard",
    "PlayerLeft",
    "Standing",
    "TieRule",
    "TimeUp",
    "TrickWon",
    "View",
    "action_from_json",
    "action_to_json",
    "auto_card",
    "card",
    "cards_of",
    "compute_standings",
    "dumps",
    "game_points_for",
    "legal_mask",
    "pack_for",
    "player_view",
    "public_view",
    "replay",
    "replay_actions",
    "result_of",
    "to_record",
    "trick_winner",
]
