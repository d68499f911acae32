"""Bot decisions off the event loop: a pool of worker processes.

``await pool.decide(info, policy, seed, budget)`` runs ``ai.decide`` in a worker and returns
its action; the loop keeps serving meanwhile. ``shutdown()`` stops the workers (and waits
for them); use the pool as an async context manager to do that on the way out.
"""

from __future__ import annotations

import asyncio
import ctypes
import multiprocessing
import os
import signal
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from types import TracebackType

from ai.infoset import InfoSet
from ai.policies import Budget, decide
from engine import Action

PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent dies


def die_with(parent: int) -> None:
    """A worker's first act: go when the process that made it does, however it ended (a
    kill -9 leaves no one to shut the pool down): the kernel's parent-death signal on
    Linux, else a watch on the parent."""
    if sys.platform == "linux":
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # it died before the signal was asked for
        os._exit(0)
    if sys.platform != "linux":
        def watch() -> None:
            while os.getppid() == parent:
                time.sleep(1.0)
            os._exit(0)
        threading.Thread(target=watch, daemon=True).start()


def worker_pool(workers: int) -> ProcessPoolExecutor:
    """``workers`` spawned worker processes (a fork of a process running grpc threads or an
    event loop is unsafe) that go with this process however it ends (``die_with``)."""
    return ProcessPoolExecutor(max_workers=max(1, workers),
                               mp_context=multiprocessing.get_context("spawn"),
                               initializer=die_with, initargs=(os.getpid(),))


class BotPool:
    """Worker processes that compute bot decisions (``workers`` processes, default 1); they
    end with the pool (``shutdown``) or, at the latest, with the process that made them."""

    def __init__(self, workers: int = 1) -> None:
        self._workers = max(1, workers)
        # Made at the first decision: until then no worker, nor multiprocessing's resource
        # tracker (a process of its own that a pool's queues start), runs for nothing.
        self._executor: ProcessPoolExecutor | None = None
        self._closed = False

    def _started(self) -> ProcessPoolExecutor:
        if self._executor is None:
            self._executor = worker_pool(self._workers)
        return self._executor

    async def decide(self, info: InfoSet, policy: str = "mc", seed: int = 0,
                     budget: Budget | None = None) -> Action:
        """The policy's action for ``info.seat``, computed in a worker process.

        :raises RuntimeError: the pool is shut down.
        :raises ValueError: the seat has nothing to decide, or the policy is unknown.
        """
        if self._closed:
            raise RuntimeError("the bot pool is shut down")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._started(), decide, info, policy, seed, budget)

    def shutdown(self, wait: bool = True) -> None:
        """Stop the workers; pending decisions are cancelled."""
        self._closed = True
        if self._executor is not None:
            self._executor.shutdown(wait=wait, cancel_futures=True)

    async def __aenter__(self) -> BotPool:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        trace: TracebackType | None) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.shutdown)
