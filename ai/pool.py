"""Bot decisions off the event loop: a pool of worker processes.

``await pool.decide(info, policy, seed, budget)`` runs ``ai.decide`` in a worker and returns
its action; the loop keeps serving meanwhile. ``shutdown()`` stops the workers (and waits
for them); use the pool as an async context manager to do that on the way out.
"""

from __future__ import annotations

import asyncio
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from types import TracebackType

from ai.infoset import InfoSet
from ai.policies import Budget, decide
from engine import Action


class BotPool:
    """Worker processes that compute bot decisions (``workers`` processes, default 1)."""

    def __init__(self, workers: int = 1) -> None:
        # spawn: a fork of a process running grpc threads or an event loop is unsafe.
        self._executor = ProcessPoolExecutor(max_workers=max(1, workers),
                                             mp_context=multiprocessing.get_context("spawn"))
        self._closed = False

    async def decide(self, info: InfoSet, policy: str = "mc", seed: int = 0,
                     budget: Budget | None = None) -> Action:
        """The policy's action for ``info.seat``, computed in a worker process.

        :raises RuntimeError: the pool is shut down.
        :raises ValueError: the seat has nothing to decide, or the policy is unknown.
        """
        if self._closed:
            raise RuntimeError("the bot pool is shut down")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, decide, info, policy, seed, budget)

    def shutdown(self, wait: bool = True) -> None:
        """Stop the workers; pending decisions are cancelled."""
        self._closed = True
        self._executor.shutdown(wait=wait, cancel_futures=True)

    async def __aenter__(self) -> BotPool:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        trace: TracebackType | None) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.shutdown)
