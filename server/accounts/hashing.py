"""Password hashing's turns, shared fairly among the addresses that ask (issue 37).

An argon2id hash is the costliest thing a client can make the server do (at the default cost
about 0.1 s of one core and 64 MiB), and every password sign-in, sign-up and link makes one.
At most ``at_once`` (2) run, each on a thread; a call beyond them waits in its address's own
queue, and a slot that frees goes to the addresses waiting in turn (round robin), the first of
each address's queue. One address with forty sign-ins at once is then served one hash at a time
in rotation with everyone else: another address's sign-in waits for at most about one hash of
each address ahead of it, never for all forty.

Bounds (the queues are memory of this node only, gone when empty):

- one address waits with at most ``per_address`` (``--password-checks-per-address``, 4) calls;
  beyond, its own new calls are refused at once: RESOURCE_EXHAUSTED ``TOO_MANY_SIGN_INS`` with
  a RetryInfo (about the time the hashes queued take);
- all addresses together wait with at most ``waiting`` (32) calls. When they are full, a newcomer
  takes the place of the newest call of the address with the most waiting (that one is
  refused as above) if that address has at least two more waiting than the newcomer's; else
  the newcomer is refused. A few addresses cannot fill the queue for everyone else.

A slot is given back when its hash's thread ends, not when its caller goes: a client that
cancels its call once the hash started cannot make more than ``at_once`` hashes run.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from typing import TypeVar

from server.errors import ServiceError

T = TypeVar("T")
HASHES_AT_ONCE = 2  # argon2 hashes computed at once (each on a thread, 64 MiB)
WAITING_PER_ADDRESS = 4  # calls of one address waiting for a hash (0: no limit but ``waiting``)
HASHES_WAITING = 32  # calls of all addresses waiting for a hash


class PasswordWork:
    """``await run(address, work, *args)``: ``work(*args)`` on a thread in its address's turn."""

    def __init__(self, at_once: int = HASHES_AT_ONCE, per_address: int = WAITING_PER_ADDRESS,
                 waiting: int = HASHES_WAITING,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.at_once = at_once
        self.per_address = per_address
        self.most_waiting = waiting
        self.running = 0  # slots taken (a hash on its thread, or given to a call about to start)
        self.waiting = 0  # calls in the queues
        self._clock = clock
        self._queues: dict[str, deque[asyncio.Future[None]]] = {}  # the turn's order: first next
        self._seconds = 0.1  # a hash's time, on average (for the retry delay of a refusal)

    def waiting_of(self, address: str) -> int:
        queue = self._queues.get(address)
        return len(queue) if queue is not None else 0

    @property
    def addresses_waiting(self) -> int:
        return len(self._queues)

    async def run(self, address: str, work: Callable[..., T], *args: object) -> T:
        """``work(*args)``'s result, computed on a thread once ``address``'s turn comes.

        :raises ServiceError: TOO_MANY_SIGN_INS (this address, or everyone, waits too much).
        """
        await self._turn(address)
        started = self._clock()
        try:
            done = asyncio.get_running_loop().run_in_executor(None, work, *args)
        except BaseException:
            self._release()
            raise

        def finished(future: asyncio.Future[T]) -> None:
            if not future.cancelled():
                future.exception()  # seen: a caller gone does not leave it "never retrieved"
            self._seconds = 0.8 * self._seconds + 0.2 * max(self._clock() - started, 0.0)
            self._release()

        done.add_done_callback(finished)
        return await asyncio.shield(done)  # a caller gone: the thread still holds the slot

    async def _turn(self, address: str) -> None:
        if self.running < self.at_once and not self.waiting:
            self.running += 1
            return
        mine = self.waiting_of(address)
        if self.per_address and mine >= self.per_address:
            raise self._refused()
        if self.waiting >= self.most_waiting:
            if not self._queues:
                raise self._refused()
            heaviest = max(self._queues, key=self.waiting_of)
            if self.waiting_of(heaviest) <= mine + 1:  # it would be no worse off than this one
                raise self._refused()
            evicted = self._queues[heaviest].pop()  # its newest: the oldest keep their places
            self._forget(heaviest, None)
            if not evicted.done():  # (a cancelled one was about to leave anyway)
                evicted.set_exception(self._refused())
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queues.setdefault(address, deque()).append(future)
        self.waiting += 1
        try:
            await future
        except asyncio.CancelledError:
            if not future.done() or future.cancelled():
                self._forget(address, future)  # still queued: its place goes
            elif future.exception() is None:
                self._release()  # given a slot it will not use: the next one takes it
            raise

    def _forget(self, address: str, future: asyncio.Future[None] | None) -> None:
        """``future`` out of ``address``'s queue (None: one was popped already)."""
        queue = self._queues.get(address)
        if queue is None:
            return
        if future is not None:
            if future not in queue:
                return
            queue.remove(future)
        self.waiting -= 1
        if not queue:
            del self._queues[address]

    def _release(self) -> None:
        """A slot is free: the first waiting call of the next address in turn takes it."""
        while self._queues:
            address = next(iter(self._queues))
            queue = self._queues.pop(address)
            future = queue.popleft()
            self.waiting -= 1
            if queue:
                self._queues[address] = queue  # to the end of the turn
            if not future.done():
                future.set_result(None)
                return
        self.running -= 1

    def _refused(self) -> ServiceError:
        retry = self._seconds * (self.waiting / max(self.at_once, 1) + 1)
        return ServiceError.over_quota(
            "the server is checking too many passwords from this address, or in all: "
            "retry as RetryInfo says", "TOO_MANY_SIGN_INS", "password checks", retry)
