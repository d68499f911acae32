"""Failed sign-ins, limited per username and per address: a token bucket per key that only a
failure empties, refilled with time. Bounded: at most ``max_keys`` buckets each, the least
recently used forgotten first (a forgotten key only starts full again)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class AttemptRule:
    """How many failures a key may have in a burst, and how fast they are forgiven."""

    burst: int
    """Failures allowed at once."""
    per_second: float
    """Failures forgiven per second afterwards."""


class _Buckets:
    def __init__(self, rule: AttemptRule, max_keys: int) -> None:
        self.rule = rule
        self.max_keys = max_keys
        self._levels: OrderedDict[str, tuple[float, float]] = OrderedDict()  # key -> (left, at)

    def _left(self, key: str, now: float) -> float:
        left, at = self._levels.get(key, (float(self.rule.burst), now))
        return min(float(self.rule.burst), left + (now - at) * self.rule.per_second)

    def wait(self, key: str, now: float) -> float:
        """Seconds until ``key`` may try again (0: now)."""
        left = self._left(key, now)
        return 0.0 if left >= 1.0 else (1.0 - left) / self.rule.per_second

    def fail(self, key: str, now: float) -> None:
        self._levels[key] = (max(self._left(key, now) - 1.0, 0.0), now)
        self._levels.move_to_end(key)
        while len(self._levels) > self.max_keys:
            self._levels.popitem(last=False)

    def __len__(self) -> int:
        return len(self._levels)


class SignInAttempts:
    """``wait(username, address)`` before checking a password; ``failed(...)`` after a wrong
    one. A right one changes nothing (a person who mistyped twice is not held back)."""

    def __init__(self, clock: Callable[[], float], *,
                 per_username: AttemptRule = AttemptRule(burst=10, per_second=1 / 30),
                 per_address: AttemptRule = AttemptRule(burst=30, per_second=1 / 5),
                 max_keys: int = 100_000) -> None:
        self._clock = clock
        self._usernames = _Buckets(per_username, max_keys)
        self._addresses = _Buckets(per_address, max_keys)

    def wait(self, username: str, address: str) -> float:
        now = self._clock()
        return max(self._usernames.wait(username, now), self._addresses.wait(address, now))

    def failed(self, username: str, address: str) -> None:
        now = self._clock()
        self._usernames.fail(username, now)
        self._addresses.fail(address, now)

    @property
    def keys_held(self) -> int:
        return len(self._usernames) + len(self._addresses)
