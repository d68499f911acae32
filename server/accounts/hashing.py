"""Password hashing's turns, shared fairly among the addresses that ask (issue 37).

An argon2id hash is the costliest thing a client can make the server do (at the default cost
about 25 ms of one core and 19 MiB), and every password sign-in, sign-up and link makes one.
At most ``at_once`` (half the cores) run, each on a thread of their own whose priority is
lower than the server's (``niceness``, 10: when every core is busy, a game's move goes
first and the hash waits a little); a call beyond them waits in its address's own
queue, and a slot that frees goes to the addresses waiting in turn (round robin), the first of
each address's queue. One address with forty sign-ins at once is then served one hash at a time
in rotation with everyone else: another address's sign-in waits for at most about one hash of
each address ahead of it, never for all forty.

Addresses are not all alike: many addresses that each keep one call in flight are as many as
the waiting places, and an owner is then no different from each of them. What tells them apart
is what they asked for lately, and whether they signed that username in before:

- **each address's password calls** (a sign-in, a sign-up, a link, and a sign-up or link of a
  taken username, answered without a hash) take one from its allowance: ``rate`` (30 at once,
  then one per 5 s: ``--password-checks-burst``, ``--password-checks-per-address-per-minute``),
  and an IPv6 /64's from its /56's (4 times as many) and its /48's (16 times;
  ``NetworkBuckets``).
  Beyond, its calls are refused at once, before any hash: RESOURCE_EXHAUSTED
  ``TOO_MANY_SIGN_INS`` with a RetryInfo. A call that never hashed (refused by the queue, gone
  while waiting) gives its one back.
- **heavy and light**: a call whose address (or /56, or /48, by their factors) has made at least
  ``LIGHT_CALLS`` (3) password calls not yet given back by time is *heavy*; the others are
  *light*, and a light one is *familiar* when its address signed that username in on this
  node before (or made or linked it), else *unfamiliar*. A slot that frees goes to a light call
  first, to a familiar and an unfamiliar one in turn (so neither kind waits for all of the
  other), and to a heavy one only when no light one waits; within a kind, the addresses in turn.
  A call refused (its allowance, its address's waiting places, the queue full, its place
  taken) gives its one back, as it cost no hash, but counts as one refusal, forgiven at the
  same rate, and refusals weigh as calls do: else a flood whose surplus is refused stays light
  for ever and takes the place of everyone who hashed lately, the owner signing in again too.
  An address that keeps hashing is heavy from its fourth call and stays so while it goes on,
  so someone who has not asked lately is served next, not after every address of a flood
  (fresh addresses are light for their first three calls: 33 of them can still fill the places
  for about 100 hashes, except against a familiar sign-in when theirs are unfamiliar).

Bounds (the queues are memory of this node only, gone when empty):

- one address waits with at most ``per_address`` (``--password-checks-per-address``, 4) calls;
  beyond, its own new calls are refused at once (``TOO_MANY_SIGN_INS``);
- all addresses together wait with at most ``waiting`` (32) calls. When they are full, a
  newcomer takes the place of the newest call of a worse kind than its own (heavy, then
  unfamiliar; of the address with the most of them waiting), else of the newest call of the
  address with the most waiting, if that address has at least two more waiting than the
  newcomer's; else the newcomer is refused. The one whose place is taken is refused as above.
  A few addresses cannot fill the queue for everyone else, and many that keep hashing cannot
  keep out one that has not.

A slot is given back when its hash's thread ends, not when its caller goes: a client that
cancels its call once the hash started cannot make more than ``at_once`` hashes run.

Bounded: each map of the allowance (addresses, /56s, /48s) holds at most ``max_keys``
(100,000) keys, one float each, the oldest written forgotten first (then it is full again).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from server.accounts.attempts import MAX_KEYS, NETWORK_FACTORS, AttemptRule, NetworkBuckets
from server.errors import ServiceError

T = TypeVar("T")
HASHES_AT_ONCE = 2  # argon2 hashes computed at once (each on a thread, 19 MiB)
WAITING_PER_ADDRESS = 4  # calls of one address waiting for a hash (0: no limit but ``waiting``)
HASHES_WAITING = 32  # calls of all addresses waiting for a hash
CHECKS = AttemptRule(burst=30, per_second=1 / 5)  # password calls of an address: its allowance
LIGHT_CALLS = 3  # password calls of an address not yet given back, beyond which it is heavy
FAMILIAR, UNFAMILIAR, HEAVY = 0, 1, 2  # the kinds of waiting calls, best first
HASH_NICENESS = 10  # how much lower the hashing threads' priority is than the server's


def _lower_priority(niceness: int) -> None:
    """The calling thread (a hash's) yields to the server's others when every core is busy:
    a hash waits a little, a game's move does not. Linux gives each thread its own nice value;
    elsewhere, or where it is refused, the thread keeps the process's."""
    with contextlib.suppress(AttributeError, OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(),
                       os.getpriority(os.PRIO_PROCESS, 0) + niceness)


class _Waiting:
    __slots__ = ("future", "order")

    def __init__(self, future: asyncio.Future[None], order: int) -> None:
        self.future = future
        self.order = order  # when it came: the newest gives its place first


class PasswordWork:
    """``await run(address, work, *args)``: ``work(*args)`` on a thread in its address's turn."""

    def __init__(self, at_once: int = HASHES_AT_ONCE, per_address: int = WAITING_PER_ADDRESS,
                 waiting: int = HASHES_WAITING,
                 clock: Callable[[], float] = time.monotonic, *,
                 rate: AttemptRule | None = CHECKS,
                 factors: tuple[float, float] = NETWORK_FACTORS,
                 max_keys: int = MAX_KEYS, niceness: int = HASH_NICENESS) -> None:
        """``rate``: an address's allowance of password calls (None: calls are never refused
        by it, and are heavy or light by ``CHECKS``); ``factors``: the /56's and the /48's;
        ``niceness``: how much lower the hashing threads' priority is (0: the server's)."""
        self.niceness = niceness
        self.at_once = at_once
        self.per_address = per_address
        self.most_waiting = waiting
        self.rate = rate
        self.running = 0  # slots taken (a hash on its thread, or given to a call about to start)
        self.waiting = 0  # calls in the queues
        self._clock = clock
        self._calls = NetworkBuckets(rate or CHECKS, factors, max_keys)
        # refused calls, forgiven at the allowance's rate: they weigh as hashes do for heavy
        self._refusals = NetworkBuckets(rate or CHECKS, factors, max_keys)
        # per kind, the addresses' queues, in their turn's order: first next
        self._queues: tuple[dict[str, deque[_Waiting]], ...] = ({}, {}, {})
        self._waiting_of: dict[str, int] = {}
        self._light_turn = FAMILIAR  # the light kind a freed slot looks at first
        self._order = itertools.count()
        self._seconds = 0.1  # a hash's time, on average (for the retry delay of a refusal)
        self._threads: ThreadPoolExecutor | None = None  # the hashes' own, made at the first

    def _executor(self) -> ThreadPoolExecutor:
        if self._threads is None:
            self._threads = ThreadPoolExecutor(self.at_once, "password-hash", _lower_priority,
                                               (self.niceness,))
        return self._threads

    def waiting_of(self, address: str) -> int:
        return self._waiting_of.get(address, 0)

    @property
    def addresses_waiting(self) -> int:
        return len(self._waiting_of)

    @property
    def keys_held(self) -> int:
        return len(self._calls) + len(self._refusals)

    def load(self, address: str) -> float:
        """The password calls of ``address`` (or its networks') not yet given back by time,
        and its refused calls not yet forgiven."""
        now = self._clock()
        return self._calls.load(address, now) + self._refusals.load(address, now)

    def _kind(self, address: str, is_familiar: bool) -> int:
        if self.load(address) >= LIGHT_CALLS:
            return HEAVY
        return FAMILIAR if is_familiar else UNFAMILIAR

    def check(self, address: str) -> None:
        """Refused if ``address`` has no password call left now.

        :raises ServiceError: TOO_MANY_SIGN_INS.
        """
        if self.rate is None:
            return
        wait, network = self._calls.wait(address, self._clock())
        if wait > 0:
            whose = "address" if network == address else "address's network"
            raise ServiceError.over_quota(
                f"too many password checks from this {whose}: retry as RetryInfo says",
                "TOO_MANY_SIGN_INS", f"password checks from {network}", wait)

    def take(self, address: str) -> None:
        """A password call of ``address`` answered without a hash (a taken username): it
        counts as one.

        :raises ServiceError: TOO_MANY_SIGN_INS (none left: nothing was counted).
        """
        self.check(address)
        self._calls.take(address, self._clock())

    async def run(self, address: str, work: Callable[..., T], *args: object,
                  is_familiar: bool = False) -> T:
        """``work(*args)``'s result, computed on a thread once ``address``'s turn comes.
        ``is_familiar``: a sign-in from an address that signed that username in before.

        :raises ServiceError: TOO_MANY_SIGN_INS (this address, or everyone, waits too much;
            or it has no password call left).
        """
        self.check(address)
        kind = self._kind(address, is_familiar)
        self._calls.take(address, self._clock())
        try:
            await self._turn(address, kind)
        except BaseException as error:
            self._calls.give_back(address, self._clock())  # no hash: the call is not counted
            if isinstance(error, ServiceError):
                self._refusals.take(address, self._clock())  # but it weighs
            raise
        started = self._clock()
        try:
            done = asyncio.get_running_loop().run_in_executor(self._executor(), work, *args)
        except BaseException:
            self._calls.give_back(address, self._clock())
            self._release()
            raise

        def finished(future: asyncio.Future[T]) -> None:
            if not future.cancelled():
                future.exception()  # seen: a caller gone does not leave it "never retrieved"
            self._seconds = 0.8 * self._seconds + 0.2 * max(self._clock() - started, 0.0)
            self._release()

        done.add_done_callback(finished)
        return await asyncio.shield(done)  # a caller gone: the thread still holds the slot

    async def _turn(self, address: str, kind: int) -> None:
        if self.running < self.at_once and not self.waiting:
            self.running += 1
            return
        mine = self.waiting_of(address)
        if self.per_address and mine >= self.per_address:
            raise self._refused()
        if self.waiting >= self.most_waiting:
            place = self._place_for(kind, mine)
            if place is None:
                raise self._refused()
            their_kind, theirs = place
            evicted = self._queues[their_kind][theirs].pop()  # its newest: its oldest keep theirs
            self._forget(their_kind, theirs, None)
            if not evicted.future.done():  # (a cancelled one was about to leave anyway)
                evicted.future.set_exception(self._refused())
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queues[kind].setdefault(address, deque()).append(
            _Waiting(future, next(self._order)))
        # (not ``mine + 1``: the place taken above may have been this address's own)
        self._waiting_of[address] = self.waiting_of(address) + 1
        self.waiting += 1
        try:
            await future
        except asyncio.CancelledError:
            if not future.done() or future.cancelled():
                self._forget(kind, address, future)  # still queued: its place goes
            elif future.exception() is None:
                self._release()  # given a slot it will not use: the next one takes it
            raise

    def _place_for(self, kind: int, mine: int) -> tuple[int, str] | None:
        """Whose newest waiting call a newcomer of ``kind``, whose address has ``mine``
        waiting, takes the place of (that call's kind and address), when every place is
        taken: one of a worse kind, else one of the address with the most waiting if it has
        at least two more than the newcomer's (of its worst kind); else nobody's."""
        for worse in (HEAVY, UNFAMILIAR):
            if worse > kind and self._queues[worse]:
                queues = self._queues[worse]
                return worse, max(queues, key=lambda address: (self.waiting_of(address),
                                                                queues[address][-1].order))
        if not self._waiting_of:
            return None
        heaviest = max(self._waiting_of, key=lambda address: (self.waiting_of(address),
                                                               self._newest(address)))
        if self.waiting_of(heaviest) < mine + 2:  # it would be no worse off than this one
            return None
        return next(k for k in (HEAVY, UNFAMILIAR, FAMILIAR) if heaviest in self._queues[k]), \
            heaviest

    def _newest(self, address: str) -> int:
        """When the newest waiting call of ``address`` came."""
        return max(queues[address][-1].order for queues in self._queues if address in queues)

    def _forget(self, kind: int, address: str, future: asyncio.Future[None] | None) -> None:
        """``future`` out of ``address``'s queue of ``kind`` (None: one was popped already)."""
        queues = self._queues[kind]
        queue = queues.get(address)
        if queue is None:
            return
        if future is not None:
            found = next((waiting for waiting in queue if waiting.future is future), None)
            if found is None:
                return
            queue.remove(found)
        self._left(address)
        if not queue:
            del queues[address]

    def _left(self, address: str) -> None:
        self.waiting -= 1
        left = self._waiting_of[address] - 1
        if left:
            self._waiting_of[address] = left
        else:
            del self._waiting_of[address]

    def _release(self) -> None:
        """A slot is free: the first waiting call of the next address in turn of the best kind
        waiting takes it (light before heavy; familiar and unfamiliar in turn)."""
        light = (self._light_turn, UNFAMILIAR if self._light_turn == FAMILIAR else FAMILIAR)
        for kind in (*light, HEAVY):
            queues = self._queues[kind]
            while queues:
                address = next(iter(queues))
                queue = queues.pop(address)
                future = queue.popleft().future
                self._left(address)
                if queue:
                    queues[address] = queue  # to the end of the turn
                if not future.done():
                    if kind != HEAVY:  # the other light kind looks first next time
                        self._light_turn = UNFAMILIAR if kind == FAMILIAR else FAMILIAR
                    future.set_result(None)
                    return
        self.running -= 1

    def _refused(self) -> ServiceError:
        retry = self._seconds * (self.waiting / max(self.at_once, 1) + 1)
        return ServiceError.over_quota(
            "the server is checking too many passwords from this address, or in all: "
            "retry as RetryInfo says", "TOO_MANY_SIGN_INS", "password checks", retry)
