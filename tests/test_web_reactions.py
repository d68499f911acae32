"""Quick reactions and passed cards that move, through the page (issue 30), in a real
headless Chromium. Reactions: two people (two browser contexts) at one table for friends;
one presses a reaction and the other sees it by the first one's seat, for a moment; the row
of buttons stays accessible (axe-core), by keyboard and touch. The pass: with motion, the
three cards passed leave for the receiving seat and the three received arrive in the hand;
with reduced motion nothing moves. At every step the page is checked for a card out of place
(the page test's own checks, imported from it as tests/test_web_rematch.py does)."""

from __future__ import annotations

from typing import Any

from tests.helpers.browser import axe_violations, browser
from tests.helpers.servers import free_port, serving
from tests.test_web_page import (
    PHONE,
    TIMING,
    Seen,
    check_page,
    create_through_the_lobby,
    open_page,
    state_of,
    take_turn,
)

# Notes, on every change of the page, the cards in flight of the pass: the copies of the
# passed ones leaving (data-pass-leaving) and the received ones arriving (data-pass-arriving).
NOTE_PASS_MOVES = """() => {
  window.__pass = { leaving: [], arriving: [] };
  const note = () => {
    for (const a of document.getAnimations()) {
      const t = a.effect && a.effect.target;
      if (!t || !t.dataset) continue;
      if (t.dataset.passLeaving && !window.__pass.leaving.includes(t.dataset.passLeaving))
        window.__pass.leaving.push(t.dataset.passLeaving);
      if (t.dataset.passArriving && !window.__pass.arriving.includes(t.dataset.card))
        window.__pass.arriving.push(t.dataset.card);
    }
  };
  new MutationObserver(note).observe(document.getElementById("game"),
                                     { childList: true, subtree: true });
}"""


async def two_people(launched: Any, url: str, device: dict[str, Any] | None = None
                     ) -> tuple[Any, Any]:
    """Ana opens a table for one friend; Bea joins it with the shared link: both seated."""
    ana = await open_page(launched, url, device, bypass_csp=True)  # for axe
    await create_through_the_lobby(ana, "Ana", "quick", friends=1)
    await ana.wait_for_selector("#share:not([hidden])")
    link = await ana.input_value("#share-link")
    bea = await open_page(launched, link, device, bypass_csp=True)
    await bea.wait_for_selector("#invite:not([hidden]) #invite-join:not([disabled])")
    await bea.fill("#name", "Bea")
    await bea.click("#invite-join")
    for page in (ana, bea):
        await page.wait_for_selector("#game[data-phase=PASSING][data-seated=true]")
        await page.wait_for_selector("#reactions:not([hidden]) button")
    return ana, bea


async def your_seat(page: Any) -> str:
    return str(await page.get_attribute("#seats li[data-you=true]", "data-seat"))


async def test_a_reaction_shows_by_its_seat_on_the_other_persons_page() -> None:
    port = free_port()
    async with (serving(web_port=port, web_host="127.0.0.1", rule_defaults=TIMING)
                as _, browser() as launched):
        ana, bea = await two_people(launched, f"http://127.0.0.1:{port}/")
        seat = await your_seat(ana)
        assert seat != await your_seat(bea)
        names = await ana.eval_on_selector_all(
            "#reactions button", "bs => bs.map(b => b.getAttribute('aria-label'))")
        assert names == ["React: Good game", "React: Nice", "React: Oops", "React: Thanks",
                         "React: Wow"]
        await ana.click('#reactions button[data-reaction="NICE"]')
        bubble = f'#seats li[data-seat="{seat}"] .reaction[data-reaction="NICE"]'
        for page in (bea, ana):  # both pages show it by Ana's seat, and by no other
            await page.wait_for_selector(bubble)
            assert await page.eval_on_selector_all(
                "#seats .reaction", "rs => rs.map(r => r.closest('li').dataset.seat)") == [seat]
            assert "Nice" in (await page.text_content(bubble) or "")
        # By keyboard: Bea focuses "Thanks" and presses Enter; Ana sees it by Bea's seat.
        await bea.wait_for_selector('#reactions button[data-reaction="THANKS"]:visible:enabled')
        await bea.focus('#reactions button[data-reaction="THANKS"]')
        await bea.keyboard.press("Enter")
        await ana.wait_for_selector(
            f'#seats li[data-seat="{await your_seat(bea)}"] .reaction[data-reaction="THANKS"]')
        # A reaction shows for a moment only.
        await bea.wait_for_selector(bubble, state="detached", timeout=10_000)
        for page in (ana, bea):
            check_page(await state_of(page))
            assert page.errors == []
        await bea.click('#reactions button[data-reaction="OOPS"]')
        await bea.wait_for_selector('#seats .reaction[data-reaction="OOPS"]')
        assert await axe_violations(bea) == []  # last: axe's own script names "cards"


async def test_the_reaction_buttons_are_a_fingers_target_on_a_phone() -> None:
    port = free_port()
    async with (serving(web_port=port, web_host="127.0.0.1", rule_defaults=TIMING)
                as _, browser() as launched):
        ana, bea = await two_people(launched, f"http://127.0.0.1:{port}/", PHONE)
        sizes = await ana.evaluate(  # found and measured at once (no render between them)
            """() => Array.from(document.querySelectorAll("#reactions button"),
                               (b) => [b.offsetWidth, b.offsetHeight])""")
        assert sizes, "no reaction button"
        assert all(w >= 44 and h >= 44 for w, h in sizes), sizes
        await ana.tap('#reactions button[data-reaction="WOW"]')
        await bea.wait_for_selector(
            f'#seats li[data-seat="{await your_seat(ana)}"] .reaction[data-reaction="WOW"]')
        for page in (ana, bea):
            check_page(await state_of(page))
            assert page.errors == []
        assert await axe_violations(bea) == []  # last: axe's own script names "cards"


async def test_passed_cards_leave_and_arrive_unless_motion_is_reduced() -> None:
    """One person against three bots, on a page that allows motion and on one that asks for
    less: at the exchange the three cards passed fly to the receiving seat and the three
    received glide into the hand; on the still page nothing of the pass moves."""
    port = free_port()
    async with (serving(web_port=port, web_host="127.0.0.1", rule_defaults=TIMING)
                as _, browser() as launched):
        url = f"http://127.0.0.1:{port}/"
        for motion, name in (("no-preference", "Ana"), ("reduce", "Bia")):  # two accounts
            page = await open_page(launched, url, reduced_motion=motion)
            await create_through_the_lobby(page, name, "quick")
            await page.wait_for_selector("#game[data-phase=PASSING][data-must-act=true]")
            await page.evaluate(NOTE_PASS_MOVES)
            await take_turn(page, await state_of(page))
            await page.wait_for_selector("#hand button[data-received=true]")
            await page.wait_for_function(
                "() => !document.querySelector('[data-pass-leaving], [data-pass-arriving]')")
            moved = await page.evaluate("() => window.__pass")
            state = await state_of(page)
            view = Seen.of(state["wire"]).view
            if motion == "reduce":
                assert moved == {"leaving": [], "arriving": []}
            else:
                assert sorted(moved["leaving"]) == sorted(c.text for c in view.pass_choice)
                assert sorted(moved["arriving"]) == sorted(c.text for c in view.received)
                assert len(moved["leaving"]) == len(moved["arriving"]) == 3
            check_page(state)
            assert page.errors == []
