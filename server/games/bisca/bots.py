"""Bisca's bots (``ai.bisca``) in worker processes, as Hearts's pool runs ``ai``'s: spawned
workers that end with the pool or, at the latest, with the process that made them."""

from __future__ import annotations

import asyncio
from concurrent.futures import ProcessPoolExecutor

from ai import bisca
from ai.policies import Budget
from ai.pool import worker_pool
from engine.bisca import PlayCard, View


class BiscaBotPool:
    """Worker processes that choose Bisca bots' cards (``ai.bisca.decide``)."""

    def __init__(self, workers: int = 1) -> None:
        self._workers = workers
        self._executor: ProcessPoolExecutor | None = None  # made at the first decision
        self._closed = False

    async def decide(self, info: View, policy: str = "mc", seed: int = 0,
                     budget: Budget | None = None) -> PlayCard:
        """The policy's card for ``info.seat`` (what that seat may see), in a worker.

        :raises RuntimeError: the pool is shut down.
        :raises ValueError: the seat has nothing to decide, or the policy is unknown."""
        if self._closed:
            raise RuntimeError("the bot pool is shut down")
        loop = asyncio.get_running_loop()
        if self._executor is None:
            self._executor = worker_pool(self._workers)
        return await loop.run_in_executor(self._executor, bisca.decide, info, policy, seed,
                                          budget)

    def shutdown(self, wait: bool = True) -> None:
        self._closed = True
        if self._executor is not None:
            self._executor.shutdown(wait=wait, cancel_futures=True)
