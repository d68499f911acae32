"""The server's bots think off the event loop: their game's bot pool of worker processes
(``GameModule.new_bot_pool``), within a time budget per decision. A decision that does not
come back in time (a saturated pool, a worker that died) is answered with None, and the
table plays the automatic choice instead, so a bot can slow a table down by at most
``limit`` seconds a move, never stop it.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
import zlib
from collections.abc import Callable
from typing import Any, Protocol

import structlog

from server import games
from server.errors import ServiceError
from server.games import BotPool, GameAction, GameModule, GameState
from server.observability import Metrics
from server.tables.seats import Seats
from server.tables.timers import TableTimers, TimerKind

log = structlog.get_logger("copas.bots")

AUTO_POLICY = "auto"  # the timeout rules' choices (RULES.md), played at once
FIRST_LIMIT = 30.0  # seconds for a pool's first decision: it starts the worker process

class Thinking:
    """A decision being made; cancel() forgets it (its answer is then dropped)."""

    __slots__ = ("task",)

    def __init__(self, task: asyncio.Task[None]) -> None:
        self.task = task

    def cancel(self) -> None:
        self.task.cancel()


class Thinker:
    """Bot decisions in worker processes, answered through a callback on the loop."""

    def __init__(self, workers: int, seconds: float, module: GameModule | None = None) -> None:
        self.module = module if module is not None else games.get()  # warmed up at start
        self._workers = workers
        self._seconds = seconds
        self.pool = self.module.new_bot_pool(workers)
        self.budget = self.module.bot_budget(seconds)
        # Each other game's pool and budget, made at its first decision (a server that
        # never seats a bot at that game starts none of its workers).
        self._others: dict[str, tuple[BotPool, Any]] = {}
        self.limit = max(1.0, seconds * 20)  # beyond this, the automatic choice plays
        # The games whose pool has answered once: a pool's first decision starts its worker
        # process (a second or more on a busy machine), so it has ``FIRST_LIMIT``.
        self._answered: set[str] = set()

    def _pool_of(self, module: GameModule | None) -> tuple[BotPool, Any]:
        if module is None or module.name == self.module.name:
            return self.pool, self.budget
        known = self._others.get(module.name)
        if known is None:
            known = self._others[module.name] = (module.new_bot_pool(self._workers),
                                                 module.bot_budget(self._seconds))
        return known

    def think(self, info: Any, policy: str, seed: int,
              done: Callable[[GameAction | None], None],
              module: GameModule | None = None) -> Thinking:
        """``module``'s bot decides (None: the default game's)."""
        pool, budget = self._pool_of(module)
        name = (module or self.module).name
        limit = self.limit if name in self._answered else max(self.limit, FIRST_LIMIT)

        async def decide() -> None:
            try:
                action: GameAction | None = await asyncio.wait_for(
                    pool.decide(info, policy, seed, budget), limit)
                self._answered.add(name)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # late, or the worker failed: the table moves on
                log.warning("bot_decision_failed", policy=policy,
                            error=f"{type(exc).__name__}: {exc}"[:200])
                action = None
            done(action)

        return Thinking(asyncio.get_running_loop().create_task(
            decide(), context=contextvars.Context()))

    def shutdown(self) -> None:
        self.pool.shutdown(wait=True)
        for pool, _ in self._others.values():
            pool.shutdown(wait=True)


class BotTable(Protocol):
    """What a table's bots read of their table."""

    @property
    def game(self) -> GameState | None: ...
    @property
    def game_module(self) -> GameModule: ...
    @property
    def paused_until(self) -> float | None: ...
    @property
    def is_held(self) -> bool: ...
    @property
    def seats(self) -> Seats: ...
    @property
    def seed(self) -> int | str: ...
    @property
    def sequence(self) -> int: ...
    @property
    def bot_policy(self) -> str: ...
    @property
    def is_replaying(self) -> bool: ...
    @property
    def metrics(self) -> Metrics: ...
    @property
    def log(self) -> Any: ...


class BotTurns:
    """The bots of one table. Each move is a step of its own on the loop (``as_step`` makes
    one), ``pace`` seconds after the last (a pass: the game's ``bot_pace_factor`` times), on the
    table's timers: a person's clock runs on its own, the log never holds the pace, and the
    table's closing cancels it; the bot decides here (the automatic choice) or in
    the pool while the table goes on (a leave, a timeout), and ``play`` applies its move in
    the step. A decision is applied only if the table is still where the bot began to think;
    else, if a bot is still to act, it thinks again."""

    def __init__(self, table: BotTable, timers: TableTimers, thinker: Thinker | None,
                 pace: float, play: Callable[[GameAction], None],
                 as_step: Callable[[Callable[[], None]], Callable[[], None]]) -> None:
        self._table = table
        self._timers = timers
        self._thinker = thinker
        self._pace = pace
        self._play = play
        self._as_step = as_step

    def schedule(self) -> None:
        """The next bot move, instead of a pending one or a decision being thought (none
        while the table replays its log)."""
        if not self._table.is_replaying:
            game = self._table.game
            factor = self._table.game_module.bot_pace_factor(game) if game is not None else 1.0
            self._timers.arm(TimerKind.BOT, self._pace * factor,
                             self._as_step(self._move))

    @property
    def is_pending(self) -> bool:
        """A bot move is due, or a decision is being thought."""
        return self._timers.is_armed(TimerKind.BOT)

    def _playing(self) -> GameState | None:
        """The game, while it runs and is not paused."""
        game = self._table.game
        is_on = game is not None and not game.is_over and self._table.paused_until is None \
            and not self._table.is_held
        return game if is_on else None

    def _where(self, game: GameState, seat: int) -> tuple[object, ...]:
        return (self._table.game_module.position(game, seat), self._table.paused_until)

    def _move(self) -> None:
        table = self._table
        game = self._playing()
        bot = next((s for s in game.to_act() if table.seats[s].is_bot), None) if game else None
        if game is None or bot is None:
            return
        thinker = self._thinker
        if table.bot_policy == AUTO_POLICY or thinker is None:
            began = time.perf_counter()
            action = table.game_module.auto_action(game, bot)
            table.metrics.bot_decision.labels(where="here").observe(time.perf_counter() - began)
            self._play(action)
            return
        where = self._where(game, bot)
        seed = zlib.crc32(f"{table.seed}:{table.sequence}".encode())
        began = time.perf_counter()
        decisions = table.metrics.bot_decision.labels(where="pool")

        def decided(action: GameAction | None) -> None:
            decisions.observe(time.perf_counter() - began)
            self._as_step(lambda: self._decided(bot, where, action))()

        info = table.game_module.bot_info(game, bot)
        self._timers.hold(TimerKind.BOT, thinker.think(info, table.bot_policy, seed, decided,
                                                        table.game_module))

    def _decided(self, seat: int, where: tuple[object, ...], action: GameAction | None
                 ) -> None:
        """A bot's decision came back: apply it if the table is still where it was (else
        think again); None (no answer in time) plays the automatic choice."""
        self._timers.forget(TimerKind.BOT)
        game = self._playing()
        if game is None or self._where(game, seat) != where:
            if game is not None and self._table.seats.any_bot(game.to_act()):
                self.schedule()
            return
        auto = self._table.game_module.auto_action
        if action is None or action.seat != seat:
            action = auto(game, seat)
        try:
            self._play(action)
        except ServiceError:  # a policy's mistake must not stop the table
            self._table.log.error("bot_move_refused", seat=seat)
            self._play(auto(game, seat))
