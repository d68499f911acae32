"""Championships as docs/RULES.md "Championships" writes them: tables, seating, points,
standings and every tie-break, the worked example included."""

from __future__ import annotations

import hashlib
import itertools
import random
from collections.abc import Iterator
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import Game, Leave, Rules
from server.championships.format import (
    BoardScore,
    ChampionshipError,
    ChampionshipRules,
    GameResult,
    Scoring,
    Standing,
    Tally,
    TieBreak,
    board_scores,
    championship_points,
    deal_seed,
    draw_order,
    final_standings,
    met_pairs,
    seat_final,
    seat_round,
    standings,
    table_sizes,
)
from tests.helpers.budget import budget
from tests.helpers.championships import result_from_game

SMALL = settings(max_examples=100, derandomize=True, deadline=None, database=None)


def ranked(order: list[str]) -> list[Standing]:
    """Standings that only give an order (for seating)."""
    return [Standing(i + 1, p, 0, Fraction(0), Fraction(0), 0, 0, TieBreak.DRAW)
            for i, p in enumerate(order)]


def pair(a: str, b: str) -> frozenset[str]:
    return frozenset((a, b))


def repeats(tables: list[list[str]], met: set[frozenset[str]]) -> int:
    return sum(pair(a, b) in met for t in tables for a, b in itertools.combinations(t, 2))


# ---------------------------------------------------------------- tables


@pytest.mark.parametrize(("n", "sizes"), [
    (3, [3]), (4, [4]), (5, [5]), (6, [3, 3]), (7, [4, 3]), (8, [4, 4]), (9, [5, 4]),
    (10, [5, 5]), (11, [4, 4, 3]), (12, [4, 4, 4]), (13, [5, 4, 4]), (14, [5, 5, 4]),
    (15, [4, 4, 4, 3]), (1001, [5] + [4] * 249),
])
def test_table_sizes_as_written(n: int, sizes: list[int]) -> None:
    assert table_sizes(n) == sizes


@given(st.integers(3, 2000))
@SMALL
def test_table_sizes_most_fours_fives_before_threes(n: int) -> None:
    sizes = table_sizes(n)
    assert sum(sizes) == n and sizes == sorted(sizes, reverse=True)
    odd = [s for s in sizes if s != 4]
    assert len(odd) <= 2 and set(odd) in ({3}, {5}, set())
    assert 3 not in odd or n % 4 == 3 or n == 6


@pytest.mark.parametrize("n", [0, 1, 2])
def test_fewer_than_three_players_is_refused(n: int) -> None:
    with pytest.raises(ChampionshipError, match="at least 3 players"):
        table_sizes(n)


# ---------------------------------------------------------------- seating


def play_round(tally: Tally, tables: list[list[str]], round_no: int, rng: random.Random) -> None:
    for k, table in enumerate(tables, start=1):
        tally.add(GameResult(round_no, k, tuple(table), tuple(rng.randrange(60) for _ in table)))


@given(st.integers(3, 60), st.integers(0, 2**32))
@SMALL
def test_every_round_seats_everybody_once_at_tables_as_written(n: int, seed: int) -> None:
    players = [f"p{i}" for i in range(n)]
    tally = Tally(players, seed)
    rng = random.Random(seed)
    for round_no in range(1, 5):
        tables = seat_round(players, tally.standings() if round_no > 1 else [],
                            tally.met_pairs(), seed, round_no)
        assert [len(t) for t in tables] == table_sizes(n)
        assert sorted(p for t in tables for p in t) == sorted(players)
        play_round(tally, tables, round_no, rng)


def canonical_seatings(players: list[int], sizes: list[int],
                       previous_first: int = -1) -> Iterator[list[tuple[int, ...]]]:
    """Every seating once: tables largest first, tables of one size by their best player."""
    if not sizes:
        yield []
        return
    size, rest = sizes[0], sizes[1:]
    for table in itertools.combinations(players, size):
        if table[0] <= previous_first:
            continue
        others = [p for p in players if p not in table]
        following = table[0] if rest and rest[0] == size else -1
        for tail in canonical_seatings(others, rest, following):
            yield [table, *tail]


def check_against_all_seatings(n: int, met_ix: set[tuple[int, int]],
                               registration: list[str]) -> None:
    names = [f"p{i}" for i in range(n)]
    met = {pair(names[a], names[b]) for a, b in met_ix}

    def cost(seating: list[tuple[int, ...]]) -> int:
        return sum((a, b) in met_ix for t in seating for a, b in itertools.combinations(t, 2))

    best = min(canonical_seatings(list(range(n)), table_sizes(n)),
               key=lambda s: (cost(s), s))
    tables = seat_round(registration, ranked(names), met, 7, 2)
    assert [tuple(sorted(names.index(p) for p in t)) for t in tables] == best
    assert repeats(tables, met) == cost(best)


@given(st.data())
@SMALL
def test_seating_is_the_first_with_fewest_repeats_against_all_seatings(data: st.DataObject) -> None:
    n = data.draw(st.integers(3, 9), label="players")
    all_pairs = list(itertools.combinations(range(n), 2))
    met_ix = data.draw(st.sets(st.sampled_from(all_pairs)), label="met")
    registration = data.draw(st.permutations([f"p{i}" for i in range(n)]), label="order")
    check_against_all_seatings(n, met_ix, registration)


@pytest.mark.parametrize("n", range(3, 10))
@pytest.mark.parametrize("density", [0.3, 0.6, 1.0])
def test_seating_against_all_seatings_when_many_have_met(n: int, density: float) -> None:
    rng = random.Random(n)
    met_ix = {p for p in itertools.combinations(range(n), 2) if rng.random() < density}
    check_against_all_seatings(n, met_ix, [f"p{i}" for i in range(n)])


def test_neighbours_in_the_standings_meet_when_nobody_has_met() -> None:
    order = [f"p{i:02d}" for i in range(13)]
    tables = seat_round(order, ranked(order), set(), 1, 2)
    assert [sorted(t) for t in tables] == [order[:5], order[5:9], order[9:]]


def test_a_repeat_is_avoided_by_moving_down_the_standings() -> None:
    order = list("ABCDEFGH")
    tables = seat_round(order, ranked(order), {pair("A", "B")}, 1, 2)
    assert [sorted(t) for t in tables] == [list("ACDE"), list("BFGH")]


@given(st.integers(0, 2**32))
@settings(max_examples=10, derandomize=True, deadline=None, database=None)
def test_the_greedy_path_avoids_repeats_a_swap_can_remove(seed: int) -> None:
    """Past the search budget (0 here) the greedy seating and its swaps still find a seating
    without repeats in an early round of a big championship."""
    players = [f"p{i}" for i in range(200)]
    tally = Tally(players, seed)
    rng = random.Random(seed)
    for round_no in range(1, 5):
        met = tally.met_pairs()
        tables = seat_round(players, tally.standings() if round_no > 1 else [], met, seed,
                            round_no, budget=0)
        assert repeats(tables, met) == 0
        assert sorted(p for t in tables for p in t) == sorted(players)
        play_round(tally, tables, round_no, rng)


def test_seating_is_deterministic_for_a_seed_and_the_draw_depends_on_it() -> None:
    players = [f"p{i}" for i in range(30)]
    first = seat_round(players, [], set(), "s1", 1)
    assert seat_round(list(reversed(players)), [], set(), "s1", 1) == first
    assert seat_round(players, [], set(), "s2", 1) != first
    assert draw_order(players, "s1") == draw_order(reversed(players), "s1")


