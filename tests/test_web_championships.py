"""A championship on the web page, in a real headless Chromium: a person signed in as this
browser's guest registers from the page's championship list, with three accounts of reference
bots (the Python client, as tests/test_championships.py plays them) making up the numbers;
the page takes the person to their table each round by itself (between two rounds it shows the
round's results at every table and the next pairing first, then moves by itself or at "Go
now"), the person plays it by clicks, and the page then shows the final standings with the
tie-break that decided each place, the same as the server's. axe-core finds nothing on the
list, a table of the championship, the dialog between rounds, or the final standings.
One-hand games, 2 rounds, bots at once. Then a tournament director's
championship run from the page (its organizer's form and tools, a player's registration,
check-in, pairings, a paused championship and a held table, matchpoints and Buchholz, the
export), and a round's time limit ending the games before a final table. Screenshots go to
tests/screenshots/ (COPAS_SCREENSHOTS names another folder)."""

from __future__ import annotations

import asyncio
import contextlib
import csv
import io
import os
import re
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
from copas.admin.v1 import admin_pb2, admin_pb2_grpc
from copas.v1 import championships_pb2 as pb
from copas.v1 import championships_pb2_grpc, copas_pb2

from tests.helpers.browser import AXE, axe_violations, browser
from tests.helpers.calls import auth
from tests.helpers.championships import FAST_RULES, BotPlayer, sign_in
from tests.helpers.page import AT_TABLE, NEXT, signed_in_as
from tests.helpers.servers import free_port, serving

ROOT = Path(__file__).resolve().parent.parent
SHOTS = Path(os.environ.get("COPAS_SCREENSHOTS") or ROOT / "tests" / "screenshots")
ADMIN_TOKEN = "operator-token-for-the-web-championship-test"
ROUND_PAUSE = 5.0  # the organizer's pause between rounds: the round's results show during it
# A person's clock: long enough for clicks on a busy machine, the bots' games at once.
RULES = copas_pb2.RulesOverrides()
RULES.CopyFrom(FAST_RULES)
RULES.play_timeout_seconds = RULES.pass_timeout_seconds = RULES.moon_timeout_seconds = 60

# The standings shown: each line's place, whether it is the page's person, its cells by column.
STANDINGS = """() => Array.from(
    document.querySelectorAll("#champ-standings tbody tr[data-place]"), (tr) => ({
      place: Number(tr.dataset.place), you: tr.dataset.you === "true", player: tr.dataset.player,
      cells: Object.fromEntries(Array.from(tr.children,
                                           (c) => [c.dataset.column, c.textContent]))}))"""


# The dialog between two rounds: its title, each table's line, the next pairing, the count.
BETWEEN = """() => ({
  title: document.getElementById("champ-between-title").textContent,
  tables: Array.from(document.querySelectorAll("#champ-between-tables li"), (li) => ({
    table: li.dataset.table, yours: li.dataset.yours, text: li.textContent })),
  next: document.getElementById("champ-between-next").textContent,
  seconds: Number(document.getElementById("champ-between-in").dataset.seconds),
  since: document.getElementById("champ-between").dataset.since,
})"""
PLACE = re.compile(r"\((\d)(?:st|nd|rd|th)")
PAIRING = re.compile(r"Next, round 2: table 1, seat [1-4]\.")


