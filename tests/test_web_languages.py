"""The page in its players' language (issue 40): Portuguese when the browser asks for pt-PT,
Brazil's Portuguese for pt-BR, English for en, switched on the page and remembered; the face
cards' corners V, D, R, A in Portuguese and J, Q, K, A in English; a whole one-hand game
against bots in Portuguese, in which every card the page names is one it draws (no other
player's card in its words); axe-core finds nothing in any language (the lobby, a pass, a
trick, the game over)."""

from __future__ import annotations

import html
import re
from typing import Any

from tests.helpers.browser import AXE, axe_violations, browser
from tests.helpers.page import NEXT_TURN, against_bots, open_page, take_turn, turn_of
from tests.helpers.servers import free_port, serving

TIMING = {"trick_pause": 0.05, "hand_pause": 0.5, "play_timeout": 120.0,
          "pass_timeout": 120.0, "moon_timeout": 120.0}


async def words_of(page: Any) -> dict[str, str]:
    return await page.evaluate("""() => ({
      lang: document.documentElement.lang,
      title: document.title,
      play: document.getElementById("play-title").textContent,
      bots: document.getElementById("create").textContent,
      choice: document.getElementById("lang").value,
    })""")


# Cards named in Portuguese ("dama de espadas", "10 de copas"), as the page says them.
PT_RANKS = {"dois": "2", "três": "3", "quatro": "4", "cinco": "5", "seis": "6", "sete": "7",
            "oito": "8", "nove": "9", "dez": "10", "valete": "J", "dama": "Q", "rei": "K",
            "ás": "A"}
PT_SUITS = {"paus": "C", "ouros": "D", "espadas": "S", "copas": "H"}
PT_CARD = re.compile(r"\b(" + "|".join(PT_RANKS) + r") de (" + "|".join(PT_SUITS) + r")\b",
                     re.IGNORECASE)
STATIC_PHRASES = ("fuja das copas e da dama de espadas",
                  "Levou todas as copas e a dama de espadas")
DRAWN = """() => ({ html: document.documentElement.outerHTML,
  drawn: Array.from(document.querySelectorAll("[data-card]"), (e) => e.dataset.card) })"""


async def check_named_cards(page: Any) -> int:
    """Every card the Portuguese page names is a card it draws (the hand, the trick, the
    pass, a taken Q♠): no other card reaches its words. The number of names checked."""
    seen = await page.evaluate(DRAWN)
    text = html.unescape(seen["html"])
    for phrase in STATIC_PHRASES:  # the rules' own words, always on the page
        text = text.replace(phrase, "")
    named = {PT_RANKS[r.lower()] + PT_SUITS[s.lower()] for r, s in PT_CARD.findall(text)}
    assert named <= set(seen["drawn"]), named - set(seen["drawn"])
    return len(named)


# The corner of each face card as each language draws it: Valete, Dama, Rei, Ás in Portuguese.
INDICES = {"pt": {"J": "V", "Q": "D", "K": "R", "A": "A"},
           "en": {"J": "J", "Q": "Q", "K": "K", "A": "A"}}
CORNERS = """() => Array.from(document.querySelectorAll("#hand [data-card]"),
  (e) => [e.dataset.card, e.querySelector("svg .index").textContent])"""


async def check_corners(page: Any, language: str) -> None:
    """Every card of the hand shows its rank in its corner as ``language`` names it."""
    corners = await page.evaluate(CORNERS)
    assert len(corners) == 13, corners
    for text, corner in corners:
        rank = text[:-1]
        assert corner == INDICES[language].get(rank, rank), (text, corner)


async def a_game_with_axe(page: Any, name: str) -> dict[str, list[dict[str, Any]]]:
    """One hand against bots, axe on the lobby, the pass, a trick and the game over; in
    Portuguese, the cards it names checked on every turn."""
    await page.wait_for_selector("#tables[data-live=true]")
    found = {"lobby": await axe_violations(page)}
    await against_bots(page, name, "quick")
    await page.wait_for_function(NEXT_TURN, arg=-1)
    found["passing"] = await axe_violations(page)
    is_portuguese = await page.evaluate("() => document.documentElement.lang") == "pt-PT"
    await check_corners(page, "pt" if is_portuguese else "en")
    named = 0
    while (state := await turn_of(page))["phase"] != "GAME_OVER":
        if state["mustAct"]:
            if is_portuguese:
                named += await check_named_cards(page)
            if state["phase"] == "PLAYING" and "trick" not in found:
                found["trick"] = await axe_violations(page)
            await take_turn(page, state)
        await page.wait_for_function(NEXT_TURN, arg=state["sequence"])
    await page.wait_for_selector("#standings:not([hidden]) #final-standings tbody tr")
    found["game over"] = await axe_violations(page)
    # At least the hand's own cards, named on each turn: 13 at the pass, then 13, 12, ... 1.
    assert named >= 13 + sum(range(1, 14)) or not is_portuguese, named
    return found


