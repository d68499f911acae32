"""Password guesses, throttled so that the attacker is held back and never the owner; and new
accounts, bounded per address (issue 37).

OWASP's authentication cheat sheet counts failures against the account, since a guesser can
change address, and warns that an account lockout must not let anyone lock its owner out.
Refusing a username to everyone after its failures did just that (ten wrong passwords from one
address kept its owner out from everywhere). So a refusal only ever falls on the addresses that
failed, and the username as a whole is only slowed down:

- **per address** (any username): 30 failures at once, then one per 5 s. Beyond, that address's
  password sign-ins are refused: RESOURCE_EXHAUSTED ``TOO_MANY_SIGN_INS`` with a RetryInfo.
- **per username and address**: 10 failures at once, then one per 30 s. Beyond, that address is
  refused for that username; every other address is not.
- **per username** (from any address): its failures, forgiven one per 30 s, never refuse. Past
  10 of them (so one address's failures alone never slow anyone else down), a sign-in of that
  username from an address that has not signed it in on this node waits before its password is
  checked: 1 s, doubling with each further failure, at most 8 s (the count stops at 18, so the
  wait is gone about 4 minutes after the last failure). An address that signed the account in
  before is never held by other addresses' failures, and the owner's right password from an
  address that is not refused always signs in, at worst 8 s late.

A sign-in takes its one from the address's and the pair's allowance before its password is
checked (guesses sent at once count at once) and gets it back unless the password was wrong: a
right password, a refusal of the hashing queue, a call that went away cost nothing. A right
password also forgets the pair's failures and makes the address familiar to the username, as a
sign-up or a link of the username from it does. The answer to an unknown username is the same as
to a wrong password, so these limits say nothing of which names exist. What bounds guessing
across all addresses together is the hashing (``hashing.py``: 2 argon2 hashes at once, about 20
checks a second per node at the default cost, and each address's allowance of password calls,
right or wrong), which the held calls wait outside of.

**New accounts** (``AccountCreations``): a token bucket per address, ``--accounts-burst`` (10) at
once, then ``--accounts-per-address-per-hour`` (60); beyond, RESOURCE_EXHAUSTED
``TOO_MANY_ACCOUNTS`` with a RetryInfo. A first SignInDevice of a device, a SignUpPassword and a
first SignInOidc of an identity each take one; a sign-in of an existing account takes none, and a
creation that fails (its username taken meanwhile, the same device at once) gives it back.

**IPv6 networks** (``NetworkBuckets``): an IPv6 client is its /64 (``client_key``), and one
holder of a /48 has 65,536 of them. So an allowance per address (new accounts here, password
checks in ``hashing.py``) is also taken from the address's /56, whose bucket is
``--ipv6-56-factor`` (4) times an address's (its burst and its rate), and from its /48,
``--ipv6-48-factor`` (16) times: 40 /64s of one /48 made 400 accounts at once, now 160. IPv4
addresses, and any key that is not a /64, have their own bucket only.

Bounded, per node: each map (addresses, username-address pairs, usernames, familiar pairs,
new accounts' addresses, /56s and /48s) holds at most ``max_keys`` (100,000) keys, one float each
at most, the oldest written forgotten first: a forgotten bucket starts full again, a forgotten
familiar address is held like any other. A full map takes about 15-18 MB (145-200 bytes a key
measured with tracemalloc, 19-character usernames and IPv4 addresses or IPv6 networks), these
seven and ``hashing.py``'s three about 180 MB at worst (the /56 and /48 maps fill only with as
many IPv6 networks). Each node of a cluster keeps its own: an attacker spread over n nodes gets
n times these.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ipaddress
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass

from server.bounded import Bounded
from server.errors import ServiceError

MAX_KEYS = 100_000
NETWORK_FACTORS = (4.0, 16.0)  # an IPv6 /56's allowance, and a /48's, in /64s' (0: none)


@dataclass(frozen=True, slots=True)
class AttemptRule:
    """How many failures a key may have in a burst, and how fast they are forgiven."""

    burst: int
    """Failures allowed at once."""
    per_second: float
    """Failures forgiven per second afterwards."""


@dataclass(frozen=True, slots=True)
class SlowDown:
    """How a username's failures from any address hold its sign-ins from unfamiliar ones."""

    free: int = 10
    """Failures not yet forgiven that hold nobody."""
    per_second: float = 1 / 30
    """Failures forgiven per second."""
    first: float = 1.0
    """Seconds held at the first failure past ``free``; each further one doubles it."""
    most: float = 8.0
    """Seconds held at most."""

    @property
    def top(self) -> float:
        """The count stops four failures past the first held ``most`` (then each one forgiven
        lowers it): more failures change nothing."""
        return self.free + 1 + math.ceil(math.log2(self.most / self.first)) + 4