def test_seating_refuses_standings_of_other_players() -> None:
    with pytest.raises(ChampionshipError, match="exactly the round's players"):
        seat_round(list("ABCD"), ranked(list("ABCE")), set(), 1, 2)
    with pytest.raises(ChampionshipError, match="registered twice"):
        seat_round(list("ABCA"), [], set(), 1, 1)


# ---------------------------------------------------------------- seeded draws
# An implementation of docs/RULES.md's "Seeded draws" from its words, with hashlib only.


def key(text: str) -> int:
    """The first 8 bytes of the text's SHA-256, an unsigned big-endian number."""
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return sum(byte << (8 * (7 - i)) for i, byte in enumerate(digest[:8]))


def drawn(ids: list[str], seed: int | str, purpose: str) -> list[str]:
    """The draw for a purpose: by the key of copas-championship/<seed>/<purpose>/<id>,
    smallest first, then by id."""
    keyed = [(key(f"copas-championship/{seed}/{purpose}/{p}"), p) for p in ids]
    return [p for _, p in sorted(keyed)]


def test_the_rules_example_of_the_draws() -> None:
    assert key("copas-championship/example/draw/A") == 0x1d89cab4e2c9feef == 2128455177157082863
    assert drawn(list("ABCDEFGH"), "example", "draw") == list("HAGFCBED")
    assert drawn(list("ABCDEFGH"), "example", "round-1") == list("CHEGAFBD")
    assert deal_seed(ChampionshipRules(), "example", 1, 1, 4) == 12068098665222975963
    assert deal_seed(ChampionshipRules(duplicate_deals=True), "example", 1, 1, 4) \
        == 1127427911202044656


SEEDS = ["example", 0, 12345, "s/with/slashes", "çé ☃"]
IDS = [f"p{i}" for i in range(13)] + ["é", "Ω-9", "a b", "10", "9"]


@pytest.mark.parametrize("seed", SEEDS)
def test_round_1_and_its_seats_recompute_from_the_rules_words(seed: int | str) -> None:
    for n in (3, 5, 8, 13, len(IDS)):
        ids = IDS[:n]
        order = drawn(ids, seed, "round-1")
        tables = seat_round(list(reversed(ids)), [], set(), seed, 1)
        # Nobody has met: neighbours in the draw sit together, tables largest first.
        start, expected = 0, []
        for t, size in enumerate(table_sizes(n), start=1):
            expected.append(drawn(order[start:start + size], seed, f"seats/1/{t}"))
            start += size
        assert tables == expected


@pytest.mark.parametrize("seed", SEEDS)
def test_later_rounds_seats_recompute_from_the_rules_words(seed: int | str) -> None:
    order = IDS[:13]
    tables = seat_round(order, ranked(order), set(), seed, 4)
    assert [sorted(t) for t in tables] == [sorted(order[:5]), sorted(order[5:9]),
                                           sorted(order[9:])]
    assert tables == [drawn(t, seed, f"seats/4/{k}") for k, t in enumerate(tables, start=1)]


@pytest.mark.parametrize("seed", SEEDS)
def test_the_tie_break_draw_recomputes_from_the_rules_words(seed: int | str) -> None:
    rows = standings([], IDS, seed)  # no game yet: everyone tied on everything
    assert [s.player for s in rows] == drawn(IDS, seed, "draw") == draw_order(IDS, seed)
    assert {s.decided_by for s in rows} == {TieBreak.DRAW}


@pytest.mark.parametrize("seed", SEEDS)
def test_deal_seeds_recompute_from_the_rules_words(seed: int | str) -> None:
    plain, duplicate = ChampionshipRules(), ChampionshipRules(duplicate_deals=True)
    for round_no, table, size in [(1, 1, 4), (3, 2, 5), (20, 17, 3)]:
        assert deal_seed(plain, seed, round_no, table, size) == key(
            f"copas-championship/{seed}/deal/{round_no}/table/{table}")
        assert deal_seed(duplicate, seed, round_no, table, size) == key(
            f"copas-championship/{seed}/deal/{round_no}/size/{size}")


# ---------------------------------------------------------------- rounds with fewer players


def test_a_round_seats_its_players_and_passes_over_those_dropped() -> None:
    order = [f"p{i}" for i in range(9)]
    playing = [p for p in order if p not in ("p1", "p4")]
    tables = seat_round(playing, ranked(order), set(), 1, 2)
    assert [sorted(t) for t in tables] == [["p0", "p2", "p3", "p5"], ["p6", "p7", "p8"]]
    with pytest.raises(ChampionshipError, match="leave out p9: they must list exactly"):
        seat_round([*playing, "p9"], ranked(order), set(), 1, 2)
    with pytest.raises(ChampionshipError, match="repeat a player"):
        seat_round(playing, ranked([*order, "p0"]), set(), 1, 2)


def test_a_late_entrant_scores_nothing_before_a_dropped_player_keeps_what_they_won() -> None:
    tally = Tally("ABCDEFGH", "late")
    round_1 = [GameResult(1, 1, tuple("ABCD"), (20, 35, 35, 40)),
               GameResult(1, 2, tuple("EFGH"), (10, 26, 50, 44))]
    for result in round_1:
        tally.add(result)
    tally.register("I")
    with pytest.raises(ChampionshipError, match="registered twice"):
        tally.register("A")
    # Round 2: E and H dropped, I entered: 7 players, tables of 4 and 3.
    playing = list("ABCDFGI")
    tables = seat_round(playing, tally.standings(), tally.met_pairs(), "late", 2)
    assert sorted(p for t in tables for p in t) == sorted(playing)
    assert [len(t) for t in tables] == [4, 3]
    rng = random.Random(2)
    play_round(tally, tables, 2, rng)
    rows = by_player(tally.standings())
    assert rows["I"].games == 1 and rows["E"].games == rows["H"].games == 1
    assert rows["A"].games == 2
    assert rows["E"].points == 120 and rows["E"].firsts == 1  # kept
    assert rows["E"].relative_points == Fraction(10 * 4 - 130, 4)
    assert rows["I"].points == championship_points(
        next(r for r in tally.results if "I" in r.players))["I"]
    assert sorted(s.place for s in rows.values()) == list(range(1, 10))
    # The same standings as from a registration that held I from the start.
    assert standings(tally.results, "ABCDEFGHI", "late") == tally.standings()


def test_a_late_entrant_with_nothing_is_ranked_by_the_same_criteria() -> None:
    tally = Tally("ABC", 0)
    tally.add(GameResult(1, 1, tuple("ABC"), (10, 20, 30)))
    tally.register("D")
    rows = tally.standings()
    # C has 0 points but 0 - 20 = +10 relative points; D 0 points and 0 relative: D ahead.
    assert [(s.player, s.points, s.relative_points, s.decided_by) for s in rows] == [
        ("A", 120, -10, TieBreak.POINTS), ("B", 60, 0, TieBreak.POINTS),
        ("D", 0, 0, TieBreak.RELATIVE_POINTS), ("C", 0, 10, TieBreak.RELATIVE_POINTS)]


# ---------------------------------------------------------------- deals


