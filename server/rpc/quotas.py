"""Per-client quotas: rates of calls, table creations and joins, calls in flight and open
streams.

A client is its address (the IP, without the port; an IPv6 client its /64) and, for a call
that carries a valid player token, also that token. The limits nest: a call with a token
passes its token's bucket **and** its address's allowance for all calls, so many tokens from
one address (as many players behind one NAT) share a bounded allowance, larger than one
token's; a call without a token passes the address's bucket for such calls and the same
allowance. Beyond a quota the call is refused at once with RESOURCE_EXHAUSTED, a
``google.rpc.QuotaFailure`` naming the quota and a ``google.rpc.RetryInfo`` saying when to
retry, answered after ``--quota-penalty`` (0.5 s, jittered: a flood that asks again at once
is slowed; the gateway holds at most 64 refusals of one client and 4,096 in all). Calls in flight
per address are bounded too, before the request is decoded. Every limiter keeps at most
``MAX_KEYS`` clients (the least recently seen are forgotten), so the quotas are bounded too.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from prometheus_client.core import GaugeMetricFamily

from server.bounded import Bounded
from server.config import Config
from server.errors import ServiceError
from server.observability import gauges

MAX_KEYS = 65_536
SNAPSHOT_EVENTS_PER_CALL = 32  # a spectator's snapshot costs a call more per these listed


class RateLimiter:
    """Token buckets per key: ``rate`` per second, up to ``burst`` at once (rate 0: none)."""

    def __init__(self, rate: float, burst: float, max_keys: int = MAX_KEYS) -> None:
        self.rate = rate
        self.burst = max(burst, 1.0)
        self.max_keys = max_keys
        self._buckets: Bounded[str, list[float]] = Bounded(max_keys, is_lru=True)

    def take(self, key: str, now: float) -> float:
        """Take one; 0.0 when allowed, else the seconds until one is available."""
        if not self.rate:
            return 0.0
        bucket = self.bucket(key, now)
        if bucket[0] >= 1.0:
            bucket[0] -= 1.0
            return 0.0
        return (1.0 - bucket[0]) / self.rate

    def bucket(self, key: str, now: float) -> list[float]:
        """``key``'s bucket, filled up to ``now`` (made full when new): [tokens, when]."""
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = [self.burst, now]
        else:
            bucket[0] = min(self.burst, bucket[0] + (now - bucket[1]) * self.rate)
            bucket[1] = now
        return bucket

    def __len__(self) -> int:
        return len(self._buckets)


