import pytest

from engine import PRESETS, MoonRule, Rules, RulesError


def test_defaults_are_the_online_table() -> None:
    r = Rules()
    assert (r.players, r.max_hands, r.point_limit, r.moon) == (4, 4, 100, MoonRule.OTHERS_PLUS_26)
    assert not r.points_on_first_trick and not r.queen_breaks_hearts
    assert (r.play_timeout, r.pass_timeout, r.moon_timeout) == (20, 30, 15)
    assert (r.trick_pause, r.hand_pause) == (2, 5)
    assert Rules.preset() == r


@pytest.mark.parametrize(("name", "max_hands", "limit", "moon"), [
    ("online", 4, 100, MoonRule.OTHERS_PLUS_26),
    ("classic", 0, 100, MoonRule.SHOOTER_CHOICE),
    ("quick", 1, 100, MoonRule.SHOOTER_CHOICE),
    ("20", 0, 20, MoonRule.SHOOTER_CHOICE),
    ("50", 0, 50, MoonRule.SHOOTER_CHOICE),
    ("100", 0, 100, MoonRule.SHOOTER_CHOICE),
])
def test_presets(name: str, max_hands: int, limit: int, moon: MoonRule) -> None:
    r = Rules.preset(name)
    assert (r.max_hands, r.point_limit, r.moon, r.players) == (max_hands, limit, moon, 4)
    assert Rules.preset(name, players=5).players == 5
    assert set(PRESETS) == {"online", "classic", "quick", "20", "50", "100"}


@pytest.mark.parametrize(("changes", "message"), [
    ({"players": 2}, "players must be 3, 4 or 5"),
    ({"players": 6}, "players must be 3, 4 or 5"),
    ({"players": 4.0}, "whole number"),
    ({"point_limit": 0}, "point_limit must be at least 1"),
    ({"max_hands": -1}, "max_hands"),
    ({"moon": "SOMETIMES"}, "moon must be one of"),
    ({"points_on_first_trick": "yes"}, "true or false"),
    ({"play_timeout": -1}, "play_timeout"),
    ({"hand_pause": float("nan")}, "hand_pause"),
    ({"colour": "red"}, "unknown rule option"),
])
def test_validation_errors_are_clear(changes: dict[str, object], message: str) -> None:
    with pytest.raises(RulesError, match=message):
        Rules().replace(**changes)


def test_unknown_preset() -> None:
    with pytest.raises(RulesError, match="unknown preset 'fast'"):
        Rules.preset("fast")


def test_moon_accepts_text_and_dict_round_trip() -> None:
    r = Rules(moon="DISABLED", players=3)  # type: ignore[arg-type]
    assert r.moon is MoonRule.DISABLED
    assert Rules.from_dict(r.to_dict()) == r


def test_rules_are_frozen() -> None:
    with pytest.raises(AttributeError):
        Rules().players = 5  # type: ignore[misc]
