"""Hearts's rules at a table: the rules a new table may ask for (within this server's limits),
its turns and their clocks, its pauses, and its events counted and logged. Moved from
``server/tables`` (creation, timers, events) behind the game seam."""

from __future__ import annotations

import logging
from collections.abc import Hashable, Mapping
from typing import TYPE_CHECKING, Any

from copas.v1 import copas_pb2
from google.protobuf.message import Message

from engine import (
    Card,
    EngineError,
    Game,
    GameOver,
    HandScored,
    IllegalActionError,
    MoonShot,
    Phase,
    PlayerLeft,
    Rules,
    RulesError,
    TrickWon,
)
from engine import actions as ev
from server.errors import ServiceError
from server.games.base import RuleLimits
from server.games.hearts import codec
from server.games.limits import check_limits

if TYPE_CHECKING:
    import structlog

    from server.observability import Metrics


def from_engine(error: EngineError) -> ServiceError:
    """Malformed -> INVALID_ARGUMENT; illegal now -> FAILED_PRECONDITION (moved from
    ``server/errors.py``: the engine's errors are Hearts's)."""
    reason = str(error.reason)
    if isinstance(error, IllegalActionError):
        return ServiceError.precondition(error.message, reason)
    return ServiceError.invalid(error.message, reason)


def check_rules(settings: RuleLimits, preset: str, overrides: Mapping[str, Any]) -> Rules:
    """The rules of ``preset`` with ``overrides`` (the server's defaults beneath), within this
    server's limits.

    :raises ServiceError: INVALID_ARGUMENT (INVALID_RULES, or the engine's reason)."""
    try:
        rules = Rules.preset(preset, **{**settings.rule_defaults, **overrides})
    except RulesError as error:
        raise from_engine(error) from None
    if rules.point_limit > settings.max_point_limit:
        raise ServiceError.invalid(
            f"point_limit is at most {settings.max_point_limit} on this server", "INVALID_RULES")
    check_limits(settings, rules, ("play_timeout", "pass_timeout", "moon_timeout"))
    return rules


def event_to_pb(event: ev.Event, players: int, phase_before: int | None
                ) -> tuple[str, Message]:
    """An engine event as TableEvent's oneof field (``codec``'s), a leave with the phase
    it happened in (``phase_before``, when given)."""
    kind, body = codec.event_to_pb(event, players)
    if phase_before is not None and isinstance(body, copas_pb2.PlayerLeft):
        body.phase = phase_before  # type: ignore[assignment]
    return kind, body


def pause_after(rules: Rules, game: Game, events: list[ev.Event]) -> float:
    """The pause the rules give after ``events`` (a hand scored, a trick won): seconds."""
    if any(isinstance(e, HandScored) for e in events):
        return rules.hand_pause
    if any(isinstance(e, TrickWon) for e in events) and game.phase is Phase.PLAYING:
        return rules.trick_pause
    return 0.0


def turn(rules: Rules, game: Game) -> tuple[Hashable, float]:
    """The turn now (a deadline lasts while it does) and its timeout."""
    if game.phase is Phase.PASSING:
        return (game.phase, game.hand_number), rules.pass_timeout
    if game.phase is Phase.PLAYING:
        return ((game.phase, game.hand_number, game.trick_number, len(game.trick_cards)),
                rules.play_timeout)
    return (game.phase, game.hand_number), rules.moon_timeout


def observe(events: list[ev.Event], metrics: Metrics, log: structlog.stdlib.BoundLogger
            ) -> None:
    """Count and log (at debug) the engine's events of a live step."""
    is_debug = log.is_enabled_for(logging.DEBUG)
    for event in events:
        if is_debug:
            log.debug("game_event", kind=type(event).__name__, **_public_fields(event))
        if isinstance(event, MoonShot):
            metrics.moons.inc()
        elif isinstance(event, GameOver):
            metrics.games_finished.labels(event.reason.value.lower()).inc()
        elif isinstance(event, PlayerLeft):
            log.debug("player_left", seat=event.seat)


def _public_fields(event: ev.Event) -> dict[str, Any]:
    """Log fields of an engine event; engine events hold only public information."""
    out: dict[str, Any] = {}
    for key, value in event._asdict().items():
        if key == "standings":
            out[key] = [(r.seat, r.place, r.total) for r in value]
        elif key == "cards":
            out[key] = " ".join(map(str, value))
        elif isinstance(value, (int, bool, tuple, type(None))) and not isinstance(value, Card):
            out[key] = value
        else:
            out[key] = str(value)
    return out
