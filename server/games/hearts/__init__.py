"""Hearts behind the seam: ``MODULE``, the ``GameModule`` the table machine calls for a Hearts
table. The rules live in ``engine`` (pure, seeded), the bots in ``ai``; here is what the server
adds: rules from a request within the server's limits (``play``), turns, clocks and pauses
(``play``), the events on the wire (``codec``), views and records (``views``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import ai
from engine import (
    Abandon,
    Close,
    EngineError,
    Game,
    GameEndReason,
    Leave,
    Phase,
    PlayCard,
    Rules,
    TimeUp,
    action_from_json,
    action_to_json,
)
from engine import actions as ev
from engine.record import RECORD_FORMAT, deals_of
from server.errors import ServiceError
from server.games import GameModule, GameState, RecordFacts, RuleLimits, TableFacts
from server.games.hearts import actions, codec, finished, play, text, views
from server.games.hearts.result import GameResult

if TYPE_CHECKING:
    import structlog
    from copas.v1 import copas_pb2

    from server.observability import Metrics
    from server.store.base import GameRecord, RecordSummary

_ENDINGS: dict[str, ev.Action] = {"idle": Abandon(), "operator": Close(),
                                  "time_limit": TimeUp()}


def _game(state: GameState) -> Game:
    return cast("Game", state)


class HeartsModule:
    """Hearts (docs/RULES.md) as a ``server.games.GameModule``."""

    name = "hearts"
    default_preset = "online"
    bot_policies: tuple[str, ...] = ("auto", *sorted(ai.POLICIES))

    def check_rules(self, settings: RuleLimits, preset: str,
                    overrides: Mapping[str, Any]) -> Rules:
        return play.check_rules(settings, preset, overrides)

    def rules_to_pb(self, rules: Rules) -> copas_pb2.Rules:
        return codec.rules_to_pb(rules)

    default_players = 4

    def rules_as_overrides(self, rules: Rules) -> codec.RuleOverrides:
        return {field.name: getattr(rules, field.name) for field in dataclasses.fields(rules)}

    def missing_clocks(self, rules: Rules) -> str:
        if rules.play_timeout and rules.pass_timeout and rules.moon_timeout:
            return ""
        return "play, pass and moon timeouts above 0"

    championship_sizes = (3, 4, 5)
    most_points_win = False

    def championship_tables(self, players: int) -> list[int]:
        """As many tables of 4 as possible with at most two tables of another size, fives
        before threes (13 -> [5, 4, 4])."""
        if players < 3:
            raise ValueError(f"a championship needs at least 3 players, got {players}")
        fours, rest = divmod(players, 4)
        if rest == 0:
            return [4] * fours
        if rest == 1:
            return [5] + [4] * (fours - 1)
        if rest == 2:
            return [3, 3] if players == 6 else [5, 5] + [4] * (fours - 2)
        return [4] * fours + [3]

    def end_reason_to_pb(self, reason: str) -> copas_pb2.GameEndReason.ValueType:
        return codec.END_REASON_TO_PB[GameEndReason(reason)]

    def rating_players(self, players: int, partnerships: bool) -> int:
        players = players or 4
        if players not in (3, 4, 5) or partnerships:
            raise ServiceError.invalid("players must be 0 (4), 3, 4 or 5 (Hearts has no "
                                       "partnerships)", "INVALID_RULES")
        return players

    def rules_overrides(self, message: copas_pb2.RulesOverrides) -> codec.RuleOverrides:
        if message.HasField("bisca"):
            raise ServiceError.invalid(
                "rules.bisca holds Bisca's options: a Hearts table takes the Hearts options "
                "(create a Bisca table with game \"bisca\")", "INVALID_RULES")
        return codec.rules_overrides(message)

    record_format = RECORD_FORMAT

    def rules_from_dict(self, data: dict[str, Any]) -> Rules:
        return Rules.from_dict(data)

    def result_from_dict(self, data: dict[str, Any]) -> GameResult:
        return GameResult.from_dict(data)

    def record_to_pb(self, summary: RecordSummary, message: copas_pb2.GameRecord) -> None:
        views.record_to_pb(summary, message)

    def decode_action(self, method: str, request: Any
                      ) -> tuple[Callable[[int], ev.Action], object]:
        return actions.decode_action(method, request)

    def new_state(self, rules: Rules, seed: int | str) -> Game:
        return Game(rules, seed)

    def started_events(self, state: GameState) -> list[ev.Event]:
        return list(_game(state).started_events)

    def apply(self, state: GameState, action: ev.Action) -> list[ev.Event]:
        try:
            return _game(state).apply(action)
        except EngineError as error:
            raise play.from_engine(error) from None

    def apply_automatic(self, state: GameState, action: ev.Action) -> list[ev.Event]:
        try:
            return _game(state).apply(action, is_automatic=True)
        except EngineError as error:  # a bot policy's mistake, a log that does not fit
            raise play.from_engine(error) from None

    def auto_action(self, state: GameState, seat: int) -> ev.Action:
        return _game(state).auto_action(seat)

    def leave(self, seat: int) -> ev.Action:
        return Leave(seat)

    def is_leave(self, action: ev.Action) -> bool:
        return isinstance(action, Leave)

    def is_card(self, action: ev.Action) -> bool:
        return isinstance(action, PlayCard)

    def ending(self, why: str) -> ev.Action:
        return _ENDINGS[why]

    def abandon(self, state: GameState) -> list[ev.Event]:
        return _game(state).abandon()

    def turn(self, rules: Rules, state: GameState) -> tuple[Hashable, float]:
        return play.turn(rules, _game(state))

    def pause_after(self, rules: Rules, state: GameState, events: list[ev.Event]) -> float:
        return play.pause_after(rules, _game(state), events)

    def seat_totals(self, state: GameState) -> Sequence[int]:
        return _game(state).totals

    def phase_pb(self, state: GameState) -> int:
        return codec.PHASE_TO_PB[_game(state).phase]

    def phase_name(self, state: GameState) -> str:
        return _game(state).phase.value

    def position(self, state: GameState, seat: int) -> Hashable:
        game = _game(state)
        return (game.phase, game.hand_number, game.trick_number, len(game.trick_cards),
                seat in game.to_act())

    def bot_pace_factor(self, state: GameState) -> float:
        return PASS_PACE if _game(state).phase is Phase.PASSING else 1.0

    event_to_pb = staticmethod(play.event_to_pb)  # every event of every step: no call between

    def observe(self, events: list[ev.Event], metrics: Metrics,
                log: structlog.stdlib.BoundLogger) -> None:
        play.observe(events, metrics, log)

    def new_view_cache(self, rules_pb: copas_pb2.Rules) -> views.ViewCache:
        return views.ViewCache(rules_pb)

    def public(self, table: TableFacts) -> copas_pb2.TableView:
        return views.public(table)

    # Built at every step (the shared view) and for every seat watching: the functions
    # themselves, with no call in between.
    public_bytes = staticmethod(views.public_bytes)
    private_part = staticmethod(views.private_part)

    def record(self, table: RecordFacts) -> GameRecord:
        return views.record(table)

    finished_game = staticmethod(finished.finished_game)
    action_to_json = staticmethod(action_to_json)  # every logged step
    action_from_json = staticmethod(action_from_json)

    def deals(self, rules: Rules, seed: int | str, actions: Sequence[ev.Action]
              ) -> list[list[list[str]]]:
        try:
            return deals_of(rules, seed, actions)
        except EngineError:
            return []

    event_text = staticmethod(text.event_text)
    replay_record = staticmethod(text.replay_record)
    hand_lines = staticmethod(text.hand_lines)

    def new_bot_pool(self, workers: int) -> ai.BotPool:
        return ai.BotPool(workers)

    def bot_budget(self, seconds: float) -> ai.Budget:
        return ai.Budget(seconds=seconds)

    def bot_info(self, state: GameState, seat: int) -> ai.InfoSet:
        return ai.info_from_game(_game(state), seat)


PASS_PACE = 1.5  # a bot's pass takes this many times its pace (three cards to choose)

MODULE: GameModule = HeartsModule()  # mypy checks it keeps the protocol
