"""The terminal clients play Bisca (issue 41) against a real server process: `copas play --game
bisca` through a pseudo-terminal, as a person plays it (the trump card under the stock and its
count, the trick, the hand, each side's points; a card out of the legal ones refused with the
rule), and `copas bot --game bisca` filling a table of 4 in partnerships."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator

import pytest

from tests.helpers.servers import ServerProcess, clients_server
from tests.helpers.terminal import PROMPT, Terminal, copas

HAND = re.compile(r"(\d+):(\S+)")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with clients_server(tmp_path_factory.mktemp("data")) as server:
        yield server
        server.stop()


def _hand_before(screen: str, end: int) -> list[tuple[str, str]]:
    return HAND.findall(screen[:end].rsplit("your hand:", 1)[-1].split("\n", 1)[0])


def test_copas_play_a_game_of_bisca_through_a_terminal(served: ServerProcess) -> None:
    term = Terminal("play", "--server", served.address, "--name", "Tester", "--game", "bisca",
                    "--preset", "quick")
    term.read_until(r"You are Tester, seat 0")
    turns, stocks, tried_bad = 0, [], False
    while True:
        prompt = term.read_until(PROMPT, timeout=60)
        if prompt.group(1).startswith("final standings"):
            break
        assert prompt.group(1).startswith("Your turn")  # no pass, no moon at Bisca
        table = term.screen[:prompt.start()].rsplit("Copas", 1)[-1]
        trump = re.search(r"trumps (\S): (\S+) (under the stock, (\d+) cards left|drawn by)",
                          table)
        assert trump is not None, table
        assert trump.group(2)[-1] == trump.group(1)  # the trump card is of the trump suit
        if trump.group(4):
            stocks.append(int(trump.group(4)))
        assert re.search(r"Tester \d+ card points, \d+ game points", table)
        legal = prompt.group(2).split()
        hand = _hand_before(term.screen, prompt.start())
        assert 1 <= len(hand) <= 3 and {c for _, c in hand} >= set(legal)
        assert not any(c[:-1] in ("8", "9", "10") for _, c in hand)  # the 40-card pack
        if not tried_bad:
            term.type("9H\n")  # a card of no 40-card pack: the server's reason is shown
            term.read_until(r"✗ INVALID_CARD: ")
            term.read_until(r"Your turn[^\n]*: ")
            tried_bad = True
        term.type(legal[0] + "\n")
        turns += 1
    term.read_until(r"1\s+\S+")
    assert term.exit_code() == 0
    # Every card of the pack was played: 20 tricks of 2 a hand, half of them mine.
    assert turns == 20 and tried_bad
    assert stocks[0] == 34 and stocks == sorted(stocks, reverse=True)  # 40 - 2 x 3 dealt
    assert term.screen.count("final standings") == 1
    scored = re.search(r"hand 1 scored: Tester (\d+) card points, \+\d+ \(total \d+\), "
                       r"\S+ (\d+) card points", term.screen)
    assert scored is not None and int(scored.group(1)) + int(scored.group(2)) == 120
    assert "drawn by Tester" in term.screen and "left in the stock" in term.screen


def test_copas_bot_fills_a_bisca_table_of_four_in_partnerships(served: ServerProcess) -> None:
    done = copas("bot", "--server", served.address, "--create", "--game", "bisca", "--seats",
                 "4", "--players", "4", "--preset", "pairs", "--policy", "random")
    assert done.returncode == 0, done.stderr
    places = re.findall(r"^\s+(\d)\. .*: (\d+) points$", done.stdout, re.M)
    # Partners share their team's place and game points: two places, each twice.
    assert sorted(p for p, _ in places) in (["1", "1", "2", "2"], ["1", "1", "1", "1"])
    assert sorted(Counter(points for _, points in places).values()) in ([2, 2], [4])
    assert max(int(points) for _, points in places) >= 1  # a team reached the target


def test_copas_leaderboard_of_a_bisca_kind(served: ServerProcess) -> None:
    """`copas leaderboard --game bisca` asks for that kind's board (its title says the kind);
    an unknown game is refused with the server's reason, naming the accepted ones."""
    done = copas("leaderboard", "--server", served.address, "--game", "bisca", "--players", "4",
                 "--partnerships")
    assert done.returncode == 0, done.stderr
    words = " ".join(done.stdout.split())  # the title wraps to the table's width
    assert "leaderboard, bisca, 4 players in partnerships" in words
    refused = copas("leaderboard", "--server", served.address, "--game", "chess")
    assert refused.returncode == 1
    assert "copas leaderboard: " in refused.stdout and "bisca" in refused.stdout
