"""Accounts at work against running servers: many sign in, refresh and play at once (what an
operator's dashboard must keep showing), and ``/metrics`` scraped beside them."""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import secrets
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import jwt
from copas.v1 import accounts_pb2, accounts_pb2_grpc
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.helpers.servers import ROOT

ISSUER = "https://id.example.test"
AUDIENCE = "copas-web"


@dataclass
class Scraper:
    """Scrapes ``/metrics`` of each port in a thread of its own until stopped: every answer's
    status is kept, and the names of the last answer's series."""

    ports: Sequence[int]
    statuses: list[int] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    exported: dict[int, set[str]] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _scrape(self, port: int) -> None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=20) as got:
                self.statuses.append(got.status)
                self.exported[port] = exported_names(got.read().decode())
        except urllib.error.HTTPError as error:
            self.statuses.append(error.code)
            self.failures.append(f"{port}: HTTP {error.code} {error.read()[:300]!r}")

    def _run(self) -> None:
        while not self._stop.is_set():
            for port in self.ports:
                self._scrape(port)
            self._stop.wait(0.05)

    def __enter__(self) -> Scraper:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(30)
        for port in self.ports:  # one scrape after the work, on every port
            self._scrape(port)


def exported_names(text: str) -> set[str]:
    """The series names an exposition holds (a histogram's _bucket, _sum and _count too)."""
    names: set[str] = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            names.add(name)
            if kind == "histogram":
                names |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
        elif line and not line.startswith("#"):
            names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return names


def dashboard_metrics() -> set[str]:
    """Every copas_ series the shipped Grafana dashboard reads."""
    import json

    dashboard = json.loads((ROOT / "ops" / "grafana" / "copas.json").read_text())
    found: set[str] = set()
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            found |= set(re.findall(r"\bcopas_[a-z0-9_]+", target["expr"]))
    return found


async def sign_in_many(addresses: Sequence[str], count: int, *, at_once: int = 50,
                       refresh_every: int = 2) -> list[accounts_pb2.Session]:
    """``count`` new guest accounts signed in, in turn on each of ``addresses``; every
    ``refresh_every``-th refreshes its session once. Returns the sessions (refreshed ones
    as refreshed)."""
    channels = [grpc.aio.insecure_channel(a) for a in addresses]
    try:
        stubs = [accounts_pb2_grpc.AccountServiceStub(c) for c in channels]
        gate = asyncio.Semaphore(at_once)

        async def one(n: int) -> accounts_pb2.Session:
            stub = stubs[n % len(stubs)]
            async with gate:
                session = (await stub.SignInDevice(accounts_pb2.SignInDeviceRequest(
                    device_secret=secrets.token_urlsafe(24), display_name=f"Load {n:04d}"))
                ).session
                if n % refresh_every == 0:
                    other = stubs[(n + 1) % len(stubs)]  # the other node, in a cluster
                    session = (await other.RefreshSession(accounts_pb2.RefreshSessionRequest(
                        refresh_token=session.refresh_token))).session
                return session

        return list(await asyncio.gather(*(one(n) for n in range(count))))
    finally:
        for channel in channels:
            await channel.close()


async def play_rated_games(address: str, games: int, names: Sequence[str]) -> None:
    """``games`` quick games of four of the reference client's bot accounts (``copas bot
    --accounts``), one after another."""
    from clients import bots

    for n in range(games):
        parser = argparse.ArgumentParser()
        bots.add_arguments(parser)
        seated = [names[(n + k) % len(names)] for k in range(4)]
        args = parser.parse_args(["--server", address, "--create", "--seats", "4",
                                  "--players", "4", "--preset", "quick", "--accounts",
                                  ",".join(seated), "--account-seed", "metrics-load",
                                  "--transport", "play", "--seed", str(n)])
        assert await bots.bots_main(args) == 0


class ManualClock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Keys:
    def __init__(self, tmp: Path) -> None:
        self.private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.private.public_key()))
        jwk.update(kid="k1", alg="RS256", use="sig")
        self.path = tmp / "jwks.json"
        self.path.write_text(json.dumps({"keys": [jwk]}))

    def token(self, **claims: Any) -> str:
        now = int(time.time())
        body = {"iss": ISSUER, "aud": AUDIENCE, "sub": "person-1", "iat": now,
                "exp": now + 300, "name": "Ana"} | claims
        return jwt.encode(body, self.private, algorithm="RS256", headers={"kid": "k1"})
