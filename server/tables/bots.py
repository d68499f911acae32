"""The server's bots think off the event loop: ``ai.BotPool`` worker processes, within a time
budget per decision. A decision that does not come back in time (a saturated pool, a worker
that died) is answered with None, and the table plays the automatic choice instead, so a
bot can slow a table down by at most ``limit`` seconds a move, never stop it.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable

import structlog

import ai
from engine import Action

log = structlog.get_logger("copas.bots")

class Thinking:
    """A decision being made; cancel() forgets it (its answer is then dropped)."""

    __slots__ = ("task",)

    def __init__(self, task: asyncio.Task[None]) -> None:
        self.task = task

    def cancel(self) -> None:
        self.task.cancel()


class Thinker:
    """Bot decisions in worker processes, answered through a callback on the loop."""

    def __init__(self, workers: int, seconds: float) -> None:
        self.pool = ai.BotPool(workers)
        self.budget = ai.Budget(seconds=seconds)
        self.limit = max(1.0, seconds * 20)  # beyond this, the automatic choice plays

    def think(self, info: ai.InfoSet, policy: str, seed: int,
              done: Callable[[Action | None], None]) -> Thinking:
        async def decide() -> None:
            try:
                action: Action | None = await asyncio.wait_for(
                    self.pool.decide(info, policy, seed, self.budget), self.limit)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # late, or the worker failed: the table moves on
                log.warning("bot_decision_failed", policy=policy,
                            error=f"{type(exc).__name__}: {exc}"[:200])
                action = None
            done(action)

        return Thinking(asyncio.get_running_loop().create_task(
            decide(), context=contextvars.Context()))

    async def warm_up(self) -> None:
        """Start a worker now, so the first game's first decision does not pay for it."""
        from engine import Game, Rules

        game = Game(Rules(), 0)
        try:
            await asyncio.wait_for(self.pool.decide(ai.info_from_game(game, 0), "duck", 0),
                                   60)
        except Exception as exc:
            log.warning("bot_pool_warm_up_failed", error=str(exc)[:200])

    def shutdown(self) -> None:
        self.pool.shutdown(wait=True)
