"""Shared test helpers: rig a deal, play out a game, fingerprint a state."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import random
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
COMPILED_PACKAGES = ("engine", "ai")


class PureSourceFinder(importlib.abc.MetaPathFinder):
    """Imports the project's mypyc-compiled modules from their .py source instead."""

    def find_spec(self, fullname: str, path: Any, target: Any = None
                  ) -> importlib.machinery.ModuleSpec | None:
        if fullname.split(".")[0] not in COMPILED_PACKAGES or "." not in fullname:
            return None
        source = ROOT.joinpath(*fullname.split(".")).with_suffix(".py")
        if not source.is_file():
            return None
        return importlib.util.spec_from_file_location(fullname, source)


# Servers the tests start as processes serve no web page unless a test asks (--web-port):
# none of them may take the default port 8080 from a running `make run`, or from another.
os.environ["COPAS_WEB_PORT"] = "0"

if os.environ.get("COPAS_PURE_ENGINE") == "1":  # run the tests on the pure-Python modules
    sys.meta_path.insert(0, PureSourceFinder())

from engine import Game, Phase, Rules, card  # noqa: E402
from engine.cards import mask_of  # noqa: E402


def cards(text: str) -> list[Any]:
    """'2C QS 10H' -> cards."""
    return [card(t) for t in text.split()]


def rig(game: Game, hands: list[str]) -> Game:
    """Replace the hands of the hand in progress, at the start of its play: passes (if any)
    are made automatically first, then each seat gets the given cards, as if dealt."""
    while game.phase is Phase.PASSING:
        seat = game.to_act()[0]
        game.apply(game.auto_action(seat))
    assert game.phase is Phase.PLAYING and game.trick_number == 0 and not game.trick_cards
    masks = [mask_of(cards(h)) for h in hands]
    assert len(masks) == game.players
    union = 0
    for m in masks:
        assert not union & m, "a card is dealt twice"
        union |= m
    game.hands = masks
    game.dealt = list(masks)
    game._begin_play()
    return game


def fingerprint(game: Game) -> tuple[Any, ...]:
    """Everything that makes up the state, to check that a refused action changed nothing."""
    return (game.phase, game.hand_number, tuple(game.hands), tuple(game.passes),
            tuple(game.received), tuple(game.taken), tuple(game.trick_cards),
            tuple(game.trick_seats), game.trick_number, game.hearts_broken, game.turn,
            tuple(game.totals), tuple(game.has_left), len(game.actions), game.moon_shooter,
            game.last_trick, len(game.hands_played), game.standings)


def play_auto(game: Game, until: Any = None) -> list[Any]:
    """Play automatic choices for everyone until the game ends (or ``until(game)``)."""
    events: list[Any] = []
    while not game.is_over and not (until and until(game)):
        seat = game.to_act()[0]
        events += game.apply(game.auto_action(seat))
    return events


def play_random(game: Game, rng: random.Random, max_actions: int = 10**6) -> list[Any]:
    """Random legal actions until the game ends."""
    events: list[Any] = []
    for _ in range(max_actions):
        if game.is_over:
            break
        events += game.apply(random_action(game, rng))
    return events


def random_action(game: Game, rng: random.Random) -> Any:
    from engine import ChooseMoon, MoonChoice, PassCards, PlayCard

    seats = game.to_act()
    seat = rng.choice(seats)
    if game.phase is Phase.PASSING:
        return PassCards(seat, tuple(rng.sample(game.legal_cards(seat), 3)))
    if game.phase is Phase.PLAYING:
        return PlayCard(seat, rng.choice(game.legal_cards(seat)))
    return ChooseMoon(seat, rng.choice(list(MoonChoice)))


@pytest.fixture(scope="session")
def postgres() -> Any:
    """A throw-away PostgreSQL server (Debian's initdb/pg_ctl) for the session's tests; a
    test that needs one fails when the postgresql package is missing (.ci/run installs it)."""
    import shutil
    import tempfile

    from tools.pglocal import LocalPostgres, free_port

    base = Path(tempfile.mkdtemp(prefix="copas-pg-"))
    base.chmod(0o755)  # the postgres user (when run as root) reaches its directory
    server = LocalPostgres(base / "pg", free_port())
    server.create()
    server.start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def online() -> Rules:
    return Rules.preset("online")


# ---------------------------------------------------------------- gRPC server fixtures

@pytest.fixture
async def server(tmp_path: Any) -> Any:
    """A real server on loopback (in this event loop), seeds allowed, metrics on a free port."""
    from server.main import shutdown, start
    from tests.server_helpers import config_for_tests, free_port

    running = await start(config_for_tests(metrics_port=free_port(), metrics_host="127.0.0.1",
                                      allow_seed=True, finished_table_ttl=30.0,
                                      data_dir=str(tmp_path / "data")))
    yield running
    await shutdown(running, 0)


@pytest.fixture
async def stub(server: Any) -> Any:
    import grpc
    from copas.v1 import copas_pb2_grpc

    channel = grpc.aio.insecure_channel(f"127.0.0.1:{server.port}")
    yield copas_pb2_grpc.CopasServiceStub(channel)
    await channel.close()
