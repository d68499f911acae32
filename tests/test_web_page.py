"""The web page in a real headless Chromium (Debian's `chromium`, driven by Playwright; no
browser of its own), used as people use it: a whole game by clicks on a laptop and by taps
on a phone, a table for friends joined through its link, the live lobby and quick match, a
spectator, the moon choice on a seeded deal, keyboard-only play, a refusal in words and an
automated accessibility pass (axe-core, from clients/ts's npm devDependencies). At every
step the page's DOM (every node, every attribute), its storage and every message it
received (recorded under the page's `fetch`) are checked: no card of another player ever
reaches the page. Screenshots of each moment go to tests/screenshots/ (git-ignored;
COPAS_SCREENSHOTS names another folder). Without chromium these tests fail."""

from __future__ import annotations

import base64
import html
import itertools
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from copas.v1 import copas_pb2
from google.protobuf import message_factory
from google.protobuf.message import Message

from engine import IllegalActionError, PassCards, PlayCard, Rules, card
from engine.cards import cards_of
from engine.game import Game
from engine.record import replay
from tests.helpers.browser import AXE, axe_violations, browser
from tests.helpers.calls import auth, join_all, new_table
from tests.helpers.servers import free_port, serving

ROOT = Path(__file__).resolve().parent.parent
TS_DIR = ROOT / "clients" / "ts"
BUNDLE = ROOT / "server" / "web" / "app.js"
SHOTS = Path(os.environ.get("COPAS_SCREENSHOTS") or ROOT / "tests" / "screenshots")
SERVICE = copas_pb2.DESCRIPTOR.services_by_name["CopasService"]
# Short pauses, long enough limits that the countdown shows and never runs out; the hand
# pause is long enough to see (and photograph) the hand's summary.
TIMING = {"trick_pause": 0.05, "hand_pause": 1.5, "play_timeout": 120.0,
          "pass_timeout": 120.0, "moon_timeout": 120.0}
SEEDED = {"trick_pause_seconds": 0.05, "hand_pause_seconds": 0.1, "play_timeout_seconds": 120.0,
          "pass_timeout_seconds": 120.0, "moon_timeout_seconds": 120.0}
LAPTOP = {"viewport": {"width": 1280, "height": 860}}
PHONE = {"viewport": {"width": 390, "height": 844}, "device_scale_factor": 2,
         "is_mobile": True, "has_touch": True}
PRIVATE = ("hand", "pass_choice", "received", "legal_cards")
PUBLIC_CARDS = {"card_played.card", "trick_won.trick.cards.card", "view.trick.cards.card",
                "view.last_trick.cards.card"}

# Installed before the page's own scripts: keeps a copy of every copas.v1 response body.
RECORD_RESPONSES = """
(() => {
  const wire = [];
  window.__copasWire = wire;
  const fetchFromNetwork = window.fetch.bind(window);
  const base64 = (bytes) => {
    let text = "";
    for (let i = 0; i < bytes.length; i += 0x8000) {
      text += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
    }
    return btoa(text);
  };
  window.fetch = async (input, init) => {
    const response = await fetchFromNetwork(input, init);
    const url = typeof input === "string" ? input : input.url;
    if (!url.includes("/copas.v1.CopasService/") || !response.body) return response;
    const [forPage, forTest] = response.body.tee();
    const entry = { url, type: response.headers.get("content-type") || "", chunks: [] };
    wire.push(entry);
    (async () => {
      const reader = forTest.getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        entry.chunks.push(base64(value));
      }
    })().catch(() => { entry.isCut = true; });  // the page stopped the stream (the lobby's)
    return new Response(forPage, { status: response.status, headers: response.headers });
  };
})();
"""

# What a turn needs to know, what the page shows (cards with where, the whole DOM as HTML,
# storage), and what it received, in one round trip.
PAGE_STATE = """() => {
  const game = document.getElementById("game");
  const countdown = document.getElementById("countdown");
  const pass = document.getElementById("pass-direction");
  const data = (selector) => (document.querySelector(selector) || { dataset: {} }).dataset;
  const cardsOf = (selector) =>
      Array.from(document.querySelectorAll(selector), (b) => b.dataset.card);
  const where = (e) => e.closest("#trick") || e.closest("#last-trick") ? "table"
      : e.closest("#hand") ? "hand"
      : e.closest("#pass-direction") ? "passed" : e.closest("#seats .took") ? "taken" : "elsewhere";
  const storage = {};
  for (const [name, store] of [["local", localStorage], ["session", sessionStorage]]) {
    for (let i = 0; i < store.length; i++) {
      storage[name + ":" + store.key(i)] = store.getItem(store.key(i));
    }
  }
  return {
    phase: game.dataset.phase,
    sequence: Number(game.dataset.sequence),
    mustAct: game.dataset.mustAct === "true",
    table: game.dataset.table,
    legal: cardsOf("#hand button[data-legal=true]"),
    lifted: cardsOf("#hand button.legal"),
    dim: Array.from(document.querySelectorAll("#hand button.dim"),
                    (b) => ({ card: b.dataset.card, reason: b.dataset.reason, title: b.title })),
    received: cardsOf("#hand button[data-received=true]"),
    seconds: countdown.dataset.seconds === undefined ? null : Number(countdown.dataset.seconds),
    direction: pass.dataset.direction,
    passShown: !pass.hidden,
    passTo: pass.dataset.to,
    receiver: data("#seats li[data-receives=true]"),
    toAct: Array.from(document.querySelectorAll("#seats li[data-to-act=true]"),
                      (li) => Number(li.dataset.seat)),
    clocks: document.querySelectorAll("#seats li[data-to-act=true] .clock").length,
    you: data("#seats li[data-you=true]").seat,
    positions: Object.fromEntries(Array.from(document.querySelectorAll("#seats li"),
                                             (li) => [li.dataset.seat, li.dataset.pos])),
    heartsBroken: data("[data-hearts-broken]").heartsBroken ?? null,
    queen: data("[data-queen]").queen ?? null,
    taken: Array.from(document.querySelectorAll("#seats li"), (li) => [Number(li.dataset.seat),
        cardsOf("#" + "seats li[data-seat='" + li.dataset.seat + "'] .took [data-card]").concat(
            (data("#seats li[data-seat='" + li.dataset.seat + "'] .took [data-taken]").taken || "")
                .split(" ").filter(Boolean))]),
    error: document.getElementById("error").textContent,
    errorReason: document.getElementById("error").dataset.reason || "",
    hint: document.getElementById("hint").textContent,
    cards: Array.from(document.querySelectorAll("[data-card]"),
                      (e) => ({ card: e.dataset.card, where: where(e) })),
    html: document.documentElement.outerHTML,
    storage,
    wire: window.__copasWire,
  };
}"""
# The whole games' bots play at the table's pace, a card every BOT_PACE seconds (a person's
# table defaults to 1 s; short here, so a game of four hands stays short).
BOT_PACE = 0.05
# Records, on each change of the trick, the hand's cards and where each is on the page (the
# document's coordinates): nothing the player may touch may move while the trick changes.
WATCH_HAND = """() => {
  window.__handBoxes = [];
  const hand = document.getElementById("hand");
  new MutationObserver(() => {
    const game = document.getElementById("game");
    const buttons = Array.from(hand.querySelectorAll("button"));
    window.__handBoxes.push({
      at: game.dataset.hand + ":" + game.dataset.trick, mode: hand.dataset.mode,
      cards: buttons.map((b) => b.dataset.card).join(" "),
      trickCards: document.querySelectorAll("#trick [data-card]").length,
      // What moved, when something did: the heights of the table's parts.
      layout: ["felt", "table-state", "trick", "trick-note", "turn"].map(
        (id) => id + ":" + Math.round(document.getElementById(id).getBoundingClientRect().height),
      ).concat(Array.from(document.querySelectorAll("#seats li"),
        (li) => li.dataset.pos + ":" + Math.round(li.getBoundingClientRect().height))),
      boxes: buttons.map((b) => {
        const r = b.getBoundingClientRect();
        return [r.x + scrollX, r.y + scrollY, r.width, r.height].map((v) => Math.round(v * 10));
      }),
    });
  }).observe(document.getElementById("trick"), { childList: true });
}"""
# Our turn (the page takes moves), or the game is over, or (when asked) a hand's summary is
# on the table, after the event ``s``.
NEXT_MOMENT = """([s, summary]) => {
  const game = document.getElementById("game");
  return Number(game.dataset.sequence) > s
      && (game.dataset.mustAct === "true" || game.dataset.phase === "GAME_OVER"
          || (summary && !document.getElementById("hand-score").hidden));
}"""
# Seen from seat 0's page: the first trick is won, or a person (seat 0 or 1) is to play.
PEOPLE_TO_PLAY = """() => {
  const game = document.getElementById("game");
  const li = document.querySelector("#seats li[data-to-act=true]");
  return Number(game.dataset.trick) >= 1
      || (game.dataset.phase === "PLAYING" && !!li && Number(li.dataset.seat) <= 1);
}"""
MUST_ACT = "() => document.getElementById('game').dataset.mustAct === 'true'"
NEXT_TURN = """(s) => {
  const game = document.getElementById("game");
  return Number(game.dataset.sequence) > s
      && (game.dataset.mustAct === "true" || game.dataset.phase === "GAME_OVER");
}"""
# Texts the page always holds (its header, the moon dialog) that name a card as a rule.
STATIC_PHRASES = ("avoid the hearts and the queen of spades",
                  "You took every heart and the queen of spades")