def test_deal_seeds_per_table_or_per_size_with_duplicate_deals() -> None:
    plain, duplicate = ChampionshipRules(), ChampionshipRules(duplicate_deals=True)
    assert deal_seed(plain, 9, 1, 1, 4) != deal_seed(plain, 9, 1, 2, 4)
    assert deal_seed(duplicate, 9, 1, 1, 4) == deal_seed(duplicate, 9, 1, 2, 4)
    assert deal_seed(duplicate, 9, 1, 1, 4) != deal_seed(duplicate, 9, 1, 3, 5)
    assert deal_seed(duplicate, 9, 1, 1, 4) != deal_seed(duplicate, 9, 2, 1, 4)
    assert deal_seed(plain, 9, 1, 1, 4) == deal_seed(plain, 9, 1, 1, 4)
    assert ChampionshipRules(game=Rules.preset("quick")).table_rules(5).players == 5


@pytest.mark.parametrize("rounds", [0, 21, True, 2.0])
def test_rounds_are_1_to_20(rounds: object) -> None:
    with pytest.raises(ChampionshipError, match="rounds must be 1 to 20"):
        ChampionshipRules(rounds=rounds)  # type: ignore[arg-type]


# ---------------------------------------------------------------- points


@pytest.mark.parametrize(("totals", "points"), [
    ((10, 20, 30), [120, 60, 0]),
    ((10, 20, 30, 40), [120, 80, 40, 0]),
    ((10, 20, 30, 40, 50), [120, 90, 60, 30, 0]),
    ((10, 10, 30, 40), [100, 100, 40, 0]),
    ((10, 10, 10, 40), [80, 80, 80, 0]),
    ((9, 9, 9, 9), [60, 60, 60, 60]),
    ((10, 10, 30, 40, 50), [105, 105, 60, 30, 0]),
    ((10, 20, 40, 40, 40), [120, 90, 30, 30, 30]),
    ((10, 20, 20), [120, 30, 30]),
])
def test_points_by_place_shared_places_split(totals: tuple[int, ...], points: list[int]) -> None:
    players = tuple("ABCDE"[:len(totals)])
    assert list(championship_points(GameResult(1, 1, players, totals)).values()) == points


def test_leavers_behind_everyone_the_first_to_leave_last_then_no_shows() -> None:
    result = GameResult(1, 1, tuple("ABCDE"), (90, 5, 30, 0, 0), leavers=("B", "A"),
                        no_shows=("E",))
    # Stayers: C (30) and D (0): D 1st, C 2nd; leavers: A (left second) 3rd, B (first) 4th.
    assert dict(zip(result.players, result.places, strict=True)) == {
        "D": 1, "C": 2, "A": 3, "B": 4, "E": 5}
    shared = GameResult(1, 1, tuple("ABCD"), (0, 0, 0, 0), no_shows=("C", "D"))
    assert shared.places == (1, 1, 3, 3)
    assert championship_points(shared) == {"A": 100, "B": 100, "C": 20, "D": 20}


def test_a_result_from_an_engine_game_ranks_leavers_as_the_engine_does() -> None:
    game = Game(Rules(players=4, max_hands=1), seed=3)
    game.apply(Leave(2))
    game.apply(Leave(0))
    game.apply(Leave(1))
    assert game.is_over
    result = result_from_game(game, list("WXYZ"), 1, 1)
    assert result.leavers == ("Y", "W", "X")
    engine_places = {r.seat: r.place for r in game.standings}
    assert result.places == tuple(engine_places[s] for s in range(4))


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"players": ("A", "B"), "totals": (1, 2)}, "3 to 5 different players"),
    ({"players": ("A", "A", "B"), "totals": (1, 2, 3)}, "3 to 5 different players"),
    ({"players": ("A", "B", "C"), "totals": (1, 2)}, "need 3 totals"),
    ({"players": ("A", "B", "C"), "totals": (1, 2, 3), "leavers": ("Z",)}, "distinct players"),
    ({"players": ("A", "B", "C"), "totals": (1, 2, 3), "leavers": ("A",), "no_shows": ("A",)},
     "distinct players"),
])
def test_results_that_do_not_fit_are_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ChampionshipError, match=message):
        GameResult(round_no=1, table=1, **kwargs)  # type: ignore[arg-type]


# ---------------------------------------------------------------- standings


def by_player(rows: list[Standing]) -> dict[str, Standing]:
    return {s.player: s for s in rows}


def test_points_decide_first() -> None:
    rows = standings([GameResult(1, 1, tuple("ABC"), (1, 2, 3))], "ABC", 0)
    assert [(s.player, s.points, s.decided_by) for s in rows] == [
        ("A", 120, TieBreak.POINTS), ("B", 60, TieBreak.POINTS), ("C", 0, TieBreak.POINTS)]


def test_firsts_decide_equal_points_a_shared_first_counts_a_share() -> None:
    results = [GameResult(1, 1, tuple("AXY"), (0, 5, 9)),  # A 1st (120)
               GameResult(2, 1, tuple("AXY"), (9, 0, 5)),  # A 3rd (0)
               GameResult(1, 2, tuple("BPQ"), (5, 0, 9)),  # B 2nd (60)
               GameResult(2, 2, tuple("BPQ"), (5, 0, 9)),  # B 2nd (60)
               GameResult(3, 1, tuple("RST"), (0, 0, 9))]  # R and S share 1st
    rows = by_player(standings(results, "ABXYPQRST", 0))
    assert rows["A"].points == rows["B"].points == 120
    assert (rows["A"].firsts, rows["B"].firsts) == (Fraction(1), Fraction(0))
    assert rows["A"].place + 1 == rows["B"].place
    assert rows["A"].decided_by is TieBreak.FIRSTS and rows["B"].decided_by is TieBreak.FIRSTS
    assert rows["R"].firsts == rows["S"].firsts == Fraction(1, 2)
    assert rows["R"].points == rows["S"].points == 90


def test_relative_points_decide_equal_firsts_across_table_sizes() -> None:
    # A wins a table of 3 by 10 under its average; B wins a table of 5 by 12 under its own.
    results = [GameResult(1, 1, tuple("AXY"), (10, 20, 30)),
               GameResult(1, 2, tuple("BPQRS"), (8, 20, 20, 20, 32))]
    rows = by_player(standings(results, "AXYBPQRS", 0))
    assert rows["A"].relative_points == -10 and rows["B"].relative_points == -12
    assert (rows["B"].place, rows["A"].place) == (1, 2)
    assert rows["A"].decided_by is TieBreak.RELATIVE_POINTS


def test_head_to_head_decides_players_tied_on_all_else() -> None:
    results = [GameResult(1, 1, tuple("ABX"), (10, 20, 30)),  # A ahead of B: 120, 60
               GameResult(2, 1, tuple("BYZ"), (10, 20, 30)),  # B 1st: 120
               GameResult(2, 2, tuple("WAV"), (0, 10, 20))]  # A 2nd: 60
    rows = by_player(standings(results, "ABXYZWV", 0))
    assert rows["A"].points == rows["B"].points == 180
    assert rows["A"].firsts == rows["B"].firsts == 1
    assert rows["A"].relative_points == rows["B"].relative_points == -10
    assert (rows["A"].head_to_head, rows["B"].head_to_head) == (1, -1)
    assert rows["A"].place + 1 == rows["B"].place
    assert rows["A"].decided_by is TieBreak.HEAD_TO_HEAD
    assert rows["B"].decided_by is TieBreak.HEAD_TO_HEAD
    assert rows["X"].head_to_head == 0


