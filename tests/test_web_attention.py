"""Your turn while the page is in another tab (issue 40): the title and the tab's icon say so,
and come back when the tab is looked at; the Alerts button asks for notifications on its
click (a notification is made only with permission and Alerts on)."""

from __future__ import annotations

from tests.helpers.browser import browser
from tests.helpers.page import NEXT_TURN, against_bots, open_page, take_turn, turn_of
from tests.helpers.servers import free_port, serving

TIMING = {"trick_pause": 0.05, "hand_pause": 0.2, "play_timeout": 120.0,
          "pass_timeout": 120.0, "moon_timeout": 120.0}
# The test decides whether the page is hidden (a headless page is always shown).
HIDDEN = """Object.defineProperty(document, "hidden", {
  configurable: true, get: () => !!window.__hidden });"""
TAB = """() => ({ title: document.title,
  icon: document.getElementById("favicon").getAttribute("href"),
  times: Number(document.documentElement.dataset.attention || 0),
  notices: window.__notices || 0 })"""
# Counts the notifications the page makes (the browser's own stays out of the test).
NOTICES = """window.__notices = 0;
window.Notification = class { static permission = "granted";
  static requestPermission() { return Promise.resolve("granted"); }
  constructor() { window.__notices += 1; } close() {} };"""


async def test_the_title_and_icon_say_your_turn_in_a_hidden_tab() -> None:
    port = free_port()
    async with (serving(web_port=port, web_host="127.0.0.1", rule_defaults=TIMING,
                        bot_pace=0.05) as _, browser() as launched):
        page = await open_page(launched, f"http://127.0.0.1:{port}/", locale="en-GB")
        await page.add_init_script(HIDDEN + NOTICES)
        await page.reload()
        await page.wait_for_selector("#me[data-account^=a_]")
        await against_bots(page, "Ana", "quick")
        await page.wait_for_function(NEXT_TURN, arg=-1)
        assert await page.evaluate(TAB) == {"title": "Copas: Hearts", "icon": "/icon.svg",
                                           "times": 0, "notices": 0}  # shown: nothing changes
        assert await page.get_attribute("#notify", "aria-pressed") == "false"
        await page.click("#notify")  # Alerts on: asked on this click
        await page.wait_for_selector("#notify[aria-pressed=true]")
        state = await turn_of(page)
        await page.evaluate("() => { window.__hidden = true; }")  # another tab in front
        await take_turn(page, state)
        await page.wait_for_function(NEXT_TURN, arg=state["sequence"])
        assert await page.evaluate(TAB) == {"title": "▶ Your turn · Copas: Hearts",
                                           "icon": "/icon-turn.svg", "times": 1, "notices": 1}
        await page.evaluate("""() => { window.__hidden = false;
                                       document.dispatchEvent(new Event("visibilitychange")); }""")
        assert await page.evaluate(TAB) == {"title": "Copas: Hearts", "icon": "/icon.svg",
                                           "times": 1, "notices": 1}
        assert page.errors == []