class _Buckets:
    """Token buckets per key, full when new: ``take`` one, ``give_back`` one. A bucket is one
    float, the time it is full again (what was taken is given back at the rule's rate)."""

    def __init__(self, rule: AttemptRule, max_keys: int) -> None:
        self.rule = rule
        self._full_at: Bounded[str, float] = Bounded(max_keys)

    def _left(self, key: str, now: float) -> float:
        taken = max(self._full_at.get(key, now) - now, 0.0) * self.rule.per_second
        return self.rule.burst - taken

    def used(self, key: str, now: float) -> float:
        """What ``key`` took and time has not given back yet (0 to ``burst``)."""
        return self.rule.burst - self._left(key, now)

    def wait(self, key: str, now: float) -> float:
        """Seconds until ``key`` may try again (0: now)."""
        left = self._left(key, now)
        return 0.0 if left >= 1.0 else (1.0 - left) / self.rule.per_second

    def take(self, key: str, now: float) -> None:
        step = 1.0 / self.rule.per_second
        full_at = max(self._full_at.get(key, now), now) + step
        self._full_at[key] = min(full_at, now + self.rule.burst * step)

    def give_back(self, key: str, now: float) -> None:
        full_at = self._full_at.get(key)
        if full_at is not None:  # (a key forgotten meanwhile is full already)
            self._full_at[key] = full_at - 1.0 / self.rule.per_second

    def forget(self, key: str) -> None:
        self._full_at.pop(key, None)

    def __len__(self) -> int:
        return len(self._full_at)


@functools.lru_cache(maxsize=4096)
def wider_networks(key: str) -> tuple[str, str]:
    """The /56 and the /48 of an IPv6 /64 quota key (``server.rpc.peers.client_key``'s), or
    ("", "") for an IPv4 address or any other key."""
    if not key.endswith("/64"):
        return "", ""
    try:
        network = ipaddress.IPv6Network(key)
    except ValueError:
        return "", ""
    return str(network.supernet(new_prefix=56)), str(network.supernet(new_prefix=48))


class NetworkBuckets:
    """Token buckets per quota key and, for an IPv6 /64, per its /56 and /48 as well: each
    wider bucket's burst and rate are the key's times its factor (``factors``: the /56's, the
    /48's; 0 leaves that network out). A key is let through while every bucket of its has one
    left; taking or giving back, it takes or gives back one from each."""

    def __init__(self, rule: AttemptRule, factors: tuple[float, float] = NETWORK_FACTORS,
                 max_keys: int = MAX_KEYS) -> None:
        self.rule = rule
        self._levels: list[tuple[int, float, _Buckets]] = [(0, 1.0, _Buckets(rule, max_keys))]
        for level, factor in enumerate(factors, start=1):
            if factor > 0:
                wider = AttemptRule(max(int(rule.burst * factor), 1), rule.per_second * factor)
                self._levels.append((level, factor, _Buckets(wider, max_keys)))

    def _buckets(self, key: str) -> Iterator[tuple[str, float, _Buckets]]:
        names = (key, *wider_networks(key))
        for level, factor, buckets in self._levels:
            if names[level] or not level:  # (a key's own bucket even for "", no address)
                yield names[level], factor, buckets

    def wait(self, key: str, now: float) -> tuple[float, str]:
        """Seconds until ``key`` may take one (0: now), and the key or network that waits."""
        return max(((buckets.wait(name, now), name) for name, _, buckets in self._buckets(key)),
                   key=lambda waiting: waiting[0])

    def take(self, key: str, now: float) -> None:
        for name, _, buckets in self._buckets(key):
            buckets.take(name, now)

    def give_back(self, key: str, now: float) -> None:
        for name, _, buckets in self._buckets(key):
            buckets.give_back(name, now)

    def load(self, key: str, now: float) -> float:
        """What ``key`` took and time has not given back, in a key's units: the most of its
        own, its /56's over the /56's factor and its /48's over the /48's."""
        return max(buckets.used(name, now) / factor for name, factor, buckets in
                   self._buckets(key))

    def __len__(self) -> int:
        return sum(len(buckets) for _, _, buckets in self._levels)