def test_a_seeded_draw_decides_what_nothing_else_does() -> None:
    results = [GameResult(1, 1, tuple("ABC"), (0, 0, 9))]
    for seed in range(20):
        rows = standings(results, "ABC", seed)
        top = [s.player for s in rows[:2]]
        assert top == draw_order("AB", seed)
        assert [s.decided_by for s in rows] == [TieBreak.DRAW, TieBreak.DRAW, TieBreak.POINTS]
    assert {tuple(s.player for s in standings(results, "ABC", seed)) for seed in range(20)} == {
        ("A", "B", "C"), ("B", "A", "C")}


def test_worked_example_of_the_rules() -> None:
    players = "ABCDEFGH"
    round_1 = [GameResult(1, 1, tuple("ABCD"), (20, 35, 35, 40)),
               GameResult(1, 2, tuple("EFGH"), (10, 26, 50, 44), leavers=("H",))]
    assert [championship_points(r) for r in round_1] == [
        {"A": 120, "B": 60, "C": 60, "D": 0}, {"E": 120, "F": 80, "G": 40, "H": 0}]
    after_1 = standings(round_1, players, "example")
    assert [(s.player, s.points, s.firsts, s.relative_points, s.decided_by.name)
            for s in after_1] == [
        ("E", 120, Fraction(1), Fraction(-45, 2), "RELATIVE_POINTS"),
        ("A", 120, Fraction(1), Fraction(-25, 2), "RELATIVE_POINTS"),
        ("F", 80, Fraction(0), Fraction(-13, 2), "POINTS"),
        ("C", 60, Fraction(0), Fraction(5, 2), "DRAW"),
        ("B", 60, Fraction(0), Fraction(5, 2), "DRAW"),
        ("G", 40, Fraction(0), Fraction(35, 2), "POINTS"),
        ("D", 0, Fraction(0), Fraction(15, 2), "RELATIVE_POINTS"),
        ("H", 0, Fraction(0), Fraction(23, 2), "RELATIVE_POINTS")]
    met = met_pairs(round_1)
    tables = seat_round(players, after_1, met, "example", 2)
    assert [set(t) for t in tables] == [set("EAFC"), set("BGDH")]
    assert repeats(tables, met) == 4
    round_2 = [GameResult(2, 1, tuple("ECAF"), (30, 15, 15, 60)),
               GameResult(2, 2, tuple("DHGB"), (20, 30, 20, 5))]
    assert [championship_points(r) for r in round_2] == [
        {"E": 40, "C": 100, "A": 100, "F": 0}, {"D": 60, "H": 0, "G": 60, "B": 120}]
    final = standings(round_1 + round_2, players, "example")
    assert [(s.place, s.player, s.points, s.firsts, s.relative_points, s.decided_by.name)
            for s in final] == [
        (1, "A", 220, Fraction(3, 2), Fraction(-55, 2), "POINTS"),
        (2, "B", 180, 1, Fraction(-45, 4), "POINTS"),
        (3, "E", 160, 1, Fraction(-45, 2), "FIRSTS"),
        (4, "C", 160, Fraction(1, 2), Fraction(-25, 2), "FIRSTS"),
        (5, "G", 100, 0, Fraction(75, 4), "POINTS"),
        (6, "F", 80, 0, Fraction(47, 2), "POINTS"),
        (7, "D", 60, 0, Fraction(35, 4), "POINTS"),
        (8, "H", 0, 0, Fraction(91, 4), "POINTS")]


def test_worked_example_seats_of_round_2_are_drawn_as_written() -> None:
    round_1 = [GameResult(1, 1, tuple("ABCD"), (20, 35, 35, 40)),
               GameResult(1, 2, tuple("EFGH"), (10, 26, 50, 44), leavers=("H",))]
    tables = seat_round("ABCDEFGH", standings(round_1, "ABCDEFGH", "example"),
                        met_pairs(round_1), "example", 2)
    assert tables == [list("EAFC"), list("BDHG")]


@given(st.integers(3, 30), st.integers(0, 2**32))
@SMALL
def test_standings_follow_from_the_results_alone_in_any_order(n: int, seed: int) -> None:
    players = [f"p{i}" for i in range(n)]
    tally = Tally(players, seed)
    rng = random.Random(seed)
    for round_no in range(1, 4):
        tables = seat_round(players, tally.standings() if round_no > 1 else [],
                            tally.met_pairs(), seed, round_no)
        play_round(tally, tables, round_no, rng)
    shuffled = list(tally.results)
    rng.shuffle(shuffled)
    rows = tally.standings()
    assert standings(shuffled, reversed(players), seed) == rows
    assert [s.place for s in rows] == list(range(1, n + 1))
    assert sum(s.points for s in rows) == sum(
        sum(championship_points(r).values()) for r in tally.results)


def test_a_table_is_counted_once_and_only_for_registered_players() -> None:
    tally = Tally("ABCD", 0)
    tally.add(GameResult(1, 1, tuple("ABCD"), (1, 2, 3, 4)))
    with pytest.raises(ChampionshipError, match="already counted"):
        tally.add(GameResult(1, 1, tuple("ABCD"), (1, 2, 3, 4)))
    with pytest.raises(ChampionshipError, match="not registered: Z"):
        tally.add(GameResult(2, 1, tuple("ABCZ"), (1, 2, 3, 4)))


# ---------------------------------------------------------------- duplicate scoring

MATCHPOINTS = ChampionshipRules(rounds=2, duplicate_deals=True, scoring=Scoring.MATCHPOINTS)


def test_matchpoints_need_duplicate_deals_and_scoring_is_places_or_matchpoints() -> None:
    assert ChampionshipRules().scoring is Scoring.PLACES
    rules = ChampionshipRules(duplicate_deals=True, scoring="matchpoints")  # type: ignore[arg-type]
    assert rules.scoring is Scoring.MATCHPOINTS
    with pytest.raises(ChampionshipError, match="matchpoints scoring needs duplicate deals"):
        ChampionshipRules(scoring=Scoring.MATCHPOINTS)
    with pytest.raises(ChampionshipError, match="scoring must be one of places, matchpoints"):
        ChampionshipRules(scoring="imps")  # type: ignore[arg-type]


def scores_by_player(results: list[GameResult]) -> dict[str, tuple[Fraction, int, Fraction]]:
    return {b.player: (b.matchpoints, b.top, b.percentage) for b in board_scores(results)}


def test_a_seat_is_compared_with_the_same_seat_at_the_tables_of_its_size() -> None:
    # Round 1: tables of 5, 4, 4 (the 5 alone on its board: groups of one, 50%).
    results = [GameResult(1, 1, tuple("ABCDE"), (1, 2, 3, 4, 5)),
               GameResult(1, 2, tuple("FGHI"), (10, 20, 30, 40)),
               GameResult(1, 3, tuple("JKLM"), (40, 20, 10, 30))]
    scores = scores_by_player(results)
    assert {p: scores[p] for p in "ABCDE"} == dict.fromkeys("ABCDE", (0, 0, 50))
    assert scores["F"] == (1, 1, 100) and scores["J"] == (0, 1, 0)  # seat 0: 10 < 40
    assert scores["G"] == scores["K"] == (Fraction(1, 2), 1, 50)  # seat 1: 20 = 20
    assert scores["L"] == (1, 1, 100) and scores["I"] == (0, 1, 0)
    assert [(b.round_no, b.table, b.seat) for b in board_scores(results)] == [
        (1, t, s) for t, size in ((1, 5), (2, 4), (3, 4)) for s in range(size)]


