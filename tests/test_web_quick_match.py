"""Quick match alone on the page (issue 40): the server writes its --quick-match-bots-after into
the page; a person alone at a quick match sees how long they have waited and when bots take
the free seats, counting down (axe-clean, on a phone, chosen by keyboard); then bots sit and
the game starts on its own. A server with the flag at 0 shows no estimate."""

from __future__ import annotations

import asyncio
import urllib.request

from tests.helpers.browser import axe_violations, browser
from tests.helpers.page import NEXT_TURN, PHONE, open_page
from tests.helpers.servers import free_port, serving

WAIT = 10.0  # long enough for the page to show the wait on a busy machine
TIMING = {"trick_pause": 0.05, "hand_pause": 0.2, "play_timeout": 120.0,
          "pass_timeout": 120.0, "moon_timeout": 120.0}
WAITING = """() => { const box = document.getElementById("quick-wait");
  return { hidden: box.hidden, text: box.textContent, waited: Number(box.dataset.waited),
           left: Number(box.dataset.left) }; }"""
SEATS = """() => Array.from(document.querySelectorAll("#seats .presence"),
  (p) => p.classList.contains("bot"))"""


def served_page(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=20) as answer:
        return str(answer.read().decode())


async def test_alone_at_a_quick_match_the_page_counts_down_to_the_bots() -> None:
    port = free_port()
    async with (serving(web_port=port, web_host="127.0.0.1", rule_defaults=TIMING,
                        quick_match_bots_after=WAIT) as _, browser() as launched):
        page_html = await asyncio.to_thread(served_page, port)
        assert '<meta name="copas-quick-match-bots-after" content="10">' in page_html
        page = await open_page(launched, f"http://127.0.0.1:{port}/", PHONE, locale="en-GB",
                               bypass_csp=True)
        await page.wait_for_selector("#me[data-account^=a_]")
        await page.focus("#quick-match")
        await page.keyboard.press("Enter")
        await page.wait_for_selector("#quick-wait:not([hidden])")
        first = await page.evaluate(WAITING)
        assert 0 < first["left"] <= WAIT and first["waited"] + first["left"] == WAIT, first
        assert first["text"] == (f"Waited {first['waited']} s. If nobody else comes, bots take "
                                 f"the free seats in {first['left']} seconds.")
        assert await page.text_content("#status") == "Waiting for 3 more players…"
        assert await axe_violations(page) == []
        # The count goes down second by second (awaited, not slept).
        await page.wait_for_function(
            "(n) => Number(document.getElementById('quick-wait').dataset.left) < n",
            arg=first["left"])
        # Then the bots sit and the game starts: the pass, with three bots at the table.
        await page.wait_for_function(NEXT_TURN, arg=-1, timeout=int(WAIT * 1000) + 30_000)
        assert await page.evaluate(SEATS) == [False, True, True, True]
        assert await page.is_hidden("#quick-wait")
        assert page.errors == []


async def test_no_estimate_when_quick_matches_wait_for_people_only() -> None:
    port = free_port()
    async with (serving(web_port=port, web_host="127.0.0.1") as _, browser() as launched):
        page = await open_page(launched, f"http://127.0.0.1:{port}/", locale="pt-PT")
        await page.wait_for_selector("#me[data-account^=a_]")
        await page.click("#quick-match")
        await page.wait_for_selector("#share:not([hidden])")
        assert await page.is_hidden("#quick-wait")
        assert await page.text_content("#status") == "À espera de mais 3 jogadores…"
        assert page.errors == []