async def test_portuguese_for_pt_pt_english_for_en_switched_and_remembered() -> None:
    port = free_port()
    async with (serving(web_port=port, web_host="127.0.0.1") as _, browser() as launched):
        url = f"http://127.0.0.1:{port}/"
        pt = await open_page(launched, url, locale="pt-PT")
        await pt.wait_for_selector("#me-status:not(:empty)")
        assert await words_of(pt) == {"lang": "pt-PT", "title": "Copas", "play": "Novo jogo",
                                      "bots": "Jogar contra bots", "choice": "pt"}
        assert await pt.text_content("#quick-match") == "Jogo rápido"
        en = await open_page(launched, url, locale="en-US")
        assert await words_of(en) == {"lang": "en-GB", "title": "Copas: Hearts",
                                      "play": "New game", "bots": "Play against bots",
                                      "choice": "en"}
        # Switched on the page: the page reloads in English and keeps the choice.
        async with pt.expect_navigation():
            await pt.select_option("#lang", "en")
        assert (await words_of(pt))["play"] == "New game"
        await pt.reload()
        assert (await words_of(pt))["lang"] == "en-GB"
        assert pt.errors == [] and en.errors == []


async def test_a_game_in_portuguese_and_axe_clean_in_both_languages() -> None:
    assert AXE.is_file(), "run `make ts` first (axe-core is a devDependency of clients/ts)"
    port = free_port()
    async with (serving(web_port=port, web_host="127.0.0.1", rule_defaults=TIMING) as _,
                browser() as launched):
        url = f"http://127.0.0.1:{port}/"
        found = {}
        for locale, name in (("pt-PT", "Ana"), ("en-GB", "Bea")):
            page = await open_page(launched, url, locale=locale, bypass_csp=True)
            seen = await a_game_with_axe(page, name)
            found.update({f"{locale} {moment}": v for moment, v in seen.items()})
            if locale == "pt-PT":
                assert await page.text_content("#status") == "Fim do jogo."
                assert await page.text_content("#to-lobby") == "Voltar à sala"
                headings = await page.eval_on_selector_all(
                    "#final-standings thead th", "cells => cells.map(c => c.textContent)")
                assert headings == ["Lugar", "Jogador", "Total"]
            assert page.errors == []
        assert not any(found.values()), found


async def test_brazilian_portuguese_for_pt_br_with_its_own_words_and_axe_clean() -> None:
    port = free_port()
    async with (serving(web_port=port, web_host="127.0.0.1", rule_defaults=TIMING) as _,
                browser() as launched):
        url = f"http://127.0.0.1:{port}/"
        page = await open_page(launched, url, locale="pt-BR", bypass_csp=True)
        await page.wait_for_selector("#tables[data-live=true]")
        assert await words_of(page) == {"lang": "pt-BR", "title": "Copas", "play": "Novo jogo",
                                        "bots": "Jogar contra bots", "choice": "pt-BR"}
        # Brazil's words where they differ from Portugal's (senha, usuário), the rest shared.
        assert await page.text_content("label[for=link-password]") == "Senha"
        assert await page.text_content("label[for=link-username]") == "Nome de usuário"
        lobby = await axe_violations(page)
        await against_bots(page, "Lia", "quick")
        await page.wait_for_function(NEXT_TURN, arg=-1)
        await check_corners(page, "pt")
        passing = await axe_violations(page)
        assert not lobby and not passing, (lobby, passing)
        # The switch offers both Portuguese and keeps Portugal's when chosen.
        options = await page.eval_on_selector_all(
            "#lang option", "options => options.map(o => [o.value, o.lang])")
        assert options == [["pt", "pt-PT"], ["pt-BR", "pt-BR"], ["en", "en"]]
        async with page.expect_navigation():
            await page.select_option("#lang", "pt")
        await page.wait_for_selector("#me-status:not(:empty)", state="attached")
        assert (await words_of(page))["lang"] == "pt-PT"
        assert await page.text_content("label[for=link-password]") == "Palavra-passe"
        assert page.errors == []