def test_stayers_beat_leavers_who_tie_and_beat_no_shows_who_tie() -> None:
    # Seat 0 of four tables of one board: a stayer with many points, two leavers with
    # different points, a no-show; seat 1: two no-shows and two stayers tied.
    results = [GameResult(1, 1, ("S", "s1", "x1", "y1"), (90, 30, 1, 2)),
               GameResult(1, 2, ("L1", "s2", "x2", "y2"), (0, 30, 1, 2), leavers=("L1",)),
               GameResult(1, 3, ("L2", "n3", "x3", "y3"), (50, 30, 1, 2), leavers=("L2",),
                          no_shows=("n3",)),
               GameResult(1, 4, ("N", "n4", "x4", "y4"), (0, 0, 1, 2), no_shows=("N", "n4"))]
    scores = scores_by_player(results)
    assert scores["S"] == (3, 3, 100)
    assert scores["L1"] == scores["L2"] == (Fraction(3, 2), 3, 50)
    assert scores["N"] == (0, 3, 0)
    assert scores["s1"] == scores["s2"] == (Fraction(5, 2), 3, Fraction(250, 3))
    assert scores["n3"] == scores["n4"] == (Fraction(1, 2), 3, Fraction(50, 3))
    assert scores["x1"] == (Fraction(3, 2), 3, 50)


def test_percentages_are_exact_and_the_standings_sum_them() -> None:
    results = [GameResult(1, t, (f"a{t}", f"b{t}", f"c{t}"), (t % 3, 5, 9)) for t in (1, 2, 3, 4)]
    scores = scores_by_player(results)
    # Seat 0 totals 1, 2, 0, 1: a3 beats all, a1 and a4 tie (beat a2).
    assert scores["a3"] == (3, 3, 100) and scores["a2"] == (0, 3, 0)
    assert scores["a1"] == scores["a4"] == (Fraction(3, 2), 3, 50)
    players = [p for r in results for p in r.players]
    rows = by_player(standings(results, players, 0, ChampionshipRules(
        duplicate_deals=True, scoring=Scoring.MATCHPOINTS)))
    assert rows["a3"].percentage == 100 and rows["a3"].place == 1
    assert rows["a1"].boards == (BoardScore(1, 1, 0, "a1", Fraction(3, 2), 3, Fraction(50)),)


def test_with_places_scoring_duplicate_deals_show_matchpoints_that_decide_nothing() -> None:
    results = [GameResult(1, 1, tuple("ABCD"), (10, 20, 30, 40)),
               GameResult(1, 2, tuple("EFGH"), (40, 30, 20, 5))]
    plain = standings(results, "ABCDEFGH", 0)
    shown = standings(results, "ABCDEFGH", 0, ChampionshipRules(duplicate_deals=True))
    assert [s.player for s in plain] == [s.player for s in shown]
    assert all(s.boards == () and s.percentage == 0 for s in plain)
    assert {s.player: s.percentage for s in shown} == {
        "A": 100, "B": 100, "C": 0, "D": 0, "E": 0, "F": 0, "G": 100, "H": 100}


def test_worked_example_of_duplicate_scoring() -> None:
    players = "ABCDEFGH"
    tables_1 = seat_round(players, [], set(), "example", 1)
    assert tables_1 == [list("CGHE"), list("DFBA")]
    round_1 = [GameResult(1, 1, tuple("CGHE"), (30, 14, 44, 16)),
               GameResult(1, 2, tuple("DFBA"), (24, 14, 40, 26), leavers=("D",))]
    assert scores_by_player(round_1) == {
        "C": (1, 1, 100), "D": (0, 1, 0), "G": (Fraction(1, 2), 1, 50),
        "F": (Fraction(1, 2), 1, 50), "B": (1, 1, 100), "H": (0, 1, 0), "E": (1, 1, 100),
        "A": (0, 1, 0)}
    after_1 = standings(round_1, players, "example", MATCHPOINTS)
    assert [(s.player, s.percentage, s.firsts, s.relative_points, s.decided_by.name)
            for s in after_1] == [
        ("E", 100, 0, -10, "RELATIVE_POINTS"), ("C", 100, 0, 4, "RELATIVE_POINTS"),
        ("B", 100, 0, 14, "RELATIVE_POINTS"), ("G", 50, 1, -12, "DRAW"),
        ("F", 50, 1, -12, "DRAW"), ("D", 0, 0, -2, "RELATIVE_POINTS"),
        ("A", 0, 0, 0, "RELATIVE_POINTS"), ("H", 0, 0, 18, "RELATIVE_POINTS")]
    assert draw_order("GF", "example") == ["G", "F"]
    met = met_pairs(round_1)
    tables_2 = seat_round(players, after_1, met, "example", 2)
    assert tables_2 == [list("BEFC"), list("ADHG")]
    assert repeats(tables_2, met) == 4
    round_2 = [GameResult(2, 1, tuple("BEFC"), (26, 26, 8, 44)),
               GameResult(2, 2, tuple("ADHG"), (18, 32, 20, 34))]
    assert {p: pct for p, (_, _, pct) in scores_by_player(round_2).items()} == {
        "A": 100, "E": 100, "F": 100, "G": 100, "B": 0, "D": 0, "H": 0, "C": 0}
    final = standings(round_1 + round_2, players, "example", MATCHPOINTS)
    assert [(s.place, s.player, s.matchpoints, s.percentage, s.points, s.firsts,
             s.relative_points, s.decided_by.name) for s in final] == [
        (1, "E", 2, 200, 140, 0, -10, "POINTS"),
        (2, "F", Fraction(3, 2), 150, 240, 2, -30, "FIRSTS"),
        (3, "G", Fraction(3, 2), 150, 120, 1, -4, "FIRSTS"),
        (4, "A", 1, 100, 200, 1, -8, "FIRSTS"),
        (5, "B", 1, 100, 100, 0, 14, "RELATIVE_POINTS"),
        (6, "C", 1, 100, 40, 0, 22, "RELATIVE_POINTS"),
        (7, "D", 0, 0, 40, 0, 4, "RELATIVE_POINTS"),
        (8, "H", 0, 0, 80, 0, 12, "RELATIVE_POINTS")]
    assert [b.percentage for b in by_player(final)["E"].boards] == [100, 100]
    # The championship points of the same games, unused here, rank otherwise.
    assert [s.player for s in standings(round_1 + round_2, players, "example")] == list(
        "FAEGBHDC")


def test_a_late_entrant_has_no_board_for_the_rounds_before() -> None:
    tally = Tally("ABCDEFGH", 0, MATCHPOINTS)
    tally.add(GameResult(1, 1, tuple("ABCD"), (1, 2, 3, 4)))
    tally.add(GameResult(1, 2, tuple("EFGH"), (4, 3, 2, 1)))
    tally.register("I")
    tally.add(GameResult(2, 1, tuple("IABCD"), (1, 2, 3, 4, 5)))  # a board of one table
    tally.add(GameResult(2, 2, tuple("EFG"), (1, 2, 3)))  # H dropped
    rows = by_player(tally.standings())
    assert [b.round_no for b in rows["I"].boards] == [2] and rows["I"].percentage == 50
    assert [b.round_no for b in rows["H"].boards] == [1] and rows["H"].percentage == 100
    assert rows["A"].percentage == 150 and rows["E"].percentage == 50
    assert sorted(s.place for s in rows.values()) == list(range(1, 10))


# ---------------------------------------------------------------- Buchholz


