"""One screen (issue 40): at 1280x720, 1366x768, on 390x844 and 360x740 phones and on a phone
held sideways (844x390), a whole game against bots in which, on every turn, the table (the
felt), the trick and the hand are inside the viewport with nothing scrolled, and the hand
stays where it is (its top): between turns, when play starts after the pass, and from one
hand to the next."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers.browser import browser
from tests.helpers.page import NEXT_TURN, against_bots, open_page, take_turn, turn_of
from tests.helpers.servers import free_port, serving

TIMING = {"trick_pause": 0.05, "hand_pause": 0.2, "play_timeout": 120.0,
          "pass_timeout": 120.0, "moon_timeout": 120.0}
SIZES = {
    "1280x720": {"viewport": {"width": 1280, "height": 720}},
    "1366x768": {"viewport": {"width": 1366, "height": 768}},
    "390x844": {"viewport": {"width": 390, "height": 844}, "device_scale_factor": 2,
                "is_mobile": True, "has_touch": True},
    "360x740": {"viewport": {"width": 360, "height": 740}, "device_scale_factor": 2,
                "is_mobile": True, "has_touch": True},
    "844x390": {"viewport": {"width": 844, "height": 390}, "device_scale_factor": 2,
                "is_mobile": True, "has_touch": True},  # a phone held sideways
}
# Where the parts are, in the viewport's coordinates (the page never scrolled).
PARTS = """() => {
  const game = document.getElementById("game");
  const box = (e) => { const r = e.getBoundingClientRect();
                       return [r.left, r.top, r.right, r.bottom].map(Math.round); };
  return {
    width: innerWidth, height: innerHeight, scroll: [scrollX, scrollY],
    hand: box(document.getElementById("hand")), felt: box(document.getElementById("felt")),
    trick: box(document.getElementById("trick")),
    center: box(document.getElementById("center")),
    cards: Array.from(document.querySelectorAll("#hand button, #trick [data-card]"), box),
    at: game.dataset.hand + ":" + game.dataset.trick, phase: game.dataset.phase,
  };
}"""


def inside(box: list[int], width: int, height: int) -> bool:
    left, top, right, bottom = box
    return left >= 0 and top >= 0 and right <= width and bottom <= height


@pytest.mark.parametrize("size", list(SIZES))
async def test_table_trick_and_hand_on_one_screen_through_a_whole_game(size: str) -> None:
    device = SIZES[size]
    width, height = device["viewport"]["width"], device["viewport"]["height"]
    port = free_port()
    async with (serving(web_port=port, web_host="127.0.0.1", rule_defaults=TIMING,
                        bot_pace=0.02) as _, browser() as launched):
        page = await open_page(launched, f"http://127.0.0.1:{port}/", device,
                               locale="en-GB")
        await page.wait_for_selector("#me[data-account^=a_]")
        await against_bots(page, "Ana", "online", tap=bool(device.get("has_touch")))
        await page.wait_for_function(NEXT_TURN, arg=-1)
        seen: list[dict[str, Any]] = []
        while (state := await turn_of(page))["phase"] != "GAME_OVER":
            if state["mustAct"]:
                parts = await page.evaluate(PARTS)
                seen.append(parts)
                assert parts["scroll"] == [0, 0], parts
                assert (parts["width"], parts["height"]) == (width, height), parts
                for name in ("felt", "hand", "center"):
                    assert inside(parts[name], width, height), (name, parts)
                for card in parts["cards"]:
                    assert inside(card, width, height), (card, parts)
                await take_turn(page, state, tap=bool(device.get("has_touch")))
            await page.wait_for_function(NEXT_TURN, arg=state["sequence"])
        hands = {p["at"].split(":")[0] for p in seen}
        assert len(hands) == 4 and {p["phase"] for p in seen} == {"PASSING", "PLAYING"}
        assert len(seen) >= 4 * 13 - 4, len(seen)  # every turn of ours, the hold hand's too
        # The trick (in play) is inside the screen too; the hand never moved: its top is where
        # it was on the first turn (on a phone it loses its second row as the cards go).
        assert all(inside(p["trick"], width, height) for p in seen if p["phase"] == "PLAYING")
        assert {p["hand"][1] for p in seen} == {seen[0]["hand"][1]}, [
            (p["at"], p["phase"], p["hand"]) for p in seen]
        assert page.errors == []


async def test_a_phone_lobby_lists_the_tables_before_the_account() -> None:
    """On a 390 px phone the lobby's tables come right after the new game's form, above the
    account panel and the championships; on a laptop the order is the page's own."""
    port = free_port()
    async with serving(web_port=port, web_host="127.0.0.1") as _, browser() as launched:
        tops = ("() => ['create-form', 'tables-panel', 'me', 'championships'].map("
                "(id) => document.getElementById(id).getBoundingClientRect().top)")
        phone = await open_page(launched, f"http://127.0.0.1:{port}/", SIZES["390x844"])
        await phone.wait_for_selector("#me[data-account^=a_]")
        form, tables, me, championships = await phone.evaluate(tops)
        assert form < tables < me < championships
        laptop = await open_page(launched, f"http://127.0.0.1:{port}/", SIZES["1280x720"])
        await laptop.wait_for_selector("#me[data-account^=a_]")
        form, tables, me, championships = await laptop.evaluate(tops)
        assert form < me < championships < tables
