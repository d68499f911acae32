"""Bisca's rules at a table: the rules a new table may ask for (within this server's limits),
its actions as the requests carry them, its turns, clocks and pauses, and its events counted
and logged."""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Mapping
from typing import TYPE_CHECKING, Any

from engine.actions import GameEndReason
from engine.bisca import Action as BiscaAction
from engine.bisca import (
    BiscaRules,
    Event,
    Game,
    GameOver,
    HandScored,
    Leave,
    Phase,
    PlayCard,
    TrickWon,
)
from engine.errors import EngineError, IllegalActionError, RulesError
from server.errors import ServiceError
from server.games.base import RuleLimits
from server.games.bisca import wire
from server.games.limits import check_limits

if TYPE_CHECKING:
    import structlog

    from server.observability import Metrics

# The server's timing defaults a Bisca table takes (Hearts's pass and moon clocks it has not).
_TIMINGS = ("play_timeout", "trick_pause", "hand_pause")


def from_engine(error: EngineError) -> ServiceError:
    """Malformed -> INVALID_ARGUMENT; illegal now -> FAILED_PRECONDITION."""
    reason = str(error.reason)
    if isinstance(error, IllegalActionError):
        return ServiceError.precondition(error.message, reason)
    return ServiceError.invalid(error.message, reason)


def check_rules(settings: RuleLimits, preset: str, overrides: Mapping[str, Any]
                ) -> BiscaRules:
    """The rules of ``preset`` (docs/RULES.md, "Bisca") with ``overrides``, the server's
    timing defaults beneath, within this server's limits.

    :raises ServiceError: INVALID_ARGUMENT (INVALID_RULES) naming the option."""
    defaults = {k: v for k, v in settings.rule_defaults.items() if k in _TIMINGS}
    try:
        rules = BiscaRules.preset(preset or "bisca3", **{**defaults, **overrides})
    except RulesError as error:
        raise ServiceError.invalid(error.message, "INVALID_RULES") from None
    check_limits(settings, rules, ("play_timeout",))  # no pass, no moon
    return rules


def decode_action(method: str, request: Any) -> tuple[Callable[[int], BiscaAction], object]:
    """A request as Bisca's action for a seat, and what it means (for its request_id's
    fingerprint): PlayCard and LeaveTable; Bisca has no pass and no moon.

    :raises ServiceError: INVALID_ARGUMENT for a malformed card or an action Bisca has not."""
    if method == "PlayCard":
        card = wire.card_from_pb(request.card)
        return (lambda seat: PlayCard(seat, card)), int(card)
    if method == "PassCards":
        raise ServiceError.invalid(
            "Bisca has no passing: every card is played to a trick (PlayCard), and the "
            "server draws from the stock for you after each trick", "INVALID_ACTION")
    if method == "ChooseMoon":
        raise ServiceError.invalid(
            "Bisca has no moon to shoot: the side with the most card points wins the hand "
            "(PlayCard is Bisca's only move)", "INVALID_ACTION")
    return Leave, None


def turn(rules: BiscaRules, game: Game) -> tuple[Hashable, float]:
    """The turn now (a deadline lasts while it does) and its timeout."""
    if game.phase is Phase.PLAYING:
        return ((game.phase, game.hand_number, game.trick_number, len(game.trick_cards)),
                rules.play_timeout)
    return (game.phase, game.hand_number), 0.0


def pause_after(rules: BiscaRules, game: Game, events: list[Event]) -> float:
    """The pause after ``events`` (a hand scored, a trick won): seconds."""
    if any(isinstance(e, HandScored) for e in events):
        return rules.hand_pause
    if any(isinstance(e, TrickWon) for e in events) and game.phase is Phase.PLAYING:
        return rules.trick_pause
    return 0.0


def observe(events: list[Event], metrics: Metrics, log: structlog.stdlib.BoundLogger) -> None:
    """Count and log (at debug) the events of a live step: engine events hold only public
    information (which card a seat drew is never in one)."""
    is_debug = log.is_enabled_for(logging.DEBUG)
    for event in events:
        if is_debug:
            log.debug("game_event", kind=type(event).__name__,
                      **{k: v if isinstance(v, (int, bool, type(None))) else str(v)
                         for k, v in event._asdict().items() if k != "standings"})
        if isinstance(event, GameOver):
            metrics.games_finished.labels(GameEndReason(event.reason).value.lower()).inc()