def test_tie_break_values_are_appended_never_renumbered() -> None:
    assert [(t.name, t.value) for t in TieBreak][:6] == [
        ("POINTS", 0), ("FIRSTS", 1), ("RELATIVE_POINTS", 2), ("HEAD_TO_HEAD", 3), ("DRAW", 4),
        ("BUCHHOLZ", 5)]


def test_buchholz_comes_right_after_the_main_score_only_when_on() -> None:
    assert Tally("ABC", 0).criteria == (
        TieBreak.POINTS, TieBreak.FIRSTS, TieBreak.RELATIVE_POINTS, TieBreak.HEAD_TO_HEAD,
        TieBreak.DRAW)
    assert Tally("ABC", 0, ChampionshipRules(buchholz=True)).criteria == (
        TieBreak.POINTS, TieBreak.BUCHHOLZ, TieBreak.FIRSTS, TieBreak.RELATIVE_POINTS,
        TieBreak.HEAD_TO_HEAD, TieBreak.DRAW)
    with pytest.raises(ChampionshipError, match="buchholz must be true or false"):
        ChampionshipRules(buchholz=1)  # type: ignore[arg-type]


def test_buchholz_sums_the_opponents_points_once_per_game_shared() -> None:
    # A and B both win twice (240); A beat X twice, who then won elsewhere; B beat weaker.
    results = [GameResult(1, 1, tuple("AXY"), (0, 5, 9)),
               GameResult(1, 2, tuple("BPQ"), (0, 5, 9)),
               GameResult(2, 1, tuple("AXZ"), (0, 5, 9)),
               GameResult(2, 2, tuple("BPR"), (0, 9, 5)),
               GameResult(3, 1, tuple("XST"), (0, 5, 9))]
    players = "ABXYZPQRST"
    plain = by_player(standings(results, players, 0))
    rows = by_player(standings(results, players, 0, ChampionshipRules(buchholz=True)))
    points = {p: s.points for p, s in rows.items()}
    assert points["A"] == points["B"] == 240 and points["X"] == 240
    # A met X twice (240 each time), Y and Z; B met P twice, Q and R.
    assert rows["A"].buchholz == 2 * points["X"] + points["Y"] + points["Z"] == 480
    assert rows["B"].buchholz == 2 * points["P"] + points["Q"] + points["R"] == 180
    assert rows["X"].buchholz == 2 * 240 + 0 + 0 + 60 + 0 == 540
    assert all(s.buchholz == 0 for s in plain.values())
    # A, B and X have 240 each: Buchholz ranks X, A, B before firsts are looked at.
    assert [(s.player, s.decided_by) for s in standings(
        results, players, 0, ChampionshipRules(buchholz=True))[:3]] == [
        ("X", TieBreak.BUCHHOLZ), ("A", TieBreak.BUCHHOLZ), ("B", TieBreak.BUCHHOLZ)]
    # Without it, X's single first puts X behind A and B (2 firsts each, then the draw).
    assert plain["X"].place == 3 and plain["X"].decided_by is TieBreak.FIRSTS
    assert {plain["A"].decided_by, plain["B"].decided_by} == {TieBreak.DRAW}


def test_worked_example_of_duplicate_scoring_with_buchholz() -> None:
    rules = ChampionshipRules(rounds=2, duplicate_deals=True, scoring=Scoring.MATCHPOINTS,
                              buchholz=True)
    players = "ABCDEFGH"
    round_1 = [GameResult(1, 1, tuple("CGHE"), (30, 14, 44, 16)),
               GameResult(1, 2, tuple("DFBA"), (24, 14, 40, 26), leavers=("D",))]
    after_1 = standings(round_1, players, "example", rules)
    assert [(s.player, s.buchholz) for s in after_1] == [
        ("E", 150), ("C", 150), ("B", 50), ("G", 200), ("F", 100), ("H", 250), ("D", 150),
        ("A", 150)]
    assert seat_round(players, after_1, met_pairs(round_1), "example", 2) == [
        list("BEFC"), list("ADHG")]
    round_2 = [GameResult(2, 1, tuple("BEFC"), (26, 26, 8, 44)),
               GameResult(2, 2, tuple("ADHG"), (18, 32, 20, 34))]
    final = standings(round_1 + round_2, players, "example", rules)
    assert [(s.place, s.player, s.percentage, s.buchholz, s.firsts, s.relative_points,
             s.decided_by.name) for s in final] == [
        (1, "E", 200, 600, 0, -10, "POINTS"),
        (2, "F", 150, 600, 2, -30, "BUCHHOLZ"),
        (3, "G", 150, 400, 1, -4, "BUCHHOLZ"),
        (4, "C", 100, 800, 0, 22, "BUCHHOLZ"),
        (5, "B", 100, 700, 0, 14, "BUCHHOLZ"),
        (6, "A", 100, 400, 1, -8, "BUCHHOLZ"),
        (7, "H", 0, 700, 0, 12, "BUCHHOLZ"),
        (8, "D", 0, 600, 0, 4, "BUCHHOLZ")]


# ---------------------------------------------------------------- the final


@pytest.mark.parametrize("size", [0, 3, 4, 5])
def test_a_final_table_seats_0_or_3_to_5(size: int) -> None:
    assert ChampionshipRules(final_table=size).final_table == size


@pytest.mark.parametrize("size", [1, 2, 6, True, 4.0, -3])
def test_a_final_table_of_another_size_is_refused(size: object) -> None:
    with pytest.raises(ChampionshipError, match="final_table must be 0"):
        ChampionshipRules(final_table=size)  # type: ignore[arg-type]


def test_final_tie_break_is_appended() -> None:
    assert (TieBreak.BUCHHOLZ.value, TieBreak.FINAL.value) == (5, 6)
    assert list(TieBreak)[-2:] == [TieBreak.BUCHHOLZ, TieBreak.FINAL]


def test_the_top_of_the_standings_play_the_final_seated_by_the_draw() -> None:
    order = [f"p{i}" for i in range(9)]
    for size in (3, 4, 5):
        seats = seat_final(ChampionshipRules(final_table=size), ranked(order), "s")
        assert seats == drawn(order[:size], "s", "final")
    with pytest.raises(ChampionshipError, match="no final table"):
        seat_final(ChampionshipRules(), ranked(order), "s")
    with pytest.raises(ChampionshipError, match="needs 5 players, the standings have 4"):
        seat_final(ChampionshipRules(final_table=5), ranked(order[:4]), "s")


def test_the_final_orders_the_finalists_leavers_and_no_shows_behind() -> None:
    order = [f"p{i}" for i in range(8)]
    before = ranked(order)
    final = GameResult(3, 1, ("p3", "p0", "p4", "p1", "p2"), (5, 40, 0, 0, 10),
                       leavers=("p4",), no_shows=("p1",))
    after = final_standings(before, final)
    # Stayers p3 (5), p2 (10), p0 (40); then p4 who left; p1 who never came.
    assert [(s.place, s.player, s.final, s.decided_by) for s in after[:5]] == [
        (1, "p3", 1, TieBreak.FINAL), (2, "p2", 2, TieBreak.FINAL), (3, "p0", 3, TieBreak.FINAL),
        (4, "p4", 4, TieBreak.FINAL), (5, "p1", 5, TieBreak.FINAL)]
    assert after[5:] == before[5:]
    finalists = {s.player: s for s in after[:5]}
    for line in before[:5]:  # nothing but the place, the final and what decided it changes
        assert finalists[line.player].points == line.points
        assert finalists[line.player].games == line.games


