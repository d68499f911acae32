"""Per-client quotas: rates of calls, table creations and joins, and open streams.

A client is its peer address (the IP, without the port) and, for a call that carries a
valid player token, that token. Beyond a quota the call is refused with RESOURCE_EXHAUSTED,
a ``google.rpc.QuotaFailure`` naming the quota and a ``google.rpc.RetryInfo`` saying when to
retry, and that answer comes only after ``--quota-penalty`` seconds: a gRPC call costs the
server about the same whether it is served or refused, so a flooding client is slowed down
(at most ``--max-concurrent-streams`` calls wait per connection) instead of answered fast.
Every limiter keeps at most ``MAX_KEYS`` clients (the least recently seen are forgotten), so
the quotas are bounded too.
"""

from __future__ import annotations

import time
from collections import OrderedDict

from server.config import Config
from server.errors import ServiceError

MAX_KEYS = 65_536


class RateLimiter:
    """Token buckets per key: ``rate`` per second, up to ``burst`` at once (rate 0: none)."""

    def __init__(self, rate: float, burst: float, max_keys: int = MAX_KEYS) -> None:
        self.rate = rate
        self.burst = max(burst, 1.0)
        self.max_keys = max_keys
        self._buckets: OrderedDict[str, list[float]] = OrderedDict()

    def take(self, key: str, now: float) -> float:
        """Take one; 0.0 when allowed, else the seconds until one is available."""
        if not self.rate:
            return 0.0
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = [self.burst, now]
            if len(self._buckets) > self.max_keys:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(key)
            bucket[0] = min(self.burst, bucket[0] + (now - bucket[1]) * self.rate)
            bucket[1] = now
        if bucket[0] >= 1.0:
            bucket[0] -= 1.0
            return 0.0
        return (1.0 - bucket[0]) / self.rate

    def __len__(self) -> int:
        return len(self._buckets)


class Quotas:
    """The server's quotas, from its flags."""

    def __init__(self, config: Config) -> None:
        self.peer_calls = RateLimiter(config.peer_calls_per_second, config.peer_calls_burst)
        self.token_calls = RateLimiter(config.token_calls_per_second, config.token_calls_burst)
        self.creates = RateLimiter(config.tables_per_minute / 60, config.tables_burst)
        self.joins = RateLimiter(config.joins_per_minute / 60, config.joins_burst)
        self.max_streams_per_peer = config.max_streams_per_peer
        self.penalty = config.quota_penalty
        self._streams: dict[str, int] = {}

    def admit(self, method: str, peer: str, token_hash: str | None) -> None:
        """Count one call; RESOURCE_EXHAUSTED (QuotaFailure, RetryInfo) beyond a quota.
        ``token_hash`` is given only for a valid player token."""
        now = time.monotonic()
        if token_hash is not None:
            wait = self.token_calls.take(token_hash, now)
            if wait:
                raise ServiceError.over_quota(
                    f"too many calls with this player token (at most "
                    f"{self.token_calls.rate:g} per second)", "RATE_LIMITED", "player token",
                    wait, self.penalty)
        else:
            wait = self.peer_calls.take(peer, now)
            if wait:
                raise ServiceError.over_quota(
                    f"too many calls from {peer} (at most {self.peer_calls.rate:g} per second)",
                    "RATE_LIMITED", f"peer {peer}", wait, self.penalty)
        # Tables and seats are counted per address, token or not (each join makes a token).
        if method == "CreateTable":
            wait = self.creates.take(peer, now)
            if wait:
                raise ServiceError.over_quota(
                    f"too many tables created from {peer} (at most "
                    f"{self.creates.rate * 60:g} per minute)", "TOO_MANY_TABLES",
                    f"peer {peer}", wait, self.penalty)
        elif method == "JoinTable":
            wait = self.joins.take(peer, now)
            if wait:
                raise ServiceError.over_quota(
                    f"too many joins from {peer} (at most {self.joins.rate * 60:g} per "
                    "minute)", "TOO_MANY_JOINS", f"peer {peer}", wait, self.penalty)

    def open_stream(self, peer: str) -> None:
        """Count an open stream of ``peer``; RESOURCE_EXHAUSTED beyond the quota."""
        count = self._streams.get(peer, 0)
        if self.max_streams_per_peer and count >= self.max_streams_per_peer:
            raise ServiceError.over_quota(
                f"too many open streams from {peer} (at most {self.max_streams_per_peer})",
                "TOO_MANY_STREAMS", f"peer {peer}", 1.0, self.penalty)
        self._streams[peer] = count + 1

    def close_stream(self, peer: str) -> None:
        count = self._streams.get(peer, 0) - 1
        if count > 0:
            self._streams[peer] = count
        else:
            self._streams.pop(peer, None)

    def clients(self) -> int:
        """Clients the call quotas keep track of (addresses and tokens)."""
        return len(self.peer_calls) + len(self.token_calls)

    def open_streams(self) -> int:
        return sum(self._streams.values())