RANKS = {"two": "2", "three": "3", "four": "4", "five": "5", "six": "6", "seven": "7",
         "eight": "8", "nine": "9", "ten": "10", "jack": "J", "queen": "Q", "king": "K",
         "ace": "A"}
SUITS = {"clubs": "C", "diamonds": "D", "spades": "S", "hearts": "H",
         "♣": "C", "♦": "D", "♠": "S", "♥": "H"}
CARD_MENTIONS = [
    re.compile(r"(?<![\w-])(10|[2-9JQKA])([CDSH])(?![\w-])"),  # the text form, QS
    re.compile(r"(?<![\w-])(10|[2-9JQKA])([♣♦♠♥])"),  # as the page writes them, Q♠
    re.compile(r"\b(two|three|four|five|six|seven|eight|nine|ten|jack|queen|king|ace) of "
               r"(clubs|diamonds|spades|hearts)\b", re.IGNORECASE),  # for screen readers
]
CODE_WORDS = re.compile(r"\b[A-Z]{2,}_[A-Z_]+\b")  # MUST_FOLLOW_SUIT, FAILED_PRECONDITION




async def open_page(launched: Any, url: str, device: dict[str, Any] | None = None,
                    **options: Any) -> Any:
    """A page in a context of its own (its own storage, like another person's browser)."""
    context = await launched.new_context(**{"reduced_motion": "reduce", **(device or LAPTOP),
                                            **options})
    page = await context.new_page()
    page.set_default_timeout(20_000)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(f"{error}: {error.stack}"))
    page.errors = errors
    await page.add_init_script(RECORD_RESPONSES)
    await page.goto(url)
    return page