def test_a_place_shared_in_the_final_keeps_the_order_before_it() -> None:
    before = ranked(list("ABCDE"))
    after = final_standings(before, GameResult(2, 1, tuple("DCBA"), (20, 10, 20, 20)))
    assert [(s.player, s.final) for s in after] == [
        ("C", 1), ("A", 2), ("B", 2), ("D", 2), ("E", 0)]
    assert [s.place for s in after] == [1, 2, 3, 4, 5]
    assert after[4].decided_by is TieBreak.DRAW


def test_the_final_must_be_played_by_the_top_of_the_standings() -> None:
    before = ranked(list("ABCDE"))
    with pytest.raises(ChampionshipError, match="the top of the standings"):
        final_standings(before, GameResult(2, 1, tuple("ABE"), (1, 2, 3)))
    with pytest.raises(ChampionshipError, match="the top of the standings"):
        final_standings(before[:2], GameResult(2, 1, tuple("ABC"), (1, 2, 3)))


def test_worked_example_of_a_final_table() -> None:
    rules = ChampionshipRules(rounds=2, duplicate_deals=True, scoring=Scoring.MATCHPOINTS,
                              final_table=3)
    results = [GameResult(1, 1, tuple("CGHE"), (30, 14, 44, 16)),
               GameResult(1, 2, tuple("DFBA"), (24, 14, 40, 26), leavers=("D",)),
               GameResult(2, 1, tuple("BEFC"), (26, 26, 8, 44)),
               GameResult(2, 2, tuple("ADHG"), (18, 32, 20, 34))]
    before = standings(results, "ABCDEFGH", "example", rules)
    seats = seat_final(rules, before, "example")
    assert seats == list("GEF")
    final = GameResult(rules.rounds + 1, 1, tuple(seats), (10, 30, 30))
    after = final_standings(before, final)
    assert [(s.place, s.player, s.final, s.decided_by.name) for s in after] == [
        (1, "G", 1, "FINAL"), (2, "E", 2, "FINAL"), (3, "F", 2, "FINAL"),
        (4, "A", 0, "FIRSTS"), (5, "B", 0, "RELATIVE_POINTS"), (6, "C", 0, "RELATIVE_POINTS"),
        (7, "D", 0, "RELATIVE_POINTS"), (8, "H", 0, "RELATIVE_POINTS")]
    assert [s.percentage for s in after[:3]] == [150, 200, 150]  # the final adds nothing


# ---------------------------------------------------------------- disqualified, passed over


def test_a_disqualified_player_is_ranked_below_everyone_with_their_results_kept() -> None:
    results = [GameResult(1, 1, tuple("ABCD"), (0, 10, 20, 30)),
               GameResult(1, 2, tuple("EFGH"), (0, 10, 20, 30)),
               GameResult(2, 1, tuple("AEBF"), (0, 10, 20, 30)),
               GameResult(2, 2, tuple("CGDH"), (0, 10, 20, 30))]
    rules = ChampionshipRules(buchholz=True)
    tally = Tally("ABCDEFGH", 0, rules)
    for result in results:
        tally.add(result)
    before = by_player(tally.standings())
    tally.disqualify("A")
    tally.disqualify("E")
    after = tally.standings()
    assert [s.player for s in after[-2:]] == ["A", "E"]  # among them, by the criteria
    assert all(s.disqualified for s in after[-2:]) and not any(s.disqualified for s in after[:-2])
    assert [s.place for s in after] == list(range(1, 9))
    # The others keep their order, their points and their Buchholz (A's and E's points count).
    others = [s.player for s in standings(results, "ABCDEFGH", 0, rules) if s.player not in "AE"]
    assert [s.player for s in after[:-2]] == others
    for line in after:
        assert (line.points, line.buchholz, line.games) == (
            before[line.player].points, before[line.player].buchholz, before[line.player].games)
    # Each line's decided_by compares it with its neighbours of its own group only.
    assert [s.decided_by for s in after[:-2]] == decided_within(after[:-2])
    assert [s.decided_by for s in after[-2:]] == decided_within(after[-2:])
    with pytest.raises(ChampionshipError, match="not registered"):
        tally.disqualify("Z")


def decided_within(lines: list[Standing]) -> list[TieBreak]:
    """What decided each line of ``lines`` (ranked, with Buchholz) among those lines only."""
    criteria = [TieBreak.POINTS, TieBreak.BUCHHOLZ, TieBreak.FIRSTS, TieBreak.RELATIVE_POINTS,
                TieBreak.HEAD_TO_HEAD, TieBreak.DRAW]

    def key(s: Standing) -> tuple[object, ...]:
        return (-s.points, -s.buchholz, -s.firsts, s.relative_points, -s.head_to_head)

    out = []
    for i, line in enumerate(lines):
        gaps = []
        for j in (i - 1, i + 1):
            if 0 <= j < len(lines):
                mine, theirs = key(line), key(lines[j])
                gaps.append(next((k for k in range(5) if mine[k] != theirs[k]), 5))
        out.append(criteria[max(gaps)])
    return out


def test_the_final_passes_over_players_who_do_not_play_it() -> None:
    order = [f"p{i}" for i in range(8)]
    before = ranked(order)
    rules = ChampionshipRules(final_table=3)
    seats = seat_final(rules, before, "s", passed_over={"p1", "p4"})
    assert seats == drawn(["p0", "p2", "p3"], "s", "final")
    final = GameResult(3, 1, tuple(seats), tuple(10 * i for i in range(3)))
    after = final_standings(before, final, passed_over={"p1", "p4"})
    assert [s.player for s in after[:3]] == seats  # the final's places, 1 to 3
    assert all(s.decided_by is TieBreak.FINAL for s in after[:3])
    # Everyone else follows in their order before, renumbered.
    assert [(s.place, s.player) for s in after[3:]] == [
        (4, "p1"), (5, "p4"), (6, "p5"), (7, "p6"), (8, "p7")]
    with pytest.raises(ChampionshipError, match="the top of the standings"):
        final_standings(before, final)  # p1 played no final: it was passed over
    with pytest.raises(ChampionshipError, match="needs 3 players"):
        seat_final(rules, before[:4], "s", passed_over={"p0", "p1"})


# ---------------------------------------------------------------- a round's time limit


def test_a_game_ended_by_the_time_limit_is_scored_as_an_abandoned_one() -> None:
    from engine import GameEndReason, TimeUp, action_from_json, action_to_json, dumps
    from engine.record import replay_actions

    rules = Rules(players=4, max_hands=3)
    game = Game(rules, 7)
    while game.hand_number < 1 or game.phase.name != "PLAYING" or len(game.trick_cards) < 2:
        seat = game.to_act()[0]
        game.apply(game.auto_action(seat))
    totals = list(game.totals)  # the first hand's: the hand in progress does not count
    game.apply(Leave(2))
    events = game.apply(TimeUp())
    assert game.is_over and game.end_reason is GameEndReason.TIME_LIMIT
    assert str(GameEndReason.TIME_LIMIT) == "TIME_LIMIT" and events
    assert list(game.totals) == totals
    places = {r.seat: r.place for r in game.standings}
    assert places[2] == 4  # the leaver behind everyone who stayed
    assert action_from_json(action_to_json(TimeUp())) == TimeUp()
    again = replay_actions(rules, 7, game.actions)
    assert again.end_reason is GameEndReason.TIME_LIMIT and list(again.totals) == totals
    assert '"time_limit"' in dumps(game)
    with pytest.raises(Exception, match="over"):
        game.time_up()