class Quotas:
    """The server's quotas, from its flags."""

    def __init__(self, config: Config) -> None:
        self.peer_calls = RateLimiter(config.peer_calls_per_second, config.peer_calls_burst)
        self.token_calls = RateLimiter(config.token_calls_per_second, config.token_calls_burst)
        self.address_calls = RateLimiter(config.address_calls_per_second,
                                         config.address_calls_burst)
        self.creates = RateLimiter(config.tables_per_minute / 60, config.tables_burst)
        self.joins = RateLimiter(config.joins_per_minute / 60, config.joins_burst)
        self.reactions = RateLimiter(  # per seat (issue 30)
            1 / config.reaction_interval if config.reaction_interval > 0 else 0.0,
            config.reaction_burst)
        self.max_streams_per_peer = config.max_streams_per_peer
        self.max_lobby_streams_per_peer = config.max_lobby_streams_per_peer
        self.max_spectator_streams_per_peer = config.max_spectator_streams_per_peer
        self.max_calls_in_flight = config.max_calls_in_flight_per_address
        self.penalty = config.quota_penalty
        self.max_refusals_in_a_row = config.play_max_refusals_in_a_row  # then a Play stream ends
        self.stream_open_timeout = config.stream_open_timeout
        self.max_streams_opening = config.max_streams_opening
        self.streams_opening = 0  # streams waiting for their opening message, all addresses
        self._streams: dict[str, int] = {}
        self._lobby_streams: dict[str, int] = {}
        self._spectator_streams: dict[str, int] = {}
        self._in_flight: dict[str, int] = {}

    def admit(self, method: str, peer: str, token_hash: str | None) -> None:
        """Count one call; RESOURCE_EXHAUSTED (QuotaFailure, RetryInfo) beyond a quota.
        ``token_hash`` is given only for a valid player token. A refused call takes
        nothing from any bucket."""
        now = time.monotonic()
        first = self.token_calls if token_hash is not None else self.peer_calls
        first_bucket = first.bucket(token_hash or peer, now) if first.rate else None
        if first_bucket is not None and first_bucket[0] < 1.0:
            wait = (1.0 - first_bucket[0]) / first.rate
            if token_hash is not None:
                raise ServiceError.over_quota(
                    f"too many calls with this player token (at most {first.rate:g} per "
                    "second)", "RATE_LIMITED", "player token", wait, self.penalty)
            raise ServiceError.over_quota(
                f"too many calls from {peer} without a player token (at most "
                f"{first.rate:g} per second)", "RATE_LIMITED", f"peer {peer}", wait,
                self.penalty)
        address = self.address_calls
        address_bucket = address.bucket(peer, now) if address.rate else None
        if address_bucket is not None and address_bucket[0] < 1.0:
            raise ServiceError.over_quota(
                f"too many calls from {peer} (at most {address.rate:g} per second from one "
                "address, with or without player tokens)", "RATE_LIMITED",
                f"address {peer}", (1.0 - address_bucket[0]) / address.rate, self.penalty)
        # Tables and seats are counted per address, token or not (each join makes a token).
        if method == "CreateTable":
            wait = self.creates.take(peer, now)
            if wait:
                raise ServiceError.over_quota(
                    f"too many tables created from {peer} (at most "
                    f"{self.creates.rate * 60:g} per minute)", "TOO_MANY_TABLES",
                    f"peer {peer}", wait, self.penalty)
        elif method in ("JoinTable", "Rematch"):  # each seats its caller: a new token
            wait = self.joins.take(peer, now)
            if wait:
                raise ServiceError.over_quota(
                    f"too many joins from {peer} (at most {self.joins.rate * 60:g} per "
                    "minute)", "TOO_MANY_JOINS", f"peer {peer}", wait, self.penalty)
        if first_bucket is not None:
            first_bucket[0] -= 1.0
        if address_bucket is not None:
            address_bucket[0] -= 1.0

    def admit_reaction(self, table_id: str, seat: int) -> None:
        """Count one reaction of ``seat``; RESOURCE_EXHAUSTED TOO_MANY_REACTIONS (QuotaFailure,
        RetryInfo) beyond --reaction-burst at once and one per --reaction-interval."""
        wait = self.reactions.take(f"{table_id}/{seat}", time.monotonic())
        if wait:
            raise ServiceError.over_quota(
                f"too many reactions from your seat (at most {self.reactions.burst:g} at once, "
                f"then one every {1 / self.reactions.rate:g} seconds)", "TOO_MANY_REACTIONS",
                f"seat {seat}", wait, self.penalty)

    def delay(self, peer: str, token_hash: str | None) -> float:
        """Seconds until ``admit`` would let a call of this client pass its rates (0.0: now);
        takes nothing. A Play stream waits this long before it reads its next action."""
        now = time.monotonic()
        first = self.token_calls if token_hash is not None else self.peer_calls
        wait = 0.0
        for limiter, key in ((first, token_hash or peer), (self.address_calls, peer)):
            if limiter.rate:
                tokens = limiter.bucket(key, now)[0]
                if tokens < 1.0:
                    wait = max(wait, (1.0 - tokens) / limiter.rate)
        return wait

    def begin_call(self, peer: str) -> None:
        """Count a call of ``peer`` in flight (until ``end_call``); RESOURCE_EXHAUSTED beyond
        ``--max-calls-in-flight-per-address``."""
        count = self._in_flight.get(peer, 0)
        if self.max_calls_in_flight and count >= self.max_calls_in_flight:
            raise ServiceError.over_quota(
                f"too many calls at once from {peer} (at most {self.max_calls_in_flight} "
                "waiting for their answers)", "TOO_MANY_CALLS", f"peer {peer}", 0.1,
                self.penalty)
        self._in_flight[peer] = count + 1

    def end_call(self, peer: str) -> None:
        _less(self._in_flight, peer)

    def calls_in_flight(self) -> int:
        return sum(self._in_flight.values())

    def open_stream(self, peer: str, method: str = "", *, has_token: bool = True) -> None:
        """Count an open stream of ``peer``; RESOURCE_EXHAUSTED beyond the quota (and, for
        WatchLobby and for a spectator's WatchTable, one without a token, beyond their own
        smaller ones)."""
        count = self._streams.get(peer, 0)
        if self.max_streams_per_peer and count >= self.max_streams_per_peer:
            raise ServiceError.over_quota(
                f"too many open streams from {peer} (at most {self.max_streams_per_peer})",
                "TOO_MANY_STREAMS", f"peer {peer}", 1.0, self.penalty)
        kind = self._kind(method, has_token)
        if kind is not None:
            counts, limit, what = kind
            open_now = counts.get(peer, 0)
            if limit and open_now >= limit:
                raise ServiceError.over_quota(
                    f"too many {what} from {peer} (at most {limit})", "TOO_MANY_STREAMS",
                    f"peer {peer}", 1.0, self.penalty)
            counts[peer] = open_now + 1
        self._streams[peer] = count + 1

    def begin_opening(self) -> None:
        """Count a stream waiting for its opening message (until ``end_opening``);
        RESOURCE_EXHAUSTED TOO_MANY_STREAMS beyond ``--max-streams-opening``, from all
        addresses at once."""
        if self.max_streams_opening and self.streams_opening >= self.max_streams_opening:
            raise ServiceError.over_quota(
                f"too many streams are waiting for their opening message (at most "
                f"{self.max_streams_opening})", "TOO_MANY_STREAMS", "server", 1.0,
                self.penalty)
        self.streams_opening += 1

    def end_opening(self) -> None:
        self.streams_opening -= 1

    def close_stream(self, peer: str, method: str = "", *, has_token: bool = True) -> None:
        _less(self._streams, peer)
        kind = self._kind(method, has_token)
        if kind is not None:
            _less(kind[0], peer)

    def _kind(self, method: str, has_token: bool) -> tuple[dict[str, int], int, str] | None:
        """The smaller quota of a kind of stream: its counts, its limit, its name."""
        if method == "WatchLobby":
            return (self._lobby_streams, self.max_lobby_streams_per_peer,
                    "lobby streams (a client needs one)")
        if method == "WatchTable" and not has_token:
            return (self._spectator_streams, self.max_spectator_streams_per_peer,
                    "spectator streams (WatchTable without a player token)")
        return None

    def spectator_streams(self, peer: str) -> int:
        return self._spectator_streams.get(peer, 0)

    def charge_snapshot(self, peer: str, events: int) -> None:
        """A spectator's snapshot listing ``events`` missed events costs one call more per
        ``SNAPSHOT_EVENTS_PER_CALL`` of them, from its address's buckets; RESOURCE_EXHAUSTED
        RATE_LIMITED (nothing taken) when they do not hold that much."""
        extra = -(-events // SNAPSHOT_EVENTS_PER_CALL)
        if not extra:
            return
        now = time.monotonic()
        limiters = [lim for lim in (self.peer_calls, self.address_calls) if lim.rate]
        buckets = [limiter.bucket(peer, now) for limiter in limiters]
        for limiter, bucket in zip(limiters, buckets, strict=True):
            if bucket[0] < extra:
                raise ServiceError.over_quota(
                    f"too many snapshots with missed events from {peer} (one listing "
                    f"{events} events costs {extra} calls more)", "RATE_LIMITED",
                    f"peer {peer}", (extra - bucket[0]) / limiter.rate, self.penalty)
        for bucket in buckets:
            bucket[0] -= extra

    def clients(self) -> int:
        """Clients the call quotas keep track of (addresses and tokens)."""
        return len(self.peer_calls) + len(self.token_calls) + len(self.address_calls)

    def open_streams(self) -> int:
        return sum(self._streams.values())

    def gauges(self) -> Iterable[GaugeMetricFamily]:
        return gauges(("copas_quota_clients", "Clients the quotas keep track of",
                       self.clients()),
                      ("copas_streams_opening", "Play streams waiting for their opening "
                       "message", self.streams_opening))


def _less(counts: dict[str, int], key: str) -> None:
    """One less for ``key`` (gone at zero: the counts hold only clients with something open)."""
    count = counts.get(key, 0) - 1
    if count > 0:
        counts[key] = count
    else:
        counts.pop(key, None)