class _Counts:
    """A count per key that one failure raises and time lowers (``SlowDown``'s), kept as one
    float: the time it is down to 0."""

    def __init__(self, rule: SlowDown, max_keys: int) -> None:
        self.rule = rule
        self._zero_at: Bounded[str, float] = Bounded(max_keys)

    def count(self, key: str, now: float) -> float:
        return max(self._zero_at.get(key, now) - now, 0.0) * self.rule.per_second

    def add(self, key: str, now: float) -> None:
        step = 1.0 / self.rule.per_second
        zero_at = max(self._zero_at.get(key, now), now) + step
        self._zero_at[key] = min(zero_at, now + self.rule.top * step)

    def hold(self, key: str, now: float) -> float:
        past = math.ceil(self.count(key, now) - 1e-9) - self.rule.free
        return 0.0 if past <= 0 else min(self.rule.first * 2.0 ** (past - 1), self.rule.most)

    def __len__(self) -> int:
        return len(self._zero_at)


class Attempt:
    """One password check under way: ``failed()`` once the password proved wrong."""

    __slots__ = ("is_failed",)

    def __init__(self) -> None:
        self.is_failed = False

    def failed(self) -> None:
        self.is_failed = True


def _pair(username: str, address: str) -> str:
    return f"{username}\n{address}"