# ---------------------------------------------------------------- random championships

RANDOM_CHAMPIONSHIPS = settings(max_examples=budget(60, 400), derandomize=True, deadline=None,
                                database=None)


def random_result(round_no: int, table: int, players: list[str],
                  rng: random.Random) -> GameResult:
    """A game with ties, leavers and no-shows now and then."""
    spread = rng.choice([3, 30, 100])
    totals = tuple(rng.randrange(spread) for _ in players)
    gone = rng.sample(players, rng.choice([0, 0, 0, 1, 2, len(players)]))
    split = rng.randrange(len(gone) + 1)
    return GameResult(round_no, table, tuple(players), totals, tuple(gone[:split]),
                      tuple(gone[split:]))


def status(result: GameResult, seat: int) -> tuple[int, int]:
    player = result.players[seat]
    if player in result.no_shows:
        return (2, 0)
    if player in result.leavers:
        return (1, 0)
    return (0, result.totals[seat])


def matchpoints_by_pairs(results: list[GameResult]) -> dict[tuple[int, str], Fraction]:
    """Each game's matchpoints, from docs/RULES.md's words: each pair of the group compared."""
    found = {}
    for result in results:
        for seat, player in enumerate(result.players):
            group = [r for r in results if r.round_no == result.round_no
                     and len(r.players) == len(result.players) and r is not result]
            mine = status(result, seat)
            won = Fraction(0)
            for other in group:
                theirs = status(other, seat)
                won += 1 if mine < theirs else Fraction(1, 2) if mine == theirs else 0
            found[result.round_no, player] = won
    return found


@given(st.integers(3, 26), st.integers(1, 5), st.booleans(), st.booleans(), st.booleans(),
       st.sampled_from([0, 3, 4, 5]), st.integers(0, 2**32))
@RANDOM_CHAMPIONSHIPS
def test_random_championships_rank_everyone_once_and_score_as_written(
        n: int, rounds: int, duplicate: bool, matchpoints: bool, buchholz: bool,
        final_table: int, seed: int) -> None:
    rules = ChampionshipRules(
        rounds=rounds, duplicate_deals=duplicate,
        scoring=Scoring.MATCHPOINTS if duplicate and matchpoints else Scoring.PLACES,
        buchholz=buchholz, final_table=final_table)
    rng = random.Random(seed)
    registered = [f"p{i}" for i in range(n)]
    tally = Tally(registered, seed, rules)
    playing = list(registered)
    entrants = 0
    for round_no in range(1, rounds + 1):
        if round_no > 1:  # some drop out, some enter late (at least 3 play)
            dropped = rng.sample(playing, rng.randrange(max(0, min(3, len(playing) - 3)) + 1))
            playing = [p for p in playing if p not in dropped]
            for _ in range(rng.choice([0, 0, 1, 2])):
                entrants += 1
                late = f"late{entrants}"
                tally.register(late)
                registered.append(late)
                playing.append(late)
        before = tally.standings() if tally.results else []
        tables = seat_round(playing, before, tally.met_pairs(), seed, round_no)
        assert sorted(p for t in tables for p in t) == sorted(playing)
        assert [len(t) for t in tables] == table_sizes(len(playing))
        for k, table in enumerate(tables, start=1):
            tally.add(random_result(round_no, k, table, rng))
    rows = tally.standings()
    results = tally.results

    # Every player once, places 1..N, the same from the results alone in any order.
    assert sorted(s.player for s in rows) == sorted(registered)
    assert [s.place for s in rows] == list(range(1, len(registered) + 1))
    shuffled = list(results)
    rng.shuffle(shuffled)
    assert standings(shuffled, reversed(registered), seed, rules) == rows
    lines = by_player(rows)
    for player in registered:
        assert lines[player].games == sum(player in r.players for r in results)
        assert lines[player].decided_by in tally.criteria

    # The main score never rises down the standings; Buchholz is next when on.
    main = [s.percentage if rules.scoring is Scoring.MATCHPOINTS else s.points for s in rows]
    assert main == sorted(main, reverse=True)
    score = dict(zip([s.player for s in rows], main, strict=True))
    for above, below in itertools.pairwise(rows):
        if buchholz and score[above.player] == score[below.player]:
            assert above.buchholz >= below.buchholz

    # Buchholz: the opponents' main scores, once per game shared.
    for player in registered:
        expected = sum((score[o] for r in results if player in r.players
                        for o in r.players if o != player), Fraction(0))
        assert lines[player].buchholz == (expected if buchholz else 0)

    # Matchpoints: as written pair by pair; each group shares g(g-1)/2, its percentages 50 g.
    if duplicate:
        pairs = matchpoints_by_pairs(results)
        shown = {(b.round_no, b.player): b for s in rows for b in s.boards}
        assert {key: b.matchpoints for key, b in shown.items()} == pairs
        groups: dict[tuple[int, int, int], list[BoardScore]] = {}
        for board in shown.values():
            size = len(next(r for r in results if (r.round_no, r.table) == (
                board.round_no, board.table)).players)
            groups.setdefault((board.round_no, size, board.seat), []).append(board)
        for group in groups.values():
            g = len(group)
            assert sum(b.matchpoints for b in group) == Fraction(g * (g - 1), 2)
            assert sum(b.percentage for b in group) == 50 * g
            assert all(b.top == g - 1 for b in group)
        for s in rows:
            assert s.matchpoints == sum(b.matchpoints for b in s.boards)
            assert s.percentage == sum(b.percentage for b in s.boards)
    else:
        assert all(s.boards == () and s.percentage == 0 for s in rows)

    # The final: its places 1..N are exactly the finalists, everyone else unchanged.
    if final_table and len(rows) >= final_table:
        seats = seat_final(rules, rows, seed)
        assert sorted(seats) == sorted(s.player for s in rows[:final_table])
        final = random_result(rounds + 1, 1, seats, rng)
        after = final_standings(rows, final)
        assert [s.place for s in after] == list(range(1, len(rows) + 1))
        assert {s.player for s in after[:final_table]} == set(seats)
        assert all(s.decided_by is TieBreak.FINAL for s in after[:final_table])
        places = dict(zip(final.players, final.places, strict=True))
        assert [places[s.player] for s in after[:final_table]] == sorted(places.values())
        assert [s.final for s in after[:final_table]] == sorted(places.values())
        before_final = {s.player: s.place for s in rows}
        for upper, lower in itertools.pairwise(after[:final_table]):
            if upper.final == lower.final:  # a place shared in the final: the order before it
                assert before_final[upper.player] < before_final[lower.player]
        assert after[final_table:] == rows[final_table:]


def test_only_even_rounds_but_4_and_14_have_two_tables_of_each_size() -> None:
    """docs/RULES.md: a table alone of its size scores 50 at every seat."""
    for n in range(3, 200):
        sizes = table_sizes(n)
        every_size_twice = all(sizes.count(size) >= 2 for size in sizes)
        assert every_size_twice == (n % 2 == 0 and n not in (4, 14))
    alone = [GameResult(1, 1, tuple("ABCD"), (1, 2, 3, 4)),
             GameResult(1, 2, tuple("EFGHI"), (1, 2, 3, 4, 5))]  # 9 players: 5 + 4
    assert {b.percentage for b in board_scores(alone)} == {50}
