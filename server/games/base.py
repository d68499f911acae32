"""The protocol of the seam: what a table asks of its game (``GameModule``), the running game
as the table machine reads it (``GameState``), and the read-only face a table shows a game's
view builder (``TableFacts``). See ``server/games/__init__.py``."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import structlog
    from copas.v1 import copas_pb2
    from google.protobuf.message import Message

    from server.accounts.model import FinishedGame
    from server.observability import Metrics
    from server.store.base import GameRecord, GameResult, RecordSummary, TableMeta

GameAction = Any  # a game's action, opaque to the table (its module reads and writes it)
GameEvent = Any  # what a game's state says happened, opaque to the table
GameRules = Any  # a game's frozen rules value (``players``, ``replace``, ``to_dict``)
RuleOverrides = Mapping[str, Any]  # the rule options a request sets, by their rules' names


class GameState(Protocol):
    """What the table machine reads of a running game (OpenSpiel's ``State``)."""

    @property
    def is_over(self) -> bool: ...
    @property
    def has_left(self) -> Sequence[bool]:
        """Per seat: its player left (the server plays the seat, it places last)."""
    @property
    def hand_number(self) -> int: ...
    @property
    def totals(self) -> Sequence[int]:
        """The game's score so far, per side (a seat, or a team): ``GameModule.seat_totals``
        reads it per seat."""
    @property
    def actions(self) -> Sequence[GameAction]:
        """Every action applied, in order: the record replays them."""
    def to_act(self) -> Sequence[int]:
        """The seats that must act now (none once the game is over)."""


class SeatFacts(Protocol):
    @property
    def number(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def is_taken(self) -> bool: ...
    @property
    def is_bot(self) -> bool: ...
    @property
    def is_away(self) -> bool: ...
    @property
    def account_id(self) -> str: ...
    @property
    def has_acted(self) -> bool: ...
    @property
    def own_cards(self) -> int: ...
    @property
    def network(self) -> str: ...


class TableFacts(Protocol):
    """What views, summaries and the lobby read of a table."""

    @property
    def id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def preset(self) -> str: ...
    @property
    def created(self) -> float: ...
    @property
    def order(self) -> int:
        """Its place in this server's creation order."""
    @property
    def bot_policy(self) -> str: ...
    @property
    def rating(self) -> str: ...
    @property
    def rules(self) -> GameRules: ...
    @property
    def rules_pb(self) -> copas_pb2.Rules: ...
    @property
    def game(self) -> GameState | None: ...
    @property
    def game_module(self) -> GameModule: ...
    @property
    def seats(self) -> Sequence[SeatFacts]: ...
    @property
    def paused_until(self) -> float | None: ...
    @property
    def is_held(self) -> bool: ...
    @property
    def deadline(self) -> float | None: ...
    @property
    def view_cache(self) -> Any:
        """What the game's view builder keeps between steps (``GameModule.new_view_cache``)."""
    @property
    def is_released(self) -> bool: ...
    @property
    def rematch_id(self) -> str:
        """The rematch table of this finished game, once a person asked for it ("": none)."""
    @property
    def is_finished(self) -> bool: ...
    @property
    def is_waiting(self) -> bool: ...
    def now(self) -> float: ...
    def shows_connected(self, seat: int) -> bool: ...
    def has_free_seat(self) -> bool: ...
    @property
    def meta(self) -> TableMeta: ...


class RecordFacts(TableFacts, Protocol):
    """What a finished table's record reads besides."""

    @property
    def seed(self) -> int | str: ...
    @property
    def finished_at(self) -> float | None: ...


class RuleLimits(Protocol):
    """This server's limits on the rules a table may ask for (``RegistrySettings`` has them)."""

    @property
    def rule_defaults(self) -> Mapping[str, Any]:
        """The server's own defaults for rule options (its timings), beneath a request's."""
    @property
    def max_point_limit(self) -> int: ...
    @property
    def max_hands_limit(self) -> int: ...
    @property
    def min_timeout(self) -> float: ...


class BotPool(Protocol):
    """A game's bot decisions in worker processes."""

    async def decide(self, info: Any, policy: str, seed: int, budget: Any = ...) -> Any: ...
    def shutdown(self, wait: bool = ...) -> None: ...


class GameModule(Protocol):
    """What a table asks of its game: rules and their validation, a new state from rules and
    a seed, whose turn and with which clock, legal actions and apply, the automatic action at a
    timeout and for a leaver, each seat's view and the spectator's, the events shown, the
    results and the record. A module is stateless: one object serves every table of its game."""

    @property
    def name(self) -> str:
        """The game's name in the registry, in records and in table metadata."""
    @property
    def default_preset(self) -> str:
        """The preset of a request that names none."""
    @property
    def bot_policies(self) -> tuple[str, ...]:
        """The policies its bots may play ("auto", the timeout rules, is every game's)."""
    @property
    def default_players(self) -> int:
        """The player count of its usual table (a championship's rules are kept at it)."""

    # ------------------------------------------------------------ rules

    def check_rules(self, settings: RuleLimits, preset: str,
                    overrides: Mapping[str, Any]) -> GameRules:
        """The rules of ``preset`` with ``overrides`` (the server's defaults beneath), within
        this server's limits.

        :raises ServiceError: INVALID_ARGUMENT naming the rule."""
    def rules_to_pb(self, rules: GameRules) -> copas_pb2.Rules: ...
    def rules_as_overrides(self, rules: GameRules) -> RuleOverrides:
        """Every option of ``rules``, as overrides that ``check_rules`` makes them again from
        (a championship's tables are created so)."""
    def missing_clocks(self, rules: GameRules) -> str:
        """"" when every decision of the game has a timeout; else which do not, as a client
        reads it (a championship's games must have clocks)."""
    def championship_tables(self, players: int) -> list[int]:
        """The table sizes of a championship round of ``players``, largest first, each player
        for themselves (docs/RULES.md, "Rounds and tables").

        :raises ValueError: too few players to seat a round."""
    @property
    def championship_sizes(self) -> tuple[int, ...]:
        """The sizes of a championship's tables (``championship_tables``'s, ascending); its
        final table has one of them."""
    @property
    def most_points_win(self) -> bool:
        """Places go to the most game points (else to the fewest): a championship's places,
        relative points and matchpoints follow it."""
    def end_reason_to_pb(self, reason: str) -> copas_pb2.GameEndReason.ValueType:
        """A game's end reason as its record keeps it (``GameEndReason``'s value), as
        copas.v1 ``GameEndReason``.

        :raises KeyError: not an end reason of this game."""
    def rating_players(self, players: int, partnerships: bool) -> int:
        """A leaderboard's player count (0: the game's usual one) for its kind, checked.

        :raises ServiceError: INVALID_ARGUMENT (INVALID_RULES) listing the accepted counts."""
    def rules_overrides(self, message: copas_pb2.RulesOverrides) -> RuleOverrides:
        """The options a request sets explicitly, by their rules' names.

        :raises ServiceError: INVALID_ARGUMENT (INVALID_RULES) for a value it has not."""

    # ------------------------------------------------------------ actions

    def decode_action(self, method: str, request: Any
                      ) -> tuple[Callable[[int], GameAction], object]:
        """An action request (``method``: PassCards, PlayCard, ChooseMoon, LeaveTable; its
        message, unary or a Play stream's) as the game's action for a seat, and what it means
        (for its request_id's fingerprint).

        :raises ServiceError: INVALID_ARGUMENT for a malformed one, or one this game has not."""

    # ------------------------------------------------------------ the state

    def new_state(self, rules: GameRules, seed: int | str) -> GameState:
        """A new game, dealt from ``seed``."""
    def started_events(self, state: GameState) -> list[GameEvent]:
        """What the start of the game made (the first deal)."""
    def apply(self, state: GameState, action: GameAction) -> list[GameEvent]:
        """A person's action.

        :raises ServiceError: the action is malformed (INVALID_ARGUMENT) or illegal now
            (FAILED_PRECONDITION), naming the rule; nothing changed."""
    def apply_automatic(self, state: GameState, action: GameAction) -> list[GameEvent]:
        """An action the server chose (a bot's, a timeout's, an operator's, a leaver's seat).

        :raises ServiceError: as ``apply`` (a bot policy's mistake; a log that does not fit)."""
    def auto_action(self, state: GameState, seat: int) -> GameAction:
        """The automatic choice for ``seat`` (a timeout, a leaver's seat, the "auto" bot)."""
    def leave(self, seat: int) -> GameAction:
        """``seat`` leaves the game (the server plays on for it)."""
    def is_leave(self, action: GameAction) -> bool: ...
    def is_card(self, action: GameAction) -> bool:
        """The action puts a card down (a seat's own cards count them)."""
    def ending(self, why: str) -> GameAction:
        """The action that ends a running game now: ``why`` is "idle" (no person acted for
        --abandon-after), "operator" (closed), or "time_limit" (its championship round's)."""
    def abandon(self, state: GameState) -> list[GameEvent]:
        """End the game: no person is left to play for."""

    # ------------------------------------------------------------ turns and clocks

    def turn(self, rules: GameRules, state: GameState) -> tuple[Hashable, float]:
        """The turn now (a deadline lasts while it does) and its timeout (0: none)."""
    def pause_after(self, rules: GameRules, state: GameState, events: list[GameEvent]
                    ) -> float:
        """The pause the rules give after ``events`` (seconds; 0: none)."""
    def seat_totals(self, state: GameState) -> Sequence[int]:
        """Per seat: the game's score so far (a seat's team's, in partnerships)."""
    def phase_pb(self, state: GameState) -> int:
        """The phase shown (copas.v1 ``Phase``)."""
    def phase_name(self, state: GameState) -> str:
        """The phase in logs and metrics' labels."""
    def position(self, state: GameState, seat: int) -> Hashable:
        """Where the game is for ``seat``'s decision (a bot's answer applies only here)."""
    def bot_pace_factor(self, state: GameState) -> float:
        """How many bot paces the next move takes (a pass of three cards: more)."""

    # ------------------------------------------------------------ events

    def event_to_pb(self, event: GameEvent, players: int, phase_before: int | None
                    ) -> tuple[str, Message]:
        """An event as TableEvent's oneof field: its name and its message (``phase_before``:
        where a leave happened)."""
    def observe(self, events: list[GameEvent], metrics: Metrics,
                log: structlog.stdlib.BoundLogger) -> None:
        """Count and log (at debug) the events of a live step."""

    # ------------------------------------------------------------ views, summaries, records

    def new_view_cache(self, rules_pb: copas_pb2.Rules) -> Any: ...
    def public(self, table: TableFacts) -> copas_pb2.TableView:
        """What a spectator may see, as a message."""
    def public_bytes(self, table: TableFacts) -> bytes:
        """The public view as wire bytes (equal to ``public``'s), built once per step."""
    def private_part(self, table: TableFacts, seat: int) -> bytes:
        """What only ``seat`` may see, as TableView wire bytes with the seat number."""
    def record(self, table: RecordFacts) -> GameRecord:
        """A finished table's game: replayable (rules, seed, actions), with its result."""
    def record_to_pb(self, summary: RecordSummary, message: copas_pb2.GameRecord) -> None:
        """Fill in what a record's message says of the game (rules, seats' totals, hands,
        standings, leavers, end reason)."""
    @property
    def record_format(self) -> int:
        """The ``format`` its engine's records carry (``copas replay`` checks it)."""
    def rules_from_dict(self, data: dict[str, Any]) -> GameRules:
        """Its rules from their JSON form (a table's meta, a record).

        :raises ValueError: not rules of this game."""
    def result_from_dict(self, data: dict[str, Any]) -> GameResult:
        """A record's result from its JSON form.

        :raises ValueError, KeyError, TypeError: not a result of this game."""
    def finished_game(self, summary: RecordSummary) -> FinishedGame | None:
        """A finished game's record as its accounts keep it: each account's place and points,
        whether it may be rated (RULES.md, "Rated games") and its kind (``rating_kind``);
        None when no seat had an account."""

    # ------------------------------------------------------------ the log

    def action_to_json(self, action: GameAction) -> Any: ...
    def action_from_json(self, data: Any) -> GameAction:
        """:raises ValueError: (or KeyError, TypeError) not an action of this game."""
    def deals(self, rules: GameRules, seed: int | str, actions: Sequence[GameAction]
              ) -> list[list[list[str]]]:
        """Each hand's cards as dealt, seat by seat, as text, replayed from the seed, for a
        finished game's replay (empty: the game shows none, or the actions do not replay)."""

    # ------------------------------------------------------------ the terminal tools

    def event_text(self, event: GameEvent) -> str:
        """An event as ``copas-demo`` prints it, its own line ends included ("": not shown)."""
    def replay_record(self, data: dict[str, Any]) -> str:
        """``copas replay``: a record's JSON replayed through the game's engine, its result
        checked; its end reason.

        :raises ValueError: the record does not replay, or its result differs."""
    def hand_lines(self, data: dict[str, Any]) -> list[str]:
        """``copas replay``: each hand of a record in a line of text."""

    # ------------------------------------------------------------ bots

    def new_bot_pool(self, workers: int) -> BotPool: ...
    def bot_budget(self, seconds: float) -> Any: ...
    def bot_info(self, state: GameState, seat: int) -> Any:
        """What ``seat`` may know, for a bot's decision in a worker (nothing more)."""