async def screenshot(page: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


async def play_the_table(page: Any, table: str) -> None:
    """Plays the page's seat by clicks, the first legal cards, until its game is over."""
    while True:
        state = await page.evaluate(AT_TABLE)
        if state["table"] != table or state["phase"] == "GAME_OVER":
            return
        if state["mustAct"] and state["legal"]:
            if state["phase"] == "PASSING":
                for card in state["legal"][:3]:
                    await page.click(f'#hand button[data-card="{card}"]')
                await page.click("#pass-button")
            elif state["phase"] == "PLAYING":
                await page.click(f'#hand button[data-card="{state["legal"][0]}"]')
            else:
                await page.click("#moon button")
        await page.wait_for_function(NEXT, arg=[table, state["sequence"]])


async def test_a_person_registers_is_taken_to_each_table_and_sees_the_final_standings(
        tmp_path: Path) -> None:
    assert AXE.is_file(), "run `make ts` first (axe-core is a devDependency of clients/ts)"
    token_file = tmp_path / "admin-token"
    token_file.write_text(ADMIN_TOKEN + "\n")
    port = free_port()
    async with (serving(web_port=port, web_host="127.0.0.1", admin_token_file=str(token_file),
                        championship_interval=0.05) as (running, _),
                grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel,
                browser() as launched):
        address = f"127.0.0.1:{running.port}"
        champs = championships_pb2_grpc.ChampionshipServiceStub(channel)
        made = (await admin_pb2_grpc.AdminServiceStub(channel).CreateChampionship(
            admin_pb2.CreateChampionshipRequest(settings=pb.ChampionshipSettings(
                display_name="Web Cup", rounds=2, preset="online", rules=RULES, max_players=4,
                start_when_full=True, round_pause_seconds=ROUND_PAUSE), reason="test"),
            metadata=(("authorization", f"Bearer {ADMIN_TOKEN}"),))).championship
        cid = made.championship_id
        sessions = await sign_in(address, ["Bot A", "Bot B", "Bot C"])
        for session in sessions:
            await champs.Register(pb.RegisterRequest(championship_id=cid),
                                  metadata=auth(session.access_token))
        bots = [asyncio.ensure_future(BotPlayer(address, s, cid).run()) for s in sessions]
        try:
            context = await launched.new_context(reduced_motion="reduce", bypass_csp=True,
                                                 viewport={"width": 1280, "height": 860})
            page = await context.new_page()
            page.set_default_timeout(30_000)
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            await page.goto(f"http://127.0.0.1:{port}/")
            await page.wait_for_selector("#me[data-account^='a_']")  # signed in as a guest
            row = f'#champ-list tr[data-championship="{cid}"]'
            await page.wait_for_selector(f"{row}[data-state=REGISTERING]")
            lobby_violations = await axe_violations(page)
            await screenshot(page, "championship-list-1280")
            await page.click(f'{row} button[data-action="register"]')  # the 4th: it starts

            tables: list[str] = []
            between_violations: list[Any] = []
            for round_number in (1, 2):  # the page goes to each table by itself
                if round_number == 2:  # first the round's results and the next pairing
                    # The round's results at once, during the organizer's pause ...
                    await page.wait_for_selector("#champ-between[open][data-mode=results]")
                    waiting = await page.evaluate(BETWEEN)
                    assert waiting["next"].startswith("Your next table comes when the "
                                                      "organizer's pause"), waiting
                    assert waiting["title"] == "Round 1: the results"
                    between_violations = await axe_violations(page)
                    # ... then, the next round seated, its pairing, counting down.
                    await page.wait_for_selector("#champ-between[open][data-mode=next]")
                    shown_between = await page.evaluate(BETWEEN)
                    assert shown_between["tables"] == waiting["tables"]
                    assert shown_between["title"] == "Round 1: the results"
                    assert len(shown_between["tables"]) == 1
                    line = shown_between["tables"][0]
                    assert line["table"] == tables[0] and line["yours"] == "true"
                    assert line["text"].startswith("Table 1: ")
                    places = [int(p) for p in PLACE.findall(line["text"])]
                    assert places == sorted(places) and len(places) == 4, line["text"]
                    assert PAIRING.fullmatch(shown_between["next"]), shown_between["next"]
                    # The results' 10 s count from the round's end, not again from the seating.
                    assert shown_between["since"] == waiting["since"]
                    assert 0 < shown_between["seconds"] <= 10
                    assert not await page.evaluate("() => document.getElementById('game')"
                                                   ".dataset.table !== " + repr(tables[0]))
                    await page.keyboard.press("Enter")  # "Go now", focused when it opened
                    await page.wait_for_selector("#champ-between:not([open])", state="hidden")
                await page.wait_for_function(
                    """(seen) => { const g = document.getElementById("game");
                        return !g.hidden && g.dataset.table && !seen.includes(g.dataset.table)
                            && g.dataset.phase && g.dataset.phase !== ""; }""", arg=tables)
                table = (await page.evaluate(AT_TABLE))["table"]
                banner = await page.text_content("#champ-banner-text") or ""
                assert f"Web Cup: round {round_number} of 2" in banner, banner
                if round_number == 1:
                    table_violations = await axe_violations(page)
                    await screenshot(page, "championship-table-1280")
                tables.append(table)
                await play_the_table(page, table)

            detail = "#lobby:not([hidden]) #champ-detail[data-state=FINISHED]:not([hidden])"
            await page.wait_for_selector(detail)
            await page.wait_for_selector("#champ-standings tbody tr[data-you=true]")
            shown = await page.evaluate(STANDINGS)
            replays = await page.eval_on_selector_all(
                "#champ-rounds a[data-action=replay]",
                "links => links.map(a => a.pathname + a.hash)")
            final_violations = await axe_violations(page)
            await page.locator("#championships").screenshot(
                path=str(SHOTS / "championship-final-1280.png"))
            await asyncio.wait_for(asyncio.gather(*bots), 60)
        finally:
            for task in bots:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task

        final = (await champs.GetChampionship(pb.GetChampionshipRequest(
            championship_id=cid))).championship
        assert final.state == pb.CHAMPIONSHIP_STATE_FINISHED
        # Every table of the finished rounds has its replay (issue 40).
        assert sorted(replays) == sorted(f"/#/replay/{t.table_id}"
                                         for r in final.rounds for t in r.tables)
        # The page sat at the person's own seat each round: the tables of the 4th player.
        names = {s.display_name for s in sessions for s in [s.account]}
        person = [next(t.table_id for t in r.tables for s in t.seats
                       if s.display_name not in names) for r in final.rounds]
        assert tables == person
        # The page's final standings are the server's, each with the tie-break in words.
        words = {pb.TIE_BREAK_POINTS: "championship points", pb.TIE_BREAK_FIRSTS: "first places",
                 pb.TIE_BREAK_RELATIVE_POINTS: "game points against the table's average",
                 pb.TIE_BREAK_HEAD_TO_HEAD: "games between the tied players",
                 pb.TIE_BREAK_DRAW: "a seeded draw"}
        assert [(s["place"], s["cells"]["player"].removesuffix(" (you)"), s["cells"]["points"],
                 s["cells"]["games"], s["cells"]["decided-by"]) for s in shown] == [
            (line.place, line.display_name, str(line.points), str(line.games),
             words[line.decided_by]) for line in final.standings]
        assert sum(s["you"] for s in shown) == 1
        assert errors == []
        found = {"list": lobby_violations, "table": table_violations,
                 "between rounds": between_violations, "final standings": final_violations}
        assert not any(found.values()), found


# ---------------------------------------------------------------- the tournament director

DIRECTOR_TOKEN = "operator-token-for-the-web-director-test"
NOTICE = 20  # seconds a round's pairings are shown before its tables are made
BOT_NAMES = ["Cid", "Dora", "Eli", "Fay", "Gus", "Hal"]  # accounts played by reference bots


def local(moment: float) -> str:
    """A datetime-local input's value for ``moment`` in the pages' time zone (UTC)."""
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%S")


def clock(moment: float) -> str:
    """``moment`` as the page writes it (its day's part is left out)."""
    return datetime.fromtimestamp(moment, UTC).strftime("%H:%M:%S")


def shown_number(value: float) -> str:
    """A number as the page shows it: whole without decimals, else two."""
    return str(int(value)) if value == int(value) else f"{value:.2f}"


async def new_page(launched: Any, errors: list[str]) -> Any:
    """A browser of its own (its own account), in UTC, its script errors put in ``errors``."""
    context = await launched.new_context(reduced_motion="reduce", bypass_csp=True,
                                         timezone_id="UTC", viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    page.set_default_timeout(60_000)
    page.on("pageerror", lambda error: errors.append(str(error)))
    return page


async def direct(organizer: Any, button: str) -> None:
    """The organizer presses the director's Pause or Resume (the one the page shows now)."""
    await organizer.click(f'#director-pause:text-is("{button}")')
    await organizer.wait_for_selector(
        f"#champ-detail[data-paused='{'true' if button == 'Pause' else 'false'}']")


async def settings_shown(page: Any) -> dict[str, str]:
    return dict(await page.evaluate("""() => Array.from(
        document.querySelectorAll("#champ-settings dd"),
        (d) => [d.dataset.setting, d.textContent])"""))


async def test_an_organizer_runs_a_championship_with_check_in_and_pairings_from_the_page(
        tmp_path: Path) -> None:
    """The tournament director's path on the page, end to end, in three browsers and six
    reference bots: an organizer creates a championship with every setting (matchpoints on
    duplicate deals, Buchholz, a registration window, check-in, pairings announced ahead, a
    time limit), each shown back as set; two players open its link, register when the window
    opens and check in when check-in opens (the bots by gRPC); the organizer starts it with
    the operator's token (relayed by --web-admin), pauses it while round 1's pairings are
    shown (each player's own table marked, its start and time limit), swaps a player to
    another table, disqualifies a bot and resumes; at the tables the pause holds the game
    (the table says so); the players play by clicks; once it is over the organizer corrects a
    table's result, which every page then shows; the final standings show matchpoints,
    percentages, Buchholz and what decided each place as the server computed them, the
    disqualified last, and the page's CSV and JSON downloads are the server's export, byte
    for byte."""
    assert AXE.is_file(), "run `make ts` first (axe-core is a devDependency of clients/ts)"
    token_file = tmp_path / "admin-token"
    token_file.write_text(DIRECTOR_TOKEN + "\n")
    port = free_port()
    async with (serving(web_port=port, web_host="127.0.0.1", admin_token_file=str(token_file),
                        web_admin=True, championship_interval=0.05) as (running, _),
                grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel,
                browser() as launched):
        address = f"127.0.0.1:{running.port}"
        champs = championships_pb2_grpc.ChampionshipServiceStub(channel)
        site = f"http://127.0.0.1:{port}"
        errors: list[str] = []
        organizer, ana, ben = [await new_page(launched, errors) for _ in range(3)]
        # Everyone signs in first: once the registration window is set, nothing slow stands
        # between its opening and the registrations.
        await signed_in_as(organizer, site + "/", "Olga")
        for page, name in ((ana, "Ana"), (ben, "Ben")):
            await signed_in_as(page, site + "/", name)
        sessions = await sign_in(address, BOT_NAMES)

        # The organizer makes it: every setting, through the form (its times last).
        await organizer.click("#organize-new")
        for selector, value in (
                ("#organize-name", "Night Cup"), ("#organize-rounds", "1"),
                ("#organize-min", "8"), ("#organize-max", "8"), ("#organize-check-in", "10"),
                ("#organize-notice", str(NOTICE)), ("#organize-time-limit", "30"),
                ("#organize-pause", "45")):
            await organizer.fill(selector, value)
        await organizer.select_option("#organize-preset", "quick")
        await organizer.select_option("#organize-clock", "relaxed")
        await organizer.select_option("#organize-scoring", "matchpoints")
        await organizer.check("#organize-duplicate")
        await organizer.check("#organize-buchholz")
        form_violations = await axe_violations(organizer)
        now = int(time.time())
        opens, closes = now + 4, now + 20  # registration; check-in opens after it closes
        start = closes + 1 + 10 * 60
        for selector, moment in (("#organize-start", start), ("#organize-opens", opens),
                                 ("#organize-closes", closes)):
            await organizer.fill(selector, local(moment))
        await organizer.click("#organize-create")
        await organizer.wait_for_selector("#champ-detail[data-championship^='c_']:not([hidden])")
        cid = str(await organizer.get_attribute("#champ-detail", "data-championship"))
        assert await organizer.text_content("#champ-name") == "Night Cup"
        assert errors == [] and await organizer.text_content("#organize-error") == ""
        made = (await champs.GetChampionship(pb.GetChampionshipRequest(championship_id=cid))
                ).championship.settings
        assert (made.display_name, made.rounds, made.preset, made.min_players, made.max_players,
                made.scoring, made.duplicate_deals, made.buchholz, made.check_in_seconds,
                made.pairing_notice_seconds, made.round_time_limit_seconds,
                made.round_pause_seconds, made.drop_absent, made.start_time.seconds,
                made.registration_open_time.seconds, made.registration_close_time.seconds) == (
            "Night Cup", 1, "quick", 8, 8, pb.CHAMPIONSHIP_SCORING_MATCHPOINTS, True, True, 600,
            NOTICE, 1800, 45, True, start, opens, closes)
        link = str(await organizer.input_value("#champ-link"))
        assert link == f"{site}/?championship={cid}"

        # Two players open its link (still signed in as themselves) and register on the page
        # when the window opens, the bots by gRPC.
        for page, name in ((ana, "Ana"), (ben, "Ben")):
            await page.goto(link)
            await page.wait_for_selector(f"#champ-detail[data-championship='{cid}']")
            assert await page.text_content("#champ-name") == "Night Cup"
            await page.wait_for_function("(name) => document.getElementById('me-title')"
                                         ".textContent === name", arg=name)
        for page in (ana, ben):
            await page.click("#champ-register")  # there once the window opens
        for session in sessions:
            await champs.Register(pb.RegisterRequest(championship_id=cid),
                                  metadata=auth(session.access_token))
        for page in (ana, ben):
            await page.wait_for_selector("#champ-unregister")
            assert clock(closes) in (await page.text_content("#champ-registration") or "")

        # Everything the organizer set is shown back, on every page alike.
        organizer_violations = await axe_violations(organizer)
        settings = await settings_shown(ana)
        assert settings == await settings_shown(ben) == await settings_shown(organizer)
        assert settings["rounds"] == "1 round"
        assert settings["game"] == "One hand, 60 s a card, 90 s to pass"
        assert settings["players"] == "8 to 8"
        assert clock(start) in settings["start"]
        assert clock(opens) in settings["registration"]
        assert clock(closes) in settings["registration"]
        assert settings["check-in"].startswith("the last 10 min before the start")
        assert clock(start - 600) in settings["check-in"]
        assert settings["scoring"] == "matchpoints against the same cards (duplicate deals)"
        assert settings["tie-breaks"].startswith("Buchholz, then first places")
        assert settings["final"] == "none" and settings["late-entry"] == "none"
        assert settings["absent"] == "dropped from the next rounds"
        assert settings["time-limit"] == "30 min a round"
        assert settings["pairing-notice"] == f"shown {NOTICE} s before each round"
        assert settings["pause"] == "45 s"
        bots = [asyncio.ensure_future(BotPlayer(address, s, cid).run()) for s in sessions]
        try:
            # Check-in opens after registration closed: the players check in on the page.
            for page in (ana, ben):
                await page.wait_for_selector("#champ-check-in")
                window = await page.text_content("#champ-check-in-window") or ""
                assert clock(start - 600) in window and clock(start) in window
                await page.click("#champ-check-in")
                await page.wait_for_selector("#champ-checked-in")
            for session in sessions:
                await champs.CheckIn(pb.CheckInRequest(championship_id=cid),
                                     metadata=auth(session.access_token))
            await organizer.wait_for_function("""() => { const p = document.querySelectorAll(
                "#champ-players li[data-checked-in=true]"); return p.length === 8; }""")

            # The organizer starts it with the operator's token, and pauses it while round 1's
            # pairings are shown.
            await organizer.fill("#operator-token", DIRECTOR_TOKEN)
            await organizer.fill("#operator-reason", "the Night Cup's director")
            await organizer.click("#director-start")
            await organizer.wait_for_selector(
                "#champ-rounds section[data-round='1'][data-announced='true']")
            await direct(organizer, "Pause")
            for page in (ana, ben):
                await page.wait_for_selector("#champ-detail[data-paused='true']")
            assert "paused by the organizer" in (await ana.text_content("#champ-state") or "")
            paired = (await champs.GetChampionship(pb.GetChampionshipRequest(
                championship_id=cid))).championship
            (round_1,) = paired.rounds
            assert round_1.is_announced and not any(t.table_id for t in round_1.tables)
            by_name = {p.display_name: p.player_id for p in paired.players}
            assert len(by_name) == 8 and all(p.is_checked_in for p in paired.players)

            def table_of(c: pb.Championship, name: str) -> pb.ChampionshipTable:
                return next(t for t in c.rounds[0].tables
                            if any(s.player_id == by_name[name] for s in t.seats))

            for page, name in ((ana, "Ana"), (ben, "Ben")):
                mine = table_of(paired, name)
                yours = "#champ-rounds section[data-round='1'][data-announced='true'] li.yours"
                await page.wait_for_selector(yours)
                assert await page.get_attribute(yours, "data-number") == str(mine.table_number)
                assert await page.locator(f"{yours} .seat[data-you=true]").text_content() \
                    == f"{name} (you)"
                assert await page.locator(f"{yours} .seat").all_text_contents() == [
                    s.display_name + (" (you)" if s.display_name == name else "")
                    for s in mine.seats]
                times = await page.text_content(
                    "#champ-rounds section[data-round='1'] .champ-round-times") or ""
                assert f"Starts at {clock(round_1.start_time.seconds)}" in times
                assert "time limit 30 min" in times
                assert f"table {mine.table_number}" in (
                    await page.text_content("#champ-next-pairing") or "")
            pairing_violations = await axe_violations(ana)
            await screenshot(ana, "championship-pairings-1280")

            director_violations = await axe_violations(organizer)  # every tool shown
            # The organizer swaps Ana with a player of the other table before it starts.
            other = next(s for t in round_1.tables if t != table_of(paired, "Ana")
                         for s in t.seats if s.display_name in BOT_NAMES)
            await organizer.select_option("#director-reseat-a", by_name["Ana"])
            await organizer.select_option("#director-reseat-b", other.player_id)
            await organizer.click("#director-reseat")
            await organizer.wait_for_selector("#organize-status:text-is('Swapped.')")
            swapped = (await champs.GetChampionship(pb.GetChampionshipRequest(
                championship_id=cid))).championship
            moved = table_of(swapped, "Ana")
            assert moved.table_number != table_of(paired, "Ana").table_number
            await ana.wait_for_selector(
                f"#champ-rounds li.yours[data-number='{moved.table_number}']")

            # And disqualifies a bot of Ben's table: it leaves at once when the round starts,
            # and every page shows it.
            cheat = next(s for s in table_of(swapped, "Ben").seats
                         if s.display_name in BOT_NAMES)
            await organizer.select_option("#director-disqualify-player", cheat.player_id)
            await organizer.click("#director-disqualify")
            await organizer.wait_for_selector("#organize-status:text-is('Disqualified.')")
            for page in (ana, ben, organizer):
                await page.wait_for_selector(
                    f"#champ-players li[data-player='{cheat.player_id}']"
                    f":text-is('{cheat.display_name} (disqualified)')")

            # Resumed: round 1 starts after what was left of its notice; each player is taken
            # to their table, which the next pause holds.
            await direct(organizer, "Resume")
            tables = {}
            for page in (ana, ben):
                await page.wait_for_function("""() => { const g = document.getElementById("game");
                    return !g.hidden && g.dataset.table && g.dataset.phase; }""")
                tables[page] = (await page.evaluate(AT_TABLE))["table"]
            seated = (await champs.GetChampionship(pb.GetChampionshipRequest(
                championship_id=cid))).championship
            assert tables[ana] == table_of(seated, "Ana").table_id
            assert tables[ben] == table_of(seated, "Ben").table_id
            await direct(organizer, "Pause")
            await ana.wait_for_selector("#game[data-held='true']")
            assert (await ana.text_content("#status") or "").startswith("Paused")
            assert await ana.get_attribute("#game", "data-must-act") == "false"
            await screenshot(ana, "championship-held-table-1280")
            await direct(organizer, "Resume")  # play goes on
            await ana.wait_for_selector("#game[data-held='false']")

            await asyncio.gather(play_the_table(ana, tables[ana]),
                                 play_the_table(ben, tables[ben]))
            for page in (ana, ben, organizer):
                await page.wait_for_selector(
                    "#lobby:not([hidden]) #champ-detail[data-state=FINISHED]:not([hidden])")
            await asyncio.wait_for(asyncio.gather(*bots), 60)
        finally:
            for task in bots:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task

        # Over, the organizer corrects the result of Ana's table from the page: every page
        # shows it corrected (the streams have ended: the page reads an ended championship
        # again), with its new totals and the standings that follow from them.
        over = (await champs.GetChampionship(pb.GetChampionshipRequest(championship_id=cid))
                ).championship
        assert over.state == pb.CHAMPIONSHIP_STATE_FINISHED
        played = table_of(over, "Ana")
        totals = [0 if seat.player_id == by_name["Ana"] else 5 * (i + 1)
                  for i, seat in enumerate(played.seats)]
        assert totals != [seat.total for seat in played.seats]
        await organizer.select_option("#director-correct-table", f"1:{played.table_number}")
        await organizer.fill("#director-correct-totals", ", ".join(map(str, totals)))
        await organizer.click("#director-correct")
        await organizer.wait_for_selector(
            "#organize-status:text-is('Corrected: the standings follow.')")
        corrected = f"#champ-rounds li[data-number='{played.table_number}'][data-corrected=true]"
        for page in (organizer, ana):
            await page.wait_for_selector(corrected)
        final = (await champs.GetChampionship(pb.GetChampionshipRequest(championship_id=cid))
                 ).championship
        assert [seat.total for seat in table_of(final, "Ana").seats] == totals
        assert "corrected" in (await ana.text_content(corrected) or "")
        assert [text.split(" (")[-1].split(",")[1].strip() for text in
                await ana.locator(f"{corrected} .seat").all_text_contents()] == [
            f"{total} game points" for total in totals]

        # The final standings: matchpoints, percentages and Buchholz as the server has them.
        await ana.wait_for_selector(f"#champ-detail[data-version='{final.version}']")
        shown = await ana.evaluate(STANDINGS)
        columns = await ana.evaluate("""() => Array.from(
            document.querySelectorAll("#champ-standings thead th"), (th) => th.dataset.column)""")
        assert columns == ["place", "player", "percentage", "matchpoints", "points", "buchholz",
                           "firsts", "relative", "head-to-head", "games", "decided-by"]
        assert [(s["place"], s["player"], s["cells"]["player"]) for s in shown] == [
            (line.place, line.player_id, line.display_name
             + (" (you)" if line.player_id == by_name["Ana"] else "")
             + (" (disqualified)" if line.is_disqualified else ""))
            for line in final.standings]
        assert final.standings[-1].player_id == cheat.player_id  # ranked last
        decided = {pb.TIE_BREAK_POINTS: "the percentages (matchpoints)",
                   pb.TIE_BREAK_BUCHHOLZ: "the opponents' scores (Buchholz)",
                   pb.TIE_BREAK_FIRSTS: "first places",
                   pb.TIE_BREAK_RELATIVE_POINTS: "game points against the table's average",
                   pb.TIE_BREAK_HEAD_TO_HEAD: "games between the tied players",
                   pb.TIE_BREAK_DRAW: "a seeded draw", pb.TIE_BREAK_UNSPECIFIED: ""}
        assert [s["cells"]["decided-by"] for s in shown] == [
            decided[line.decided_by] for line in final.standings]
        for s, line in zip(shown, final.standings, strict=True):
            for column, exact in (("percentage", line.percentage),
                                  ("matchpoints", line.matchpoints),
                                  ("buchholz", line.buchholz)):
                assert abs(float(s["cells"][column]) - exact) < 0.006, (column, s, line)
            assert s["cells"]["points"] == str(line.points)
        assert any(line.buchholz for line in final.standings)
        assert {line.percentage for line in final.standings} != {50.0}  # compared, not alone
        final_violations = await axe_violations(ana)
        await ana.locator("#championships").screenshot(
            path=str(SHOTS / "championship-matchpoints-1280.png"))

        # The downloads are the server's export (the file `copas championship export` writes).
        for button, export_format in (("#champ-export-csv", pb.EXPORT_FORMAT_CSV),
                                      ("#champ-export-json", pb.EXPORT_FORMAT_JSON)):
            async with ana.expect_download() as waiting:
                await ana.click(button)
            download = await waiting.value
            exported = await champs.ExportChampionship(pb.ExportChampionshipRequest(
                championship_id=cid, format=export_format))
            assert download.suggested_filename == exported.file_name
            assert Path(await download.path()).read_text(encoding="utf-8") == exported.content
        standings_part, _ = exported_csv(await champs.ExportChampionship(
            pb.ExportChampionshipRequest(championship_id=cid, format=pb.EXPORT_FORMAT_CSV)))
        assert [(r["name"], r["decided_by"]) for r in standings_part] == [
            (line.display_name, pb.TieBreak.Name(line.decided_by).removeprefix(
                "TIE_BREAK_").lower()) for line in final.standings]

        assert errors == []
        found = {"form": form_violations, "organizer": organizer_violations,
                 "director's tools": director_violations, "pairings": pairing_violations,
                 "final standings": final_violations}
        assert not any(found.values()), found


def exported_csv(exported: pb.ExportChampionshipResponse
                 ) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """The CSV export's two tables: the standings, and a row per seat."""
    standings_part, seats_part = exported.content.split("\n\n")
    return (list(csv.DictReader(io.StringIO(standings_part))),
            list(csv.DictReader(io.StringIO(seats_part))))


# ---------------------------------------------------------------- a round's time limit

TIME_LIMIT = 2.0  # seconds a round's games may run; every clock is a minute (RULES)
ROUNDS = """() => Array.from(document.querySelectorAll("#champ-rounds section"), (s) => ({
    round: Number(s.dataset.round), title: s.querySelector("h4").textContent,
    times: s.querySelector(".champ-round-times").textContent,
    tables: Array.from(s.querySelectorAll("li[data-table]"), (li) => ({
      table: li.dataset.table, endReason: Number(li.dataset.endReason),
      text: li.textContent}))}))"""


async def test_a_player_sees_the_time_limit_end_the_games_and_the_final_table(
        tmp_path: Path) -> None:
    """A championship whose games run out of time, as a player sees it on the page: 1 round
    and a final of 3, absent players kept (not dropped), a round time limit of 2 s on
    one-minute clocks. Ana registers on the page (the 4th: it starts), a reference bot plays
    (it passes, then waits for the others), two accounts never come. Every game is ended by
    the time limit before a hand is done: the page takes Ana to her table, which says so, and
    then shows the final standings with each finalist's place in the final and every table
    of the round and of the final marked as ended by the time limit, as the server has them."""
    assert AXE.is_file(), "run `make ts` first (axe-core is a devDependency of clients/ts)"
    token_file = tmp_path / "admin-token"
    token_file.write_text(ADMIN_TOKEN + "\n")
    port = free_port()
    async with (serving(web_port=port, web_host="127.0.0.1", admin_token_file=str(token_file),
                        championship_interval=0.05) as (running, _),
                grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel,
                browser() as launched):
        address = f"127.0.0.1:{running.port}"
        champs = championships_pb2_grpc.ChampionshipServiceStub(channel)
        cid = (await admin_pb2_grpc.AdminServiceStub(channel).CreateChampionship(
            admin_pb2.CreateChampionshipRequest(settings=pb.ChampionshipSettings(
                display_name="Clock Cup", rounds=1, preset="online", rules=RULES,
                max_players=4, start_when_full=True, final_table=3, drop_absent=False,
                round_time_limit_seconds=TIME_LIMIT), reason="test"),
            metadata=(("authorization", f"Bearer {ADMIN_TOKEN}"),))
               ).championship.championship_id
        sessions = await sign_in(address, ["Cid", "Dora", "Eli"])
        for session in sessions:
            await champs.Register(pb.RegisterRequest(championship_id=cid),
                                  metadata=auth(session.access_token))
        bot = asyncio.ensure_future(BotPlayer(address, sessions[0], cid).run())
        try:
            errors: list[str] = []
            page = await new_page(launched, errors)
            await signed_in_as(page, f"http://127.0.0.1:{port}/?championship={cid}", "Ana")
            await page.wait_for_selector(f"#champ-detail[data-championship='{cid}']")
            settings = await settings_shown(page)
            assert (settings["final"], settings["absent"], settings["time-limit"]) == (
                "the best 3 play a final", "seated again in the next rounds", "2 s a round")
            await page.click("#champ-register")  # the 4th: it starts

            # Taken to her table (each game ends by the time limit within 2 s), then back to
            # the standings when it is over.
            await page.wait_for_function("""() => { const g = document.getElementById("game");
                return !g.hidden && g.dataset.table; }""")
            seen = await page.get_attribute("#game", "data-table")
            await page.wait_for_selector(
                "#lobby:not([hidden]) #champ-detail[data-state=FINISHED]:not([hidden])")
            await asyncio.wait_for(bot, 60)
        finally:
            bot.cancel()
            with contextlib.suppress(BaseException):
                await bot

        final = (await champs.GetChampionship(pb.GetChampionshipRequest(championship_id=cid))
                 ).championship
        assert final.state == pb.CHAMPIONSHIP_STATE_FINISHED
        assert [(r.round_number, r.is_final) for r in final.rounds] == [(1, False), (2, True)]
        time_limit = copas_pb2.GAME_END_REASON_TIME_LIMIT
        assert {t.end_reason for r in final.rounds for t in r.tables} == {time_limit}
        finalists = [line for line in final.standings if line.final_place]
        assert [line.place for line in finalists] == [1, 2, 3]  # the finalists come first

        # The standings: each finalist's place in the final, decided by it.
        await page.wait_for_selector("#champ-standings tbody tr[data-you=true]")
        shown = await page.evaluate(STANDINGS)
        columns = await page.evaluate("""() => Array.from(
            document.querySelectorAll("#champ-standings thead th"), (th) => th.dataset.column)""")
        assert columns == ["place", "player", "points", "final", "firsts", "relative",
                           "head-to-head", "games", "decided-by"]
        assert [(s["place"], s["player"], s["cells"]["final"], s["cells"]["points"])
                for s in shown] == [
            (line.place, line.player_id, str(line.final_place) if line.final_place else "",
             str(line.points)) for line in final.standings]
        assert [s["cells"]["decided-by"] for s in shown if s["cells"]["final"]] == [
            "the final table"] * 3

        # The round and the final: every table marked as ended by the time limit.
        rounds = await page.evaluate(ROUNDS)
        assert [(r["round"], r["title"]) for r in rounds] == [
            (2, "Final table (over)"), (1, "Round 1 (over)")]
        assert all("time limit 2 s" in r["times"] for r in rounds), rounds
        assert [[(t["table"], t["endReason"]) for t in r["tables"]] for r in rounds] == [
            [(t.table_id, time_limit) for t in r.tables] for r in reversed(final.rounds)]
        assert all(", time limit)" in t["text"] for r in rounds for t in r["tables"]), rounds
        assert seen in {t.table_id for r in final.rounds for t in r.tables
                        if any(s.display_name == "Ana" for s in t.seats)}
        violations = await axe_violations(page)
        await page.locator("#championships").screenshot(
            path=str(SHOTS / "championship-final-table-1280.png"))

        # Round 1's table, watched from the standings: the time limit ended its game.
        await page.click("#champ-rounds section[data-round='1'] a[data-action=watch]")
        ended = "#game:not([hidden])[data-phase=GAME_OVER] .end-reason[data-reason=TIME_LIMIT]"
        await page.wait_for_selector(ended)
        assert await page.get_attribute("#game", "data-table") == final.rounds[0].tables[0].table_id
        assert await page.text_content(ended) == (
            "The round's time limit ended the game: the hand in progress does not count.")
        await screenshot(page, "championship-time-limit-1280")
        assert errors == []
        assert not violations, violations