async def screenshot(page: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


# ----------------------------------------------------------------- what the page received

def _envelopes(body: bytes) -> Iterator[bytes]:
    """The messages of a Connect stream (5-byte headers), without the end-of-stream one."""
    at = 0
    while at + 5 <= len(body):
        flags, size = body[at], int.from_bytes(body[at + 1:at + 5], "big")
        if at + 5 + size > len(body):
            return  # a stream the page stopped in the middle of a message
        payload = body[at + 5:at + 5 + size]
        at += 5 + size
        if flags & 0x02:
            end = json.loads(payload or b"{}")
            assert "error" not in end or end["error"]["code"] == "canceled", end
            continue
        yield payload


def received_messages(wire: list[dict[str, Any]]) -> list[Message]:
    """Every copas.v1 response message the page got, decoded as its method's response."""
    messages: list[Message] = []
    for entry in wire:
        method = SERVICE.methods_by_name[entry["url"].rsplit("/", 1)[1]]
        response = message_factory.GetMessageClass(method.output_type)
        body = b"".join(base64.b64decode(chunk) for chunk in entry["chunks"])
        if entry["type"].startswith("application/connect+proto"):
            messages += [response.FromString(p) for p in _envelopes(body)]
        elif entry["type"].startswith("application/proto"):
            messages.append(response.FromString(body))
        else:  # an error (JSON): nothing of a table in it
            assert entry["type"].startswith("application/json"), entry["type"]
    return messages


def cards_in(message: Message, path: str = "") -> Iterator[tuple[str, str]]:
    """(path, card text) for every Card anywhere in ``message``."""
    for descriptor, value in message.ListFields():
        if descriptor.message_type is None:
            continue
        here = f"{path}.{descriptor.name}" if path else descriptor.name
        items = value if descriptor.is_repeated else [value]
        for item in items:
            if descriptor.message_type.full_name == "copas.v1.Card":
                yield here, item.text
            else:
                yield from cards_in(item, here)


def table_events(messages: list[Message]) -> Iterator[copas_pb2.TableEvent]:
    """Every table event in the order the page learnt of it: a snapshot's missed events
    (public parts only) before the snapshot itself."""
    for m in messages:
        if isinstance(m, copas_pb2.WatchTableResponse):
            for event in m.batch.events if m.HasField("batch") else [m.event]:  # issue 29
                if event.HasField("snapshot"):
                    yield from event.snapshot.missed_events
                yield event


@dataclass
class Truth:
    """From the finished game's record, replayed: the cards one seat held in each hand (dealt
    and received), and every card played per hand, in order."""

    seat: int | None
    held: dict[int, set[str]] = field(default_factory=dict)
    plays: dict[int, list[tuple[int, str]]] = field(default_factory=dict)

    @classmethod
    def of(cls, record_json: str, seat: int | None) -> Truth:
        data = json.loads(record_json)
        truth = cls(seat)
        game = Game(replay(data).rules, data["seed"])
        truth.note(game)
        for action in replay(data).actions:
            if isinstance(action, PlayCard):
                truth.plays.setdefault(game.hand_number, []).append((action.seat, str(action.card)))
            game.apply(action)
            truth.note(game)
        return truth

    def note(self, game: Game) -> None:
        if self.seat is not None and game.hand_number >= 0:
            self.held.setdefault(game.hand_number, set()).update(
                str(c) for c in cards_of(game.hands[self.seat]))


def pairs(trick: copas_pb2.Trick) -> list[tuple[int, str]]:
    return [(c.seat, c.card.text) for c in trick.cards]


def is_slice(part: list[Any], whole: list[Any], step: int = 1) -> bool:
    """``part`` appears in ``whole`` in one piece, starting at a multiple of ``step``."""
    return any(whole[i:i + len(part)] == part for i in range(0, len(whole) - len(part) + 1, step))


def check_messages(messages: list[Message], truth: Truth, players: int = 4) -> int:
    """No message holds a card of another seat: private fields only in this seat's own view
    and only with cards it held; public cards only as the plays they were, trick by trick;
    no card at all in any other response (lobby, tables, joins, moves). Returns how many
    table events were checked."""
    for m in messages:
        if not isinstance(m, copas_pb2.WatchTableResponse):
            assert not list(cards_in(m)), m
    hand: int | None = None
    seen: dict[int, list[tuple[int, str]]] = {}
    events = list(table_events(messages))
    for event in events:
        view = event.view
        kind = event.WhichOneof("kind")
        if event.HasField("view"):
            assert view.HasField("seat") == (truth.seat is not None)
            assert truth.seat is None or view.seat == truth.seat
        if kind == "snapshot":
            hand = view.hand_number
        elif kind == "hand_started":
            hand = event.hand_started.hand_number
        elif kind == "card_played":
            assert hand is not None
            seen.setdefault(hand, []).append((event.card_played.seat, event.card_played.card.text))
        elif kind == "trick_won":
            assert hand is not None
            assert is_slice(pairs(event.trick_won.trick), truth.plays[hand], players)
        if view.trick.cards:
            assert is_slice(pairs(view.trick), truth.plays[view.hand_number], players)
        if view.last_trick.cards:
            assert any(is_slice(pairs(view.last_trick), truth.plays.get(h, []), players)
                       for h in (view.hand_number, view.hand_number - 1))
        own = copas_pb2.TableEvent()
        own.CopyFrom(event)
        own.ClearField("snapshot")  # its missed events are checked one by one
        for path, text in cards_in(own):
            if path.rsplit(".", 1)[-1] in PRIVATE:
                assert path.startswith("view."), path  # only in a view, never in an event
                assert truth.seat is not None, f"a spectator got {text} in {path}"
                assert text in truth.held[view.hand_number], f"{text} in {path} is not ours"
            else:
                assert path in PUBLIC_CARDS, path
    for number, made in seen.items():  # every play the page saw, in the order it was made
        assert is_slice(made, truth.plays[number]), number
    return len(events)


# ----------------------------------------------------------------- what the page shows

@dataclass
class Seen:
    """What the page received, read back: its latest view and the public facts of the hand
    in progress (the cards played so far, the point cards each seat won)."""

    view: copas_pb2.TableView
    played: set[str]
    won: dict[int, set[str]]

    @classmethod
    def of(cls, wire: list[dict[str, Any]]) -> Seen:
        events = list(table_events(received_messages(wire)))
        view = [e.view for e in events if e.HasField("view")][-1]
        hand, played, won = None, set(), {}
        for event in events:
            kind = event.WhichOneof("kind")
            if kind == "hand_started":
                hand, played, won = event.hand_started.hand_number, set(), {}
            elif kind == "snapshot" and hand != event.view.hand_number:
                hand, played, won = event.view.hand_number, set(), {}
            if hand != view.hand_number:
                continue
            if kind == "card_played":
                played.add(event.card_played.card.text)
            elif kind == "trick_won":
                points = {c.card.text for c in event.trick_won.trick.cards
                          if c.card.text.endswith("H") or c.card.text == "QS"}
                won.setdefault(event.trick_won.winner, set()).update(points)
            if event.HasField("view") and event.view.hand_number == hand:
                played.update(text for _, text in
                              pairs(event.view.trick) + pairs(event.view.last_trick))
        return cls(view, played, won)

    @property
    def ours(self) -> set[str]:
        v = self.view
        return {c.text for c in [*v.hand, *v.received, *v.pass_choice]}


def mentioned_cards(text: str) -> set[str]:
    """Every card named anywhere in ``text`` (HTML: nodes and attributes), in any form."""
    text = html.unescape(text)
    for phrase in STATIC_PHRASES:
        text = text.replace(phrase, "")
    found = set()
    for pattern in CARD_MENTIONS:
        for rank, suit in pattern.findall(text):
            found.add(RANKS.get(rank.lower(), rank.upper()) + SUITS.get(suit.lower(), suit))
    return found


ACCOUNT_TOKENS = {"accessToken", "accessExpireMs", "refreshToken", "refreshExpireMs", "method"}


def check_storage(storage: dict[str, str]) -> None:
    """The page stores its seat (the token, which a reload needs, and when its quick match
    seated it, which its wait counts from), the name, the device's
    secret (43 base64url characters), its account's tokens and whether the "your turn" sound
    is on, nothing else, and no card."""
    assert set(storage) <= {"session:copas.session", "local:copas.name", "local:copas.device",
                            "local:copas.account", "local:copas.sound"}, storage
    for key, value in storage.items():
        if key == "session:copas.session":
            session = json.loads(value)
            assert set(session) <= {"tableId", "token", "seat", "quickSince"}, session
            assert isinstance(session.get("quickSince", 0), int), session
            session.pop("token", None)
            value = json.dumps(session)
        elif key == "local:copas.device":
            assert re.fullmatch(r"[A-Za-z0-9_-]{43}", value), "not 32 random bytes"
            continue
        elif key == "local:copas.sound":
            assert value in ("on", "off"), value
        elif key == "local:copas.account":
            tokens = json.loads(value)
            assert set(tokens) == ACCOUNT_TOKENS, tokens
            value = tokens["method"]
        assert not mentioned_cards(value), (key, value)


def check_page(state: dict[str, Any]) -> Seen:
    """The DOM shows what the latest view holds, where it belongs: this seat's hand (its
    received cards marked), its pass, the trick, the point cards each seat won, the hearts
    broken; and no other card anywhere: not in any node, attribute or storage."""
    seen = Seen.of(state["wire"])
    latest = seen.view
    shown = state["cards"]
    assert sorted(c["card"] for c in shown if c["where"] == "hand") == sorted(
        c.text for c in latest.hand)
    assert {c["card"] for c in shown if c["where"] == "passed"} <= {
        c.text for c in latest.pass_choice}
    assert {c["card"] for c in shown if c["where"] == "table"} <= {
        text for _, text in pairs(latest.trick) + pairs(latest.last_trick)}
    assert not [c for c in shown if c["where"] == "elsewhere"], shown
    assert set(state["received"]) == {c.text for c in latest.received} & {
        c.text for c in latest.hand}
    for seat, cards in state["taken"]:
        assert set(cards) == seen.won.get(seat, set()) or not cards, (seat, cards, seen.won)
    if state["queen"] is not None:
        assert "QS" in seen.won.get(int(state["queen"]), set())
    if state["heartsBroken"] is not None:
        assert state["heartsBroken"] == str(latest.hearts_broken).lower()
    others = mentioned_cards(state["html"]) - seen.ours - seen.played
    assert not others, f"the page names cards it may not know: {others}"
    check_storage(state["storage"])
    return seen


def check_turn(state: dict[str, Any], seen: Seen) -> None:
    """Our turn as the page shows it: the legal cards lifted and the others dim with a
    reason, our seat marked with its clock, the live countdown, the pass's arrow."""
    view = seen.view
    assert not state["error"], state["error"]  # the last move was accepted
    if state["phase"] == "MOON_CHOICE":  # we shot the moon (a lobby's deal is random)
        assert view.moon_choices and view.seat in state["toAct"]
        return
    assert state["legal"], "it is our turn, yet no card is marked legal"
    assert state["seconds"] is not None and 0 < state["seconds"] <= 120  # the live countdown
    assert view.seat in state["toAct"] and state["clocks"] >= 1
    if state["phase"] == "PLAYING":
        assert sorted(state["legal"]) == sorted(c.text for c in view.legal_cards)
        assert sorted(state["lifted"]) == sorted(state["legal"])
        assert len(state["dim"]) == len(view.hand) - len(view.legal_cards)
        assert all(d["title"] for d in state["dim"]), state["dim"]
    elif state["phase"] == "PASSING":
        offset = {"left": 1, "right": -1, "across": 2}[state["direction"]]
        target = (view.seat + offset) % 4
        assert state["passShown"] and int(state["receiver"]["seat"]) == target
        assert state["passTo"] == state["receiver"]["pos"] == {
            "left": "left", "right": "right", "across": "top"}[state["direction"]]


async def state_of(page: Any) -> dict[str, Any]:
    return await page.evaluate(PAGE_STATE)


async def wire_of(page: Any) -> list[Message]:
    return received_messages(await page.evaluate("() => window.__copasWire"))


async def press(page: Any, selector: str, *, tap: bool = False) -> None:
    await (page.tap(selector) if tap else page.click(selector))


async def take_turn(page: Any, state: dict[str, Any], *, tap: bool = False,
                    before_last_pass_card: Any = None) -> None:
    """Play as a person would: the first legal cards, the pass button, the moon choice."""
    phase, legal = state["phase"], state["legal"]
    if phase == "PASSING":
        for i, text in enumerate(legal[:3]):
            if i == 2 and before_last_pass_card:
                await before_last_pass_card()
            await press(page, f'#hand button[data-card="{text}"]', tap=tap)
        await press(page, "#pass-button", tap=tap)
    elif phase == "PLAYING":
        await press(page, f'#hand button[data-card="{legal[0]}"]', tap=tap)
    else:
        assert phase == "MOON_CHOICE"
        await press(page, "#moon button", tap=tap)


async def create_through_the_lobby(page: Any, name: str, preset: str, *, tap: bool = False,
                                   friends: int = 0) -> str:
    """A table made with the lobby's form (the relaxed clock); returns its id."""
    await page.fill("#name", name)
    await page.select_option("#preset", preset)
    await page.select_option("#clock", "relaxed")
    if friends:
        await page.select_option("#friends", str(friends))
        await press(page, "#create-friends", tap=tap)
    else:
        await press(page, "#create", tap=tap)
    await page.wait_for_selector("#game:not([hidden])[data-phase]:not([data-phase=''])")
    return str(await page.get_attribute("#game", "data-table"))


async def sheet_of(page: Any, selector: str) -> list[tuple[int, list[int], int | None]]:
    """A score sheet as the page shows it: per hand, each seat's points and the moon's
    shooter (marked)."""
    rows = await page.eval_on_selector_all(
        f"{selector} tbody tr[data-hand]",
        """rows => rows.map(r => [Number(r.dataset.hand),
            Array.from(r.querySelectorAll("td"), td => Number(td.dataset.points)),
            Array.from(r.querySelectorAll("td"), td => td.dataset.moon === "true")])""")
    return [(hand, points, next((s for s, m in enumerate(moons) if m), None))
            for hand, points, moons in rows]


async def look_at_the_last_trick(page: Any, seen: Seen, *, tap: bool) -> None:
    """The last trick on demand: its four cards by who played them and who took it, as the
    server's view has it; closed, the dialog keeps no card."""
    await press(page, "#show-last-trick", tap=tap)
    await page.wait_for_selector("#last-trick-dialog[open] #last-trick [data-card]")
    shown = await page.eval_on_selector_all(
        "#last-trick li", "items => items.map(i => [Number(i.dataset.seat),"
        " i.querySelector('[data-card]').dataset.card])")
    assert shown == [[c.seat, c.card.text] for c in seen.view.last_trick.cards]
    winner = await page.get_attribute("#last-trick .last-trick-winner", "data-winner")
    assert winner == str(seen.view.last_trick_winner)
    check_page(await state_of(page))
    await press(page, "#last-trick-dialog button.close", tap=tap)
    await page.wait_for_selector("#last-trick-dialog:not([open])", state="attached")
    assert not await page.eval_on_selector_all("#last-trick *", "nodes => nodes.length")


async def look_at_the_score_sheet(page: Any, *, tap: bool) -> None:
    """The score sheet one tap away: every hand scored so far, as the HandScored events the
    page received say."""
    await press(page, "#show-sheet", tap=tap)
    await page.wait_for_selector("#sheet-dialog[open] #sheet-table")
    scored = {}
    for event in table_events(await wire_of(page)):
        if event.WhichOneof("kind") == "hand_scored":
            hand = event.hand_scored
            scored[hand.hand_number] = (hand.hand_number, list(hand.points), hand.moon_shooter
                                        if hand.HasField("moon_shooter") else None)
    assert scored and await sheet_of(page, "#sheet-table") == [scored[n] for n in sorted(scored)]
    await press(page, "#sheet-dialog button.close", tap=tap)
    await page.wait_for_selector("#sheet-dialog:not([open])", state="attached")


def check_hand_boxes(records: list[dict[str, Any]]) -> None:
    """Between two changes of the trick that leave the hand as it was (another seat played,
    the trick was taken), not one of its cards moved or changed size on the page."""
    compared = 0
    for before, after in itertools.pairwise(records):
        if before["cards"] == after["cards"] and before["mode"] == after["mode"] == "waiting":
            assert before["boxes"] == after["boxes"], (
                before["at"], after["at"], before["trickCards"], after["trickCards"],
                before["layout"], after["layout"],
                [(b, a) for b, a in zip(before["boxes"], after["boxes"], strict=True) if b != a])
            compared += 1
    assert compared >= 20, compared


def check_bot_pace(messages: list[Message], seat: int, pace: float, hands: int) -> None:
    """By the server's own clock (the events' times), each bot's card came at least the
    table's pace after the event before it: one by one, never at once."""
    events = {e.sequence: e for e in table_events(messages)
              if e.WhichOneof("kind") not in ("snapshot", "player_connection")}
    ordered = [events[s] for s in sorted(events)]
    bot_cards = 0
    for before, event in itertools.pairwise(ordered):
        if event.WhichOneof("kind") == "card_played" and event.card_played.seat != seat:
            gap = event.time.ToNanoseconds() - before.time.ToNanoseconds()
            assert gap >= pace * 1e9 * 0.999, (before, event)
            bot_cards += 1
    assert bot_cards >= 39 * hands - 5, bot_cards  # (snapshots may start after a few)


# ----------------------------------------------------------------- whole games

@pytest.mark.parametrize("device", ["laptop", "phone"])
async def test_a_whole_game_by_clicks_or_taps_with_the_table_drawn_as_one(device: str) -> None:
    """On a 1280 px laptop by clicks, four hands watched by a spectator; on a 390 px phone by
    taps, one hand (its summary is the last hand's, before the standings: a longer pause).
    Every turn is checked (what is lifted, dim, marked, where the pass goes, what is shown),
    and every moment photographed: the lobby, a pass, a trick, a hand's summary, the end."""
    is_phone = device == "phone"
    width = 390 if is_phone else 1280
    preset, hands = ("quick", 1) if is_phone else ("online", 4)
    timing = {**TIMING, "hand_pause": 4.0} if is_phone else TIMING
    port = free_port()
    async with (serving(web_port=port, web_host="127.0.0.1", rule_defaults=timing,
                        allow_seed=True, bot_pace=BOT_PACE) as (_, stub),
                browser() as launched):
        url = f"http://127.0.0.1:{port}/"
        waiting = await new_table(stub, bots=2, seed=None)  # someone else's, in the lobby
        player = await open_page(launched, url, PHONE if is_phone else LAPTOP)
        await player.wait_for_selector(
            f'#tables[data-live=true] tr[data-table="{waiting.table_id}"]')
        await screenshot(player, f"lobby-{width}")
        if is_phone:  # nothing wider than the phone, and cards big enough for a finger
            assert await player.evaluate("() => document.documentElement.scrollWidth") <= width
        table_id = await create_through_the_lobby(player, "Ana", preset, tap=is_phone)
        assert ("One hand" if is_phone else "Four hands") in (
            await player.text_content("#game-info") or "")
        await player.evaluate(WATCH_HAND)

        spectator = None
        if not is_phone:
            spectator = await open_page(launched, url)
            await spectator.click(f'#tables tr[data-table="{table_id}"] button:text("Watch")')
            await spectator.wait_for_selector("#seats li")

        await player.wait_for_function(NEXT_TURN, arg=-1)
        if is_phone:
            # Found and measured in one evaluation: eval_on_selector_all queries, then calls
            # its function in a second step, and a render between them measures the detached
            # cards it replaced (zero boxes, seen beside busy processes).
            boxes = await player.evaluate(
                """() => Array.from(document.querySelectorAll("#hand button"), (b) => {
                  const r = b.getBoundingClientRect(); return {width: r.width, height: r.height};
                })""")
            assert boxes, "no card in the hand"
            assert all(b["width"] >= 44 and b["height"] >= 44 for b in boxes), boxes
            assert await player.evaluate("() => document.documentElement.scrollWidth") <= width
        turns, shots = 0, {"passing", "trick", "summary"}
        looks = {"last trick", "sheet"} if hands > 1 else {"last trick"}  # (one: at the end)
        while (state := await state_of(player))["phase"] != "GAME_OVER":
            if not state["mustAct"]:  # a hand's summary is on the table, for its pause
                assert "scored" in (await player.text_content("#hand-score") or "")
                if not await player.is_hidden("#hand-score"):
                    await screenshot(player, f"hand-summary-{width}")
                    if not await player.is_hidden("#hand-score"):  # (else: the next hand's)
                        shots.discard("summary")
                await player.wait_for_function(NEXT_TURN, arg=state["sequence"] - 1)
                continue
            seen = check_page(state)
            check_turn(state, seen)
            if "last trick" in looks and state["phase"] == "PLAYING" and len(
                    seen.view.last_trick.cards) == 4:
                await look_at_the_last_trick(player, seen, tap=is_phone)
                looks.discard("last trick")
            if "sheet" in looks and seen.view.hand_number >= 1:
                await look_at_the_score_sheet(player, tap=is_phone)
                looks.discard("sheet")
            # A trick under way, with dimmed cards when the deal gives one (the phone's one
            # hand, dealt at random through the lobby, may give no turn with both).
            if "trick" in shots and state["phase"] == "PLAYING" and (
                    state["dim"] or is_phone) and len(
                    [c for c in state["cards"] if c["where"] == "table"]) >= 2:
                await screenshot(player, f"trick-{width}")
                shots.discard("trick")

            async def photograph_pass() -> None:
                if "passing" in shots:
                    await screenshot(player, f"passing-{width}")
                    shots.discard("passing")

            await take_turn(player, state, tap=is_phone, before_last_pass_card=photograph_pass)
            await player.wait_for_function(NEXT_MOMENT, arg=[state["sequence"], "summary" in shots])
            turns += 1
            if spectator is not None and turns % 10 == 0:
                check_page(await state_of(spectator))
        check_page(state)
        # The last hand's summary comes first (the game ends without a hand pause), then
        # the standings, with every hand's points on the score sheet.
        assert "scored" in (await player.text_content("#hand-score") or "")
        assert await player.is_hidden("#standings")
        if "summary" in shots and not await player.is_hidden("#hand-score"):
            await screenshot(player, f"hand-summary-{width}")
            shots.discard("summary")
        assert turns >= 13 and not state["error"] and not shots and not looks, (shots, looks)
        await player.wait_for_selector("#standings:not([hidden]) #final-standings tbody tr")
        if hands == 1:  # the sheet, one tap away on the final screen too
            await look_at_the_score_sheet(player, tap=is_phone)
        await screenshot(player, f"game-over-{width}")
        title = await player.text_content("#result-title") or ""
        assert re.fullmatch(r"You (won!|share \d(st|nd|rd|th) place!?|finished \d(st|nd|rd|th))",
                            title), title
        rows = await player.eval_on_selector_all(
            "#final-standings tbody tr", "rows => rows.map(r => r.dataset)")
        assert len(rows) == 4 and any(r["winner"] == "true" for r in rows)
        assert all((r["place"] == "1") == (r["winner"] == "true") for r in rows)
        assert await player.is_visible("#again")
        check_hand_boxes(await player.evaluate("() => window.__handBoxes"))

        if spectator is not None:
            await spectator.wait_for_selector("#standings:not([hidden]) #final-standings tbody tr")
            assert not await spectator.eval_on_selector_all(
                "#hand [data-card], #pass-direction [data-card]", "cards => cards.length")
            winner = await spectator.text_content("#result-title") or ""
            assert re.search(r"wins|share the win", winner), winner
            check_page(await state_of(spectator))
            assert spectator.errors == []

        record = (await stub.GetGameRecord(copas_pb2.GetGameRecordRequest(
            record_id=table_id))).record
        seat = next(s.seat for s in record.seats if s.display_name == "Ana")
        assert check_messages(await wire_of(player), Truth.of(record.record_json, seat)) > 50
        assert await sheet_of(player, "#final-sheet") == [
            (h.hand_number, list(h.points), h.moon_shooter if h.HasField("moon_shooter")
             else None) for h in record.hands]
        check_bot_pace(await wire_of(player), seat, BOT_PACE, hands)
        if spectator is not None:
            assert check_messages(await wire_of(spectator),
                                  Truth.of(record.record_json, None)) > 50

        # "Play again": a new table of the same kind, at once.
        await press(player, "#again", tap=is_phone)
        await player.wait_for_function(
            "(old) => { const g = document.getElementById('game');"
            " return g.dataset.table && g.dataset.table !== old"
            " && g.dataset.phase === 'PASSING'; }",
            arg=table_id)
        assert player.errors == []


# ----------------------------------------------------------------- people together

async def test_friends_join_through_a_shared_link_and_a_reload_keeps_the_seat() -> None:
    port = free_port()
    async with (serving(web_port=port, web_host="127.0.0.1", rule_defaults=TIMING)
                as (_, stub), browser() as launched):
        url = f"http://127.0.0.1:{port}/"
        ana = await open_page(launched, url)
        table_id = await create_through_the_lobby(ana, "Ana", "quick", friends=1)
        await ana.wait_for_selector("#share:not([hidden])")
        link = await ana.input_value("#share-link")
        assert link == f"{url}?join={table_id}"
        assert "Waiting for 1 more player" in (await ana.text_content("#share-text") or "")

        bea = await open_page(launched, link)
        await bea.wait_for_selector("#invite:not([hidden]) #invite-join:not([disabled])")
        assert "Ana invites you" in (await bea.text_content("#invite-text") or "")
        await bea.fill("#name", "Bea")
        await bea.click("#invite-join")
        for page in (ana, bea):
            await page.wait_for_function(NEXT_TURN, arg=-1)
            assert await page.evaluate("() => location.search") == ""
        ana_state, bea_state = await state_of(ana), await state_of(bea)
        # Each sees the table from their own seat: Bea (seat 1) on Ana's left, Ana on Bea's right.
        assert ana_state["you"] == "0" and ana_state["positions"] == {
            "0": "bottom", "1": "left", "2": "top", "3": "right"}
        assert bea_state["you"] == "1" and bea_state["positions"]["0"] == "right"
        for state in (ana_state, bea_state):
            check_turn(state, check_page(state))

        await bea.reload()  # the same seat, the same cards
        await bea.wait_for_function(NEXT_TURN, arg=-1)
        again = await state_of(bea)
        assert again["you"] == "1" and sorted(
            c["card"] for c in again["cards"] if c["where"] == "hand") == sorted(
            c["card"] for c in bea_state["cards"] if c["where"] == "hand")

        # Both pass, then each plays when Ana's page shows their seat to act, until the first
        # trick is won.
        for page, state in ((ana, ana_state), (bea, again)):
            await take_turn(page, state)
        while True:
            await ana.wait_for_function(PEOPLE_TO_PLAY)
            if int(await ana.get_attribute("#game", "data-trick") or 0) >= 1:
                break
            seat = int(await ana.get_attribute("#seats li[data-to-act=true]", "data-seat") or 0)
            page = (ana, bea)[seat]
            await page.wait_for_function(MUST_ACT)
            state = await state_of(page)
            check_turn(state, check_page(state))
            await take_turn(page, state)
            await ana.wait_for_function(
                "(s) => { const li = document.querySelector('#seats li[data-to-act=true]');"
                " return Number(document.getElementById('game').dataset.trick) >= 1"
                " || !li || Number(li.dataset.seat) !== s; }", arg=seat)
        for page in (ana, bea):
            check_page(await state_of(page))
            assert page.errors == []
        summary = (await stub.GetTable(copas_pb2.GetTableRequest(table_id=table_id))).table
        assert [s.display_name for s in summary.seats[:2]] == ["Ana", "Bea"]


async def test_the_lobby_follows_other_clients_and_quick_match_seats_people_together() -> None:
    port = free_port()
    async with (serving(web_port=port, web_host="127.0.0.1", rule_defaults=TIMING)
                as (_, stub), browser() as launched):
        url = f"http://127.0.0.1:{port}/"
        lobby = await open_page(launched, url)
        await lobby.wait_for_selector("#tables[data-live=true]")

        # Another client opens a table: it appears, then fills, without a click here.
        table = await new_table(stub, bots=2, seed=None)
        row = f'#tables tr[data-table="{table.table_id}"]'
        await lobby.wait_for_selector(f'{row}[data-phase="WAITING_FOR_PLAYERS"]')
        assert "waiting for 2 players" in (await lobby.text_content(f"{row} .status") or "")
        assert "Four hands" in (await lobby.text_content(row) or "")  # the preset by its name
        await join_all(stub, table.table_id, 2)
        await lobby.wait_for_selector(f'{row}:not([data-phase="WAITING_FOR_PLAYERS"])')
        assert "Join" not in (await lobby.text_content(row) or "")

        # Quick match: Cid gets a new table of its kind; the lobby shows it; Dee joins it
        # from the list; Eve's quick match seats her at the same table.
        cid = await open_page(launched, url)
        await cid.fill("#name", "Cid")
        await cid.select_option("#preset", "quick")
        await cid.click("#quick-match")
        await cid.wait_for_selector("#game:not([hidden])[data-phase=WAITING_FOR_PLAYERS]")
        quick = str(await cid.get_attribute("#game", "data-table"))
        assert await cid.text_content("#game-title") == "Quick match"  # a name, not its id
        info = (await cid.text_content("#game-info") or "").lower()
        assert info.count("one hand") == 1, info  # not "One hand · one hand"
        await lobby.wait_for_selector(f'#tables tr[data-table="{quick}"]')
        assert "One hand" in (await lobby.text_content(f'#tables tr[data-table="{quick}"]') or "")
        await lobby.fill("#name", "Dee")
        await lobby.click(f'#tables tr[data-table="{quick}"] button:text("Join")')
        await lobby.wait_for_selector("#game:not([hidden])[data-phase=WAITING_FOR_PLAYERS]")
        assert await lobby.get_attribute("#game", "data-table") == quick
        eve = await open_page(launched, url)
        await eve.fill("#name", "Eve")
        await eve.select_option("#preset", "quick")
        await eve.click("#quick-match")
        await eve.wait_for_selector("#game:not([hidden])[data-phase]:not([data-phase=''])")
        assert await eve.get_attribute("#game", "data-table") == quick
        await cid.wait_for_function(
            "() => document.getElementById('share-text').textContent.includes('1 more player')")
        for page in (lobby, cid, eve):
            check_page(await state_of(page))
            assert page.errors == []


async def test_a_refused_name_opens_no_table_and_reads_as_its_reason() -> None:
    """"Play against bots" creates and seats in one request: a name the server keeps for its
    bots opens no table (ListTables before and after), and the page says why in words."""
    port = free_port()
    async with (serving(web_port=port, web_host="127.0.0.1", rule_defaults=TIMING)
                as (_, stub), browser() as launched):
        async def tables() -> set[str]:
            listed = await stub.ListTables(copas_pb2.ListTablesRequest(page_size=100))
            return {t.table_id for t in listed.tables}

        page = await open_page(launched, f"http://127.0.0.1:{port}/")
        await page.wait_for_selector("#tables[data-live=true]")
        await page.wait_for_function(
            "() => document.getElementById('me').dataset.account")  # signed in as a guest
        before = await tables()
        await page.fill("#name", "Bot 7")
        await page.click("#create")
        await page.wait_for_function("() => document.getElementById('lobby-error').textContent")
        error = await page.text_content("#lobby-error") or ""
        assert "kept for the server" in error, error
        assert "special characters" not in error and not CODE_WORDS.search(error)
        assert await page.is_hidden("#game")
        assert await tables() == before, "a refused name left a table behind"
        # The same page, with a name it may take: one request opens the table and seats it.
        await page.fill("#name", "Bea")
        await page.click("#create")
        await page.wait_for_selector("#game:not([hidden])[data-phase=PASSING]")
        table_id = str(await page.get_attribute("#game", "data-table"))
        assert await tables() - before == {table_id}
        names = await page.eval_on_selector_all(
            "#seats li .name > span:first-child", "spans => spans.map(s => s.textContent)")
        assert sorted(names) == ["Basil", "Bea", "Cleo", "Dario"], names
        assert page.errors == []


# Counts, on each change of the trick, the animations running on the table's cards.
COUNT_MOVES = """() => {
  window.__moves = [];
  new MutationObserver(() => {
    window.__moves.push(document.getAnimations().filter((a) => {
      const target = a.effect && a.effect.target;
      return target && target.closest && !!target.closest("#trick, #hand, #pass-direction");
    }).length);
  }).observe(document.getElementById("trick"), { childList: true });
}"""


async def test_played_cards_travel_to_the_trick_unless_motion_is_reduced() -> None:
    """Two spectators of bots playing at a pace: each card glides from its seat to the
    trick on a page that allows motion, and nothing moves on one that asks for less."""
    port = free_port()
    async with (serving(web_port=port, web_host="127.0.0.1", allow_seed=True,
                        bot_table_pace=0.0) as (_, stub), browser() as launched):
        table = await new_table(stub, preset="quick", bots=4, bot_pace_seconds=0.4,
                                trick_pause_seconds=0.6)  # a hand of about 30 s
        url = f"http://127.0.0.1:{port}/?watch={table.table_id}"
        moving = await open_page(launched, url, reduced_motion="no-preference")
        still = await open_page(launched, url)
        for page in (moving, still):
            await page.wait_for_selector("#seats li")
            await page.evaluate(COUNT_MOVES)
        for page in (moving, still):
            await page.wait_for_function("() => window.__moves.length >= 10", timeout=60_000)
        moves = await moving.evaluate("() => window.__moves")
        assert sum(1 for m in moves if m) >= 6, moves  # a card in flight on most plays
        assert not any(await still.evaluate("() => window.__moves"))
        for page in (moving, still):
            check_page(await state_of(page))
            assert page.errors == []


# ----------------------------------------------------------------- the moon, the keyboard

def moon_plan(rules: Rules) -> tuple[str, list[Any]]:
    """A seed (searched deterministically) where seat 0 shoots the moon against the automatic
    bots by passing its three lowest non-hearts and always playing its highest card; the
    seed and seat 0's moves."""
    for i in range(5000):
        seed = f"moon-{i}"
        game, moves = Game(rules, seed), []
        while game.phase.value in ("PASSING", "PLAYING"):
            seats = game.to_act()
            seat = 0 if 0 in seats else seats[0]
            if seat != 0:
                game.apply(game.auto_action(seat), is_automatic=True)
                continue
            legal = list(game.legal_cards(0))
            if game.phase.value == "PASSING":
                lowest = sorted(legal, key=lambda c: (c.suit == 4, c.rank))[:3]
                move: Any = PassCards(0, tuple(lowest))
            else:
                move = PlayCard(0, max(legal, key=lambda c: c.rank))
            moves.append(move)
            game.apply(move)
        if game.phase.value == "MOON_CHOICE" and game.moon_shooter == 0:
            return seed, moves
    raise AssertionError("no seed found")


async def test_the_moon_choice_dialog_on_a_seeded_deal() -> None:
    rules = Rules.preset("quick")  # one hand, the shooter chooses
    seed, moves = moon_plan(rules)
    port = free_port()
    async with (serving(web_port=port, web_host="127.0.0.1", allow_seed=True) as (_, stub),
                browser() as launched):
        table = await new_table(stub, preset="quick", bots=3, seed=seed, **SEEDED)
        page = await open_page(launched, f"http://127.0.0.1:{port}/?join={table.table_id}",
                               bypass_csp=True)  # for axe, below
        await page.fill("#name", "Ana")
        await page.click("#invite-join")
        replica, sequence = Game(rules, seed), -1
        for move in moves:
            await page.wait_for_function(NEXT_TURN, arg=sequence)
            state = await state_of(page)
            sequence = state["sequence"]
            seen = check_page(state)
            check_turn(state, seen)
            while 0 not in replica.to_act():  # the bots' automatic moves, as the server made them
                replica.apply(replica.auto_action(replica.to_act()[0]), is_automatic=True)
            for dim in state["dim"]:  # the page's reason is the engine's
                try:
                    replica.apply(PlayCard(0, card(dim["card"])))
                except IllegalActionError as error:
                    assert dim["reason"] == error.reason.value, (dim, error)
                else:
                    raise AssertionError(f"{dim['card']} is dim yet legal")
            if isinstance(move, PassCards):
                for c in move.cards:
                    await page.click(f'#hand button[data-card="{c}"]')
                await page.click("#pass-button")
            else:
                await page.click(f'#hand button[data-card="{move.card}"]')
            replica.apply(move)
        await page.wait_for_selector("#moon[open] button[data-choice]")
        await screenshot(page, "moon-choice-1280")
        assert await page.evaluate(
            "() => document.getElementById('moon').contains(document.activeElement)")
        choices = await page.eval_on_selector_all(
            "#moon button", "bs => bs.map(b => b.dataset.choice)")
        assert sorted(choices) == ["ADD_TO_OTHERS", "SUBTRACT_FROM_SELF"]
        check_page(await state_of(page))
        assert await axe_violations(page) == []
        await page.click('#moon button[data-choice="ADD_TO_OTHERS"]')
        await page.wait_for_selector("#standings:not([hidden]) #final-standings tbody tr")
        assert await page.text_content("#result-title") == "You won!"
        assert "shot the moon" in (await page.text_content("#standings") or "")
        assert not await page.evaluate("() => document.getElementById('moon').open")
        record = (await stub.GetGameRecord(copas_pb2.GetGameRecordRequest(
            record_id=table.table_id))).record
        assert check_messages(await wire_of(page), Truth.of(record.record_json, 0)) > 20
        assert page.errors == []


async def focus_hand(page: Any) -> None:
    """Tab from wherever the focus is until it lands in the hand (at most 30 presses)."""
    for _ in range(30):
        if await page.evaluate("() => !!document.activeElement.closest('#hand')"):
            return
        await page.keyboard.press("Tab")
    raise AssertionError("Tab never reached the hand")


async def arrow_to(page: Any, text: str) -> None:
    for _ in range(20):
        if await page.evaluate("() => document.activeElement.dataset.card") == text:
            return
        await page.keyboard.press("ArrowRight")
    raise AssertionError(f"the arrows never reached {text}")


async def test_keyboard_only_play_and_a_refusal_in_plain_words() -> None:
    port = free_port()
    async with (serving(web_port=port, web_host="127.0.0.1", allow_seed=True) as (_, stub),
                browser() as launched):
        table = await new_table(stub, preset="quick", bots=3, seed="keys", **SEEDED)
        page = await open_page(launched, f"http://127.0.0.1:{port}/?join={table.table_id}")
        await page.fill("#name", "Kim")
        # (focus does not wait for the invitation to show: Enter would go to the lobby's form)
        await page.wait_for_selector("#invite-join:visible:enabled")
        await page.focus("#invite-join")
        await page.keyboard.press("Enter")
        await page.wait_for_function(NEXT_TURN, arg=-1)

        # The pass by keyboard: Tab into the hand, arrows to a card, Space to choose it.
        state = await state_of(page)
        await focus_hand(page)
        for text in state["legal"][-3:]:
            await arrow_to(page, text)
            await page.keyboard.press("Space")
        chosen = await page.eval_on_selector_all(
            "#hand button[aria-pressed=true]", "bs => bs.map(b => b.dataset.card)")
        assert sorted(chosen) == sorted(state["legal"][-3:])
        for _ in range(20):
            if await page.evaluate("() => document.activeElement.id") == "pass-button":
                break
            await page.keyboard.press("Tab")
        await page.keyboard.press("Enter")

        # One trick by keyboard: Tab lands on a playable card, Enter plays it.
        await page.wait_for_function(NEXT_TURN, arg=state["sequence"])
        state = await state_of(page)
        check_turn(state, check_page(state))
        await focus_hand(page)
        focused = await page.evaluate("() => document.activeElement.dataset.card")
        assert focused in state["legal"]
        await page.keyboard.press("Enter")
        await page.wait_for_function(
            "(c) => Array.from(document.querySelectorAll('#trick [data-card]'))"
            ".some(e => e.dataset.card === c)"
            " || document.getElementById('game').dataset.mustAct === 'true'", arg=focused)
        assert not await page.text_content("#error")

        # A card the page thinks playable, refused by the server (we send a dim one in its
        # place): the refusal reads in words, and the turn is still ours.
        while True:
            await page.wait_for_function(NEXT_TURN, arg=state["sequence"])
            state = await state_of(page)
            assert state["phase"] == "PLAYING"
            follow = [d for d in state["dim"] if d["reason"] == "MUST_FOLLOW_SUIT"]
            if follow:
                break
            await page.click(f'#hand button[data-card="{state["legal"][0]}"]')
        led = Seen.of(state["wire"]).view.trick.cards[0].card.text[-1]
        symbol = {"C": "♣", "D": "♦", "S": "♠", "H": "♥"}[led]
        assert follow[0]["title"] == f"You must follow {symbol}"  # the hint on hover
        # A click on a dim card (aria-disabled, so Playwright must be told to click anyway).
        await page.click(f'#hand button[data-card="{follow[0]["card"]}"]', force=True)
        assert await page.text_content("#hint") == f"You must follow {symbol}."
        assert await page.get_attribute("#game", "data-must-act") == "true"

        async def swap_card(route: Any) -> None:
            request = copas_pb2.PlayCardRequest.FromString(route.request.post_data_buffer)
            request.card.Clear()
            request.card.text = follow[0]["card"]
            await route.continue_(post_data=request.SerializeToString())

        await page.route("**/copas.v1.CopasService/PlayCard", swap_card)
        await page.click(f'#hand button[data-card="{state["legal"][0]}"]')
        await page.wait_for_function("() => document.getElementById('error').textContent")
        error = await page.text_content("#error") or ""
        assert error == f"You must follow {symbol}."
        assert await page.get_attribute("#error", "data-reason") == "MUST_FOLLOW_SUIT"
        assert not CODE_WORDS.search(error) and not CARD_MENTIONS[0].search(error)
        await page.wait_for_function(MUST_ACT)
        await page.unroute("**/copas.v1.CopasService/PlayCard")
        await page.click(f'#hand button[data-card="{state["legal"][0]}"]')
        await page.wait_for_function("() => !document.getElementById('error').textContent")
        check_page(await state_of(page))
        # Nothing was applied twice or wrongly: the server's view of our seat agrees.
        session = await page.evaluate("() => sessionStorage.getItem('copas.session')")
        token = json.loads(session)["token"]
        view = (await stub.GetView(copas_pb2.GetViewRequest(table_id=table.table_id),
                                   metadata=auth(token))).view
        assert follow[0]["card"] in {c.text for c in view.hand}
        assert state["legal"][0] not in {c.text for c in view.hand}
        assert page.errors == []


async def test_the_your_turn_sound_is_off_at_first_and_remembered() -> None:
    port = free_port()
    async with (serving(web_port=port, web_host="127.0.0.1", allow_seed=True) as (_, stub),
                browser() as launched):
        table = await new_table(stub, preset="quick", bots=3, seed="sound", **SEEDED)
        page = await open_page(launched, f"http://127.0.0.1:{port}/?join={table.table_id}")
        await page.fill("#name", "Lou")
        await page.click("#invite-join")
        await page.wait_for_function(NEXT_TURN, arg=-1)
        assert await page.get_attribute("#sound", "aria-pressed") == "false"
        assert await page.get_attribute("#game", "data-beeps") is None  # our turn, silent
        await page.click("#sound")  # on: a tone says so
        assert await page.get_attribute("#sound", "aria-pressed") == "true"
        assert await page.get_attribute("#game", "data-beeps") == "1"
        state = await state_of(page)
        await take_turn(page, state)
        await page.wait_for_function(NEXT_TURN, arg=state["sequence"])
        assert int(await page.get_attribute("#game", "data-beeps") or 0) == 2  # the next turn
        await page.reload()
        await page.wait_for_selector("#seats li")
        assert await page.get_attribute("#sound", "aria-pressed") == "true"  # remembered
        check_page(await state_of(page))
        assert page.errors == []


# ----------------------------------------------------------------- an account that comes back

async def play_to_the_end(page: Any) -> None:
    """Every turn of the game the page is seated at (the first legal cards), to its end."""
    await page.wait_for_function(NEXT_TURN, arg=-1)
    while (state := await state_of(page))["phase"] != "GAME_OVER":
        if state["mustAct"]:
            await take_turn(page, state)
        await page.wait_for_function(NEXT_TURN, arg=state["sequence"])


async def test_a_guest_comes_back_to_its_name_history_and_rating_and_signs_in_elsewhere() -> None:
    """A first visit signs in as a guest without a question; the guest renames itself and
    plays three one-hand games against bots; the browser closes and comes back (the same
    storage): the same name, three games in its history, its rating. It sets a password;
    another browser signs in with it and sees the same account. Tokens stay in
    localStorage: never in the URL, the page's text or its attributes."""
    port = free_port()
    async with (serving(web_port=port, web_host="127.0.0.1", rule_defaults=TIMING)
                as (_, stub), browser() as launched):
        url = f"http://127.0.0.1:{port}/"
        page = await open_page(launched, url)
        await page.wait_for_selector("#me[data-account^=a_]")
        account_id = await page.get_attribute("#me", "data-account")
        assert "guest" in (await page.text_content("#me-status") or "")
        for game in range(3):
            table = (await stub.CreateTable(copas_pb2.CreateTableRequest(  # one hand, as
                preset="quick", bot_seats=3))).table  # the page's own: with bots, not rated
            await page.goto(f"{url}?join={table.table_id}")
            await page.wait_for_selector("#invite-join:not([disabled])")
            if game == 0:  # once the page shows the guest's own name (its profile is in)
                await page.wait_for_function("document.querySelector('#name').value !== ''")
                await page.fill("#name", "Gus")  # renames the account as it joins
            await page.click("#invite-join")
            await play_to_the_end(page)
            summary = (await stub.GetTable(copas_pb2.GetTableRequest(
                table_id=table.table_id))).table
            assert "Gus" in [s.display_name for s in summary.seats], summary.seats
            check_page(await state_of(page))
        storage = await page.context.storage_state()
        assert page.errors == []
        await page.context.close()

        again = await open_page(launched, url, storage_state=storage)  # the same browser
        for _ in range(20):  # finished games reach the history within about a second
            await again.wait_for_selector("#me[data-games]")
            if await again.get_attribute("#me", "data-games") == "3":
                break
            await again.wait_for_timeout(250)
            await again.reload()
        assert await again.get_attribute("#me", "data-account") == account_id
        assert await again.get_attribute("#me", "data-games") == "3"
        assert await again.text_content("#me-title") == "Gus"
        assert await again.input_value("#name") == "Gus"
        assert len(await again.query_selector_all("#my-games li[data-record]")) == 3
        # Games against bots are in the history but rate nothing (RULES.md, "Rated games").
        assert await again.get_attribute("#me-rating", "data-rated-games") == "0"
        assert "no rated game yet" in (await again.text_content("#me-rating") or "")
        for line in await again.query_selector_all("#my-games li[data-record]"):
            assert "not rated" in (await line.text_content() or "")
        state = await state_of(again)
        check_storage(state["storage"])
        tokens = json.loads(state["storage"]["local:copas.account"])
        for secret in (tokens["accessToken"], tokens["refreshToken"],
                       state["storage"]["local:copas.device"]):
            assert secret not in state["html"] and secret not in again.url

        await again.fill("#link-username", "gus.plays")
        await again.fill("#link-password", "short")
        await again.click("#link-button")  # the browser's own check: too short
        assert await again.is_visible("#password-form")
        await again.fill("#link-password", "a long enough password")
        await again.click("#link-button")
        await again.wait_for_selector("#password-form[hidden]", state="attached")

        other = await open_page(launched, url)  # another browser: a guest of its own first
        await other.wait_for_selector("#me[data-account^=a_]")
        assert await other.get_attribute("#me", "data-account") != account_id
        await other.fill("#sign-in-username", "gus.plays")
        await other.fill("#sign-in-password", "not the password")
        await other.click("#sign-in-button")
        await other.wait_for_selector("#me-error[data-reason=INVALID_CREDENTIALS]")
        assert "do not match" in (await other.text_content("#me-error") or "")
        await other.fill("#sign-in-password", "a long enough password")
        await other.click("#sign-in-button")
        await other.wait_for_selector(f"#me[data-account={account_id}]")
        assert await other.text_content("#me-title") == "Gus"
        assert "signed in as gus.plays" in (await other.text_content("#me-status") or "")
        assert len(await other.query_selector_all("#my-games li[data-record]")) == 3
        await other.click("#board-around")
        await other.wait_for_selector("#board-around[aria-pressed=true]")
        assert await other.input_value("#name") == "Gus"
        check_storage((await state_of(other))["storage"])
        for seen in (again, other):
            assert seen.errors == []


# ----------------------------------------------------------------- accessibility


def serious(found: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    return {moment: [v for v in violations if v["impact"] in ("serious", "critical")]
            for moment, violations in found.items() if violations}


@pytest.mark.parametrize("device", ["laptop", "phone"])
async def test_no_accessibility_violations(device: str) -> None:
    """axe-core (npm, pinned) on every screen: the lobby, a table waiting for friends, a
    pass, a trick, a hand's summary (the last of a one-hand game) and the game-over screen.
    The context bypasses the page's CSP only so that the test can inject axe."""
    assert AXE.is_file(), "run `make ts` first (axe-core is a devDependency of clients/ts)"
    is_phone = device == "phone"
    port = free_port()
    # One hand: its summary (the last hand's, before the standings) is scanned in a pause
    # long enough for axe.
    async with (serving(web_port=port, web_host="127.0.0.1",
                        rule_defaults={**TIMING, "hand_pause": 4.0}) as (_, stub),
                browser() as launched):
        await new_table(stub, bots=2, seed=None)
        page = await open_page(launched, f"http://127.0.0.1:{port}/",
                               PHONE if is_phone else LAPTOP, bypass_csp=True)
        await page.wait_for_selector("#tables[data-live=true] tbody tr[data-table]")
        found = {"lobby": await axe_violations(page)}
        await create_through_the_lobby(page, "Ana", "quick", tap=is_phone, friends=3)
        await page.wait_for_selector("#share:not([hidden])")
        found["waiting for friends"] = await axe_violations(page)

        async def accept(dialog: Any) -> None:
            await dialog.accept()

        page.once("dialog", accept)  # "Leave the table for good?"
        await press(page, "#leave", tap=is_phone)
        await page.wait_for_selector("#lobby:not([hidden]) #tables[data-live=true]")
        await create_through_the_lobby(page, "Ana", "quick", tap=is_phone)
        await page.wait_for_function(NEXT_TURN, arg=-1)
        found["passing"] = await axe_violations(page)
        while (state := await state_of(page))["phase"] != "GAME_OVER":
            if not state["mustAct"]:  # a hand's summary is on the table, for its pause
                if not await page.is_hidden("#hand-score"):
                    found["summary"] = await axe_violations(page)
                await page.wait_for_function(NEXT_TURN, arg=state["sequence"] - 1)
                continue
            if state["phase"] == "PLAYING" and state["dim"] and "trick" not in found:
                found["trick"] = await axe_violations(page)
            await take_turn(page, state, tap=is_phone)
            await page.wait_for_function(NEXT_MOMENT,
                                         arg=[state["sequence"], "summary" not in found])
        if not await page.is_hidden("#hand-score"):
            found["summary"] = await axe_violations(page)
        await page.wait_for_selector("#standings:not([hidden]) #final-standings tbody tr")
        found["game over"] = await axe_violations(page)
        assert {"trick", "summary", "game over"} <= set(found)
        assert not serious(found), serious(found)
        assert not any(found.values()), found  # none of lesser impact either


def test_the_committed_page_bundle_is_what_clients_ts_builds(tmp_path: Path) -> None:
    node = shutil.which("node")
    assert node is not None, "Node.js is needed to build the page"
    assert (TS_DIR / "node_modules").is_dir(), "run `make ts` first"
    built = tmp_path / "app.js"
    subprocess.run([node, "build-web.mjs", str(built)], cwd=TS_DIR, check=True, timeout=120)
    assert built.read_bytes() == BUNDLE.read_bytes(), (
        "server/web/app.js is stale: run `make web` and commit it")
