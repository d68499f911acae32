"""Bisca behind the seam: ``MODULE``, the ``GameModule`` the table machine calls for a Bisca
table (docs/RULES.md, "Bisca"). The rules live in ``engine.bisca`` (pure, seeded), the bots in
``ai.bisca``; here is what the server adds: rules from a request within the server's limits,
actions, turns, clocks and pauses (``play``), the contract's forms (``wire``), views and
records (``views``, ``result``), the accounts' view of a finished game (``finished``) and the
bots' worker pool (``bots``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from copas.v1 import copas_pb2

from ai import bisca as bots_ai
from ai.policies import Budget
from engine.actions import GameEndReason
from engine.bisca import (
    Abandon,
    BiscaRules,
    Close,
    Event,
    Game,
    Leave,
    PlayCard,
    PlayerLeft,
    TimeUp,
    action_from_json,
    action_to_json,
    player_view,
)
from engine.bisca import Action as BiscaAction
from engine.bisca import record as bisca_record
from engine.errors import EngineError
from server.errors import ServiceError
from server.games import GameModule, GameState, RecordFacts, RuleLimits, TableFacts
from server.games.bisca import bots, finished, play, text, views, wire
from server.games.bisca.result import BiscaResult

if TYPE_CHECKING:
    import structlog
    from google.protobuf.message import Message

    from server.observability import Metrics
    from server.store.base import GameRecord, RecordSummary

_ENDINGS: dict[str, BiscaAction] = {"idle": Abandon(), "operator": Close(),
                                    "time_limit": TimeUp()}


def _game(state: GameState) -> Game:
    return cast("Game", state)


class BiscaModule:
    """Bisca (docs/RULES.md, "Bisca") as a ``server.games.GameModule``."""

    name = "bisca"
    default_preset = "bisca3"
    bot_policies: tuple[str, ...] = ("auto", *sorted(bots_ai.POLICIES))
    record_format = views.RECORD

    # ------------------------------------------------------------ rules

    def check_rules(self, settings: RuleLimits, preset: str,
                    overrides: Mapping[str, Any]) -> BiscaRules:
        return play.check_rules(settings, preset, overrides)

    def rules_to_pb(self, rules: BiscaRules) -> copas_pb2.Rules:
        return wire.rules_to_pb(rules)

    default_players = 2

    def rules_as_overrides(self, rules: BiscaRules) -> dict[str, Any]:
        return {field.name: getattr(rules, field.name) for field in dataclasses.fields(rules)}

    def missing_clocks(self, rules: BiscaRules) -> str:
        return "" if rules.play_timeout else "a play timeout above 0"

    championship_sizes = (2, 3)
    most_points_win = True

    def championship_tables(self, players: int) -> list[int]:
        """Tables of 2 (Bisca de 2), with one table of 3 when the count is odd (9 -> [3, 2,
        2, 2]): each player for themselves, no partnerships."""
        if players < 2:
            raise ValueError(f"a championship needs at least 2 players, got {players}")
        pairs, odd = divmod(players, 2)
        return [3] + [2] * (pairs - 1) if odd else [2] * pairs

    def end_reason_to_pb(self, reason: str) -> copas_pb2.GameEndReason.ValueType:
        return wire.END_REASON_TO_PB[GameEndReason(reason)]

    def rating_players(self, players: int, partnerships: bool) -> int:
        players = players or 2
        if players not in (2, 3, 4, 6) or (partnerships and players not in (4, 6)) \
                or (players == 6 and not partnerships):
            raise ServiceError.invalid(
                "Bisca's kinds: players 0 (2), 2, 3 or 4 each for themselves; 4 or 6 with "
                "partnerships", "INVALID_RULES")
        return players

    def rules_overrides(self, message: copas_pb2.RulesOverrides) -> dict[str, Any]:
        return wire.rules_overrides(message)

    def rules_from_dict(self, data: dict[str, Any]) -> BiscaRules:
        return BiscaRules.from_dict(data)

    def result_from_dict(self, data: dict[str, Any]) -> BiscaResult:
        return BiscaResult.from_dict(data)

    # ------------------------------------------------------------ actions

    def decode_action(self, method: str, request: Any
                      ) -> tuple[Callable[[int], BiscaAction], object]:
        return play.decode_action(method, request)

    def new_state(self, rules: BiscaRules, seed: int | str) -> Game:
        return Game(rules, seed)

    def started_events(self, state: GameState) -> list[Event]:
        return list(_game(state).started_events)

    def apply(self, state: GameState, action: BiscaAction) -> list[Event]:
        try:
            return _game(state).apply(action)
        except EngineError as error:
            raise play.from_engine(error) from None

    def apply_automatic(self, state: GameState, action: BiscaAction) -> list[Event]:
        try:
            return _game(state).apply(action, is_automatic=True)
        except EngineError as error:  # a bot policy's mistake, a log that does not fit
            raise play.from_engine(error) from None

    def auto_action(self, state: GameState, seat: int) -> PlayCard:
        return _game(state).auto_action(seat)

    def leave(self, seat: int) -> BiscaAction:
        return Leave(seat)

    def is_leave(self, action: BiscaAction) -> bool:
        return isinstance(action, Leave)

    def is_card(self, action: BiscaAction) -> bool:
        return isinstance(action, PlayCard)

    def ending(self, why: str) -> BiscaAction:
        return _ENDINGS[why]

    def abandon(self, state: GameState) -> list[Event]:
        return _game(state).abandon()

    # ------------------------------------------------------------ turns and clocks

    def turn(self, rules: BiscaRules, state: GameState) -> tuple[Hashable, float]:
        return play.turn(rules, _game(state))

    def pause_after(self, rules: BiscaRules, state: GameState, events: list[Event]) -> float:
        return play.pause_after(rules, _game(state), events)

    def seat_totals(self, state: GameState) -> Sequence[int]:
        return _game(state).returns()

    def phase_pb(self, state: GameState) -> int:
        return wire.PHASE_TO_PB[_game(state).phase]

    def phase_name(self, state: GameState) -> str:
        return _game(state).phase.value

    def position(self, state: GameState, seat: int) -> Hashable:
        game = _game(state)
        return (game.phase, game.hand_number, game.trick_number, len(game.trick_cards),
                seat in game.to_act())

    def bot_pace_factor(self, state: GameState) -> float:
        return 1.0

    # ------------------------------------------------------------ events

    def event_to_pb(self, event: Event, players: int, phase_before: int | None
                    ) -> tuple[str, Message]:
        kind, body = wire.event_to_pb(event, players, _sides(players, event))
        if phase_before is not None and isinstance(event, PlayerLeft):
            body.phase = phase_before  # type: ignore[attr-defined]
        return kind, body

    def observe(self, events: list[Event], metrics: Metrics,
                log: structlog.stdlib.BoundLogger) -> None:
        play.observe(events, metrics, log)

    # ------------------------------------------------------------ views, records

    def new_view_cache(self, rules_pb: copas_pb2.Rules) -> None:
        return None

    def public(self, table: TableFacts) -> copas_pb2.TableView:
        return views.public(table)

    public_bytes = staticmethod(views.public_bytes)
    private_part = staticmethod(views.private_part)

    def record(self, table: RecordFacts) -> GameRecord:
        return views.record(table)

    def record_to_pb(self, summary: RecordSummary, message: copas_pb2.GameRecord) -> None:
        views.record_to_pb(summary, message)

    finished_game = staticmethod(finished.finished_game)
    action_to_json = staticmethod(action_to_json)
    action_from_json = staticmethod(action_from_json)

    def deals(self, rules: BiscaRules, seed: int | str, actions: Sequence[Any]
              ) -> list[list[list[str]]]:
        try:
            return bisca_record.deals_of(rules, seed, actions)
        except EngineError:
            return []

    # ------------------------------------------------------------ bots

    event_text = staticmethod(text.event_text)
    replay_record = staticmethod(text.replay_record)
    hand_lines = staticmethod(text.hand_lines)

    def new_bot_pool(self, workers: int) -> bots.BiscaBotPool:
        return bots.BiscaBotPool(workers)

    def bot_budget(self, seconds: float) -> Budget:
        return Budget(playouts=bots_ai.DEFAULT_BUDGET.playouts, seconds=seconds)

    def bot_info(self, state: GameState, seat: int) -> Any:
        return player_view(_game(state), seat)  # what the seat may see, nothing more


def _sides(players: int, event: Event) -> list[int]:
    """Each seat's side for a hand's scores: a HandScored's totals per side say whether the
    game is in partnerships (two sides at four or six seats)."""
    side_count = len(getattr(event, "totals", ())) or players
    return [seat % 2 if side_count == 2 and players > 2 else seat for seat in range(players)]


MODULE: GameModule = BiscaModule()  # mypy checks it keeps the protocol