class SignInAttempts:
    """``async with attempt(username, address) as a:`` around a password check (``a.failed()``
    after a wrong one); ``signed_in(username, address)`` once it signed the account in."""

    def __init__(self, clock: Callable[[], float], *,
                 per_address: AttemptRule = AttemptRule(burst=30, per_second=1 / 5),
                 per_pair: AttemptRule = AttemptRule(burst=10, per_second=1 / 30),
                 per_username: SlowDown = SlowDown(),
                 max_keys: int = MAX_KEYS,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self._clock = clock
        self._sleep = sleep
        self._addresses = _Buckets(per_address, max_keys)
        self._pairs = _Buckets(per_pair, max_keys)
        self._usernames = _Counts(per_username, max_keys)
        self._familiar: Bounded[str, None] = Bounded(max_keys)

    def wait(self, username: str, address: str) -> float:
        """Seconds until ``address`` may try ``username`` again (0: now)."""
        now = self._clock()
        return max(self._addresses.wait(address, now),
                   self._pairs.wait(_pair(username, address), now))

    def is_familiar(self, username: str, address: str) -> bool:
        """``address`` signed ``username`` in on this node (or made or linked it)."""
        return _pair(username, address) in self._familiar

    def hold(self, username: str, address: str) -> float:
        """Seconds a sign-in of ``username`` from ``address`` waits before its check (0: none;
        never for an address that signed it in)."""
        if self.is_familiar(username, address):
            return 0.0
        return self._usernames.hold(username, self._clock())

    @contextlib.asynccontextmanager
    async def attempt(self, username: str, address: str) -> AsyncIterator[Attempt]:
        """A password check of ``username`` from ``address``: refused at once if the address
        failed too often, held first if the username did (see the module's text).

        :raises ServiceError: TOO_MANY_SIGN_INS.
        """
        self._take(username, address)
        attempt = Attempt()
        try:
            hold = self.hold(username, address)
            if hold > 0:
                await self._sleep(hold)
            yield attempt
        finally:
            if attempt.is_failed:
                self._usernames.add(username, self._clock())
            else:  # right, refused further on, or gone: no guess was answered
                self._give_back(username, address)

    def signed_in(self, username: str, address: str) -> None:
        """``address`` signed ``username`` in (or made or linked it): its failures for it are
        forgotten, and other addresses' failures no longer hold it."""
        key = _pair(username, address)
        self._pairs.forget(key)
        self._familiar[key] = None

    def _take(self, username: str, address: str) -> None:
        wait = self.wait(username, address)
        if wait > 0:
            raise ServiceError.over_quota(
                "too many failed sign-ins for this username or from this address",
                "TOO_MANY_SIGN_INS", "sign-in attempts", wait)
        now = self._clock()
        self._addresses.take(address, now)
        self._pairs.take(_pair(username, address), now)

    def _give_back(self, username: str, address: str) -> None:
        now = self._clock()
        self._addresses.give_back(address, now)
        self._pairs.give_back(_pair(username, address), now)

    @property
    def keys_held(self) -> int:
        return (len(self._addresses) + len(self._pairs) + len(self._usernames)
                + len(self._familiar))


class Creations:
    """New things one address makes (accounts, championships): ``with one(address):`` around
    the making of one (refused beyond the address's bucket: ``burst`` at once, then
    ``per_hour``, and with ``factors`` beyond its IPv6 /56's and /48's, ``NetworkBuckets``;
    given back if the making fails). ``per_hour`` 0: no limit."""

    def __init__(self, clock: Callable[[], float], per_hour: float, burst: float,
                 max_keys: int = MAX_KEYS, *, what: str = "accounts",
                 reason: str = "TOO_MANY_ACCOUNTS",
                 advice: str = "sign in to an existing one",
                 factors: tuple[float, float] = (0.0, 0.0)) -> None:
        self._clock = clock
        self.per_hour = per_hour
        self._what, self._reason, self._advice = what, reason, advice
        self._buckets = NetworkBuckets(AttemptRule(max(int(burst), 1), per_hour / 3600),
                                       factors, max_keys)

    def check(self, address: str) -> None:
        """Refuses, as ``one`` would, while the address may make none; takes nothing (a
        refusal before any other work).

        :raises ServiceError: RESOURCE_EXHAUSTED with this limit's reason.
        """
        if not self.per_hour:
            return
        wait, network = self._buckets.wait(address, self._clock())
        if wait > 0:
            whose = "address" if network == address else f"address's network ({network})"
            raise ServiceError.over_quota(
                f"too many new {self._what} from this {whose} (at most {self.per_hour:g} "
                f"an hour per address past the first few): {self._advice}, or retry as "
                "RetryInfo says", self._reason, f"new {self._what} from {network}", wait)

    @contextlib.contextmanager
    def one(self, address: str) -> Iterator[None]:
        """:raises ServiceError: RESOURCE_EXHAUSTED with this limit's reason."""
        if not self.per_hour:
            yield
            return
        self.check(address)
        self._buckets.take(address, self._clock())
        try:
            yield
        except BaseException:
            self._buckets.give_back(address, self._clock())
            raise

    @property
    def keys_held(self) -> int:
        return len(self._buckets)


class AccountCreations(Creations):
    """New accounts (their reason is ``Creations``' default), bounded per IPv6 /56 and /48 as
    well unless ``factors`` says otherwise."""

    def __init__(self, clock: Callable[[], float], per_hour: float, burst: float,
                 max_keys: int = MAX_KEYS, *,
                 factors: tuple[float, float] = NETWORK_FACTORS) -> None:
        super().__init__(clock, per_hour, burst, max_keys, factors=factors)
