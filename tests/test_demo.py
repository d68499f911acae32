"""copas-demo (``make demo``): the default game between its automatic players in the terminal,
through the game's module. ``fixtures/demo/hearts-seed-1.txt`` is what the demo printed for seed
1 before it went behind the seam (it named the engine): the output is unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

from server import demo, games

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "demo"


def test_a_seeded_demo_prints_what_it_printed_before_the_seam(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert demo.main(["--seed", "1"]) == 0
    assert capsys.readouterr().out == (FIXTURES / "hearts-seed-1.txt").read_text()


def test_a_demo_plays_its_table_to_the_end_with_the_players_asked(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert demo.main(["--seed", "5", "--players", "3", "--preset", "classic"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("DEMO GAME between engine bots (preset classic, 3 players, seed 5)")
    standings = out.split("GAME OVER")[1].splitlines()[1:]
    assert sorted(line.split("seat ")[1].split()[0] for line in standings) == ["0", "1", "2"]


def test_an_unknown_preset_is_refused_with_the_presets_named(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        demo.main(["--preset", "nope", "--seed", "1"])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert "unknown preset 'nope'" in err and games.get().default_preset in err
