// The table drawn as one, from the latest view: you at the bottom and the others around you
// in seat order (seat i+1 is your left neighbour), each trick card in front of the seat that
// played it, the pass as an arrow to its receiver, your hand with the playable cards lifted,
// the hand's summary during its pause and the final standings. Only `state` is read.

import type { Card } from "../gen/copas/v1/cards_pb.js";
import { GameEndReason, MoonChoice, PassDirection, Phase, type TableSummary, type TableView, type Trick } from "../gen/copas/v1/copas_pb.js";
import { isOver, mustAct, sameCard } from "../copas.js";
import { onAttention } from "./attention.js";
import { $, element, redraw } from "./dom.js";
import { faceSvg, suitLetter } from "./faces.js";
import { isLegal, whyNot } from "./hints.js";
import { type Leaving, passedCards, sendAway } from "./passing.js";
import { againLabel, linkTable, offerText, rematch, rematchKey } from "./rematch.js";
import { onTurn } from "./sound.js";
import { type Actions, isBusy, state } from "./state.js";
import { t } from "./i18n.js";
import {
  cardName,
  cardPoints,
  clockName,
  DIRECTION_NAME,
  directionWords,
  endReasonWords,
  isRed,
  lengthName,
  listNames,
  moonChoiceButton,
  moonOutcome,
  moonRuleName,
  ordinal,
  presetName,
  pretty,
  seatName,
  SUIT_SYMBOL,
} from "./words.js";

const LAYOUTS: Record<number, string[]> = {
  2: ["bottom", "top"], // Bisca's
  6: ["bottom", "left", "top-left", "top", "top-right", "right"],
  3: ["bottom", "left", "right"],
  4: ["bottom", "left", "top", "right"],
  5: ["bottom", "left", "top-left", "top-right", "right"],
};
const ARROW: Record<string, string> = {
  left: "←", right: "→", top: "↑", "top-left": "↖", "top-right": "↗", bottom: "↓",
};

/** Where ``seat`` sits, seen from this view's seat (a spectator sees seat 0 at the bottom). */
export function positionOf(view: TableView, seat: number): string {
  const n = view.players.length;
  const layout = LAYOUTS[n] ?? LAYOUTS[4]!;
  return layout[(seat - (view.seat ?? 0) + n) % n] ?? "top";
}

const OFFSET: Record<number, number> = {
  [PassDirection.LEFT]: 1,
  [PassDirection.RIGHT]: -1,
  [PassDirection.ACROSS]: 2,
};

/** The seat that gets ``seat``'s pass (``towards``) or that passes to it (``from``). */
export function passPartner(view: TableView, seat: number, way: "towards" | "from"): number | undefined {
  const offset = OFFSET[view.passDirection];
  if (offset === undefined) return undefined;
  const n = view.players.length;
  return (((seat + (way === "towards" ? offset : -offset)) % n) + n) % n;
}

function you(view: TableView, seat: number): string {
  return seat === view.seat ? t("seat.you") : seatName(view, seat);
}

/** A card as the page draws it: its SVG face (faces.ts) for the eye; for a screen reader
 * "queen of spades" (an image's label, or a button's own text, so that its name holds what
 * it says). */
export function cardFace(card: Card, tag: "span" | "button" = "span", spoken = cardName(card)): HTMLElement {
  const face = element(tag, "", { "data-card": card.text });
  if (tag === "span") face.setAttribute("role", "img");
  if (tag === "span") face.setAttribute("aria-label", spoken);
  face.className = isRed(card) ? "card red" : "card";
  face.dataset.suit = suitLetter(card.suit);
  face.append(faceSvg(card.text.slice(0, -1), card.suit));
  if (tag === "button") face.append(element("span", spoken, { class: "visually-hidden" }));
  return face;
}

/** The seconds the table gives for the current decision (0: no limit). */
function limitSeconds(view: TableView): number {
  const rules = view.rules;
  if (!rules) return 0;
  if (view.phase === Phase.PASSING) return rules.passTimeoutSeconds;
  if (view.phase === Phase.MOON_CHOICE) return rules.moonTimeoutSeconds;
  return rules.playTimeoutSeconds;
}

/** A hand's summary is on the table: during the pause after it, or, for the game's last
 * hand (no pause follows it), for a hand's pause before the standings. */
function isHandPause(view: TableView): boolean {
  const hand = state.lastHand;
  if (!hand) return false;
  if (isOver(view)) return isFinalSummary();
  return !!view.pausedUntil && hand.handNumber === view.handNumber - 1;
}

function isFinalSummary(): boolean {
  return state.finalSummaryUntil !== undefined && performance.now() < state.finalSummaryUntil;
}

/** The last hand's summary has had its time (once): the standings may be drawn. */
export function finalSummaryEnded(): boolean {
  if (state.finalSummaryUntil === undefined || performance.now() < state.finalSummaryUntil) return false;
  state.finalSummaryUntil = undefined;
  return true;
}

/** The taken cards are shown only when they add up to every seat's public hand points. */
function takenIsKnown(view: TableView): boolean {
  if (state.takenHand !== view.handNumber) return false;
  return view.players.every(
    (p) => (state.taken.get(p.seat) ?? []).reduce((sum, c) => sum + cardPoints(c), 0) === p.handPoints,
  );
}

// ------------------------------------------------------------------ the whole table

export function render(actions: Actions, summary: TableSummary | undefined): void {
  const view = state.view;
  const game = $("game");
  game.dataset.table = state.session?.tableId ?? "";
  game.dataset.sequence = String(state.sequence);
  game.dataset.phase = view ? Phase[view.phase] : "";
  game.dataset.mustAct = String(!!view && mustAct(view) && !isBusy());
  game.dataset.seated = String(!!state.session?.token);
  game.dataset.hand = view ? String(view.handNumber) : "";
  game.dataset.trick = view ? String(view.trickNumber) : "";
  game.dataset.held = String(!!view?.isHeld);
  renderHeader(view, summary);
  $("error").textContent = state.error;
  $("error").dataset.reason = state.errorReason;
  $("hint").textContent = state.hint;
  if (!view) {
    $("status").textContent = t("table.connecting");
    return;
  }
  $("felt").dataset.players = String(view.players.length);
  $("felt").dataset.phase = Phase[view.phase];
  const was = whereCardsWere();
  renderSeats(view);
  renderCenter(view);
  renderHand(view, actions);
  moveCards(view, was);
  renderStatus(view);
  renderMoon(view, actions);
  renderHandScore(view);
  renderStandings(view, actions);
  renderLookBack(view);
  onTurn(mustAct(view) && !isBusy());
  onAttention(mustAct(view) && !isBusy(), summary?.displayName ?? "");
  const isSeated = !!state.session?.token && !isOver(view);
  $("leave").hidden = !isSeated;
  // A seated player leaves with "Leave the table"; the game-over screen has its own way out.
  $("back").hidden = isSeated || isOver(view);
  tick();
}

function renderHeader(view: TableView | undefined, summary: TableSummary | undefined): void {
  const name = summary?.displayName || t("lobby.openTable");
  $("game-title").textContent = state.session?.token ? name : t("table.watching", { name });
  const rules = view?.rules ?? summary?.rules;
  const preset = presetName(summary?.preset ?? "");
  const length = lengthName(rules);
  const parts = [
    preset,
    length.toLowerCase() === preset.toLowerCase() ? "" : length, // not "One hand · one hand"
    rules ? moonRuleName(rules.moon) : "",
    clockName(rules),
  ];
  if (view && view.handNumber >= 0) {
    const n = view.handNumber + 1;
    parts.unshift(rules && rules.maxHands > 0 ? t("table.handOf", { n, of: rules.maxHands }) : t("table.hand", { n }));
  }
  $("game-info").textContent = parts.filter(Boolean).join(" · ");
}

// ------------------------------------------------------------------ the seats

function doing(view: TableView, seat: number): string {
  const player = view.players[seat];
  if (!player) return "";
  const toAct = view.toAct.includes(seat) && !view.pausedUntil;
  if (view.phase === Phase.PASSING) return player.hasPassed ? t("doing.passed") : toAct ? t("doing.choosingPass") : "";
  if (view.phase === Phase.MOON_CHOICE && toAct) return t("doing.choosingMoon");
  if (view.phase === Phase.PLAYING && toAct) return t(seat === view.seat ? "doing.yourTurn" : "doing.toPlay");
  return "";
}

function presence(view: TableView, seat: number): { text: string; kind: string } {
  const player = view.players[seat]!;
  if (view.phase === Phase.WAITING_FOR_PLAYERS && !player.displayName) return { text: t("presence.free"), kind: "free" };
  if (player.hasLeft) return { text: t("presence.left"), kind: "left" };
  if (player.isBot) return { text: t("presence.bot"), kind: "bot" };
  if (player.isAway) return { text: t("presence.awayPlayed"), kind: "away" };
  return player.isConnected ? { text: t("presence.here"), kind: "here" } : { text: t("presence.away"), kind: "away" };
}

function renderSeats(view: TableView): void {
  const isWaiting = view.phase === Phase.WAITING_FOR_PLAYERS;
  const known = takenIsKnown(view);
  const target = view.seat !== undefined && view.phase === Phase.PASSING ? passPartner(view, view.seat, "towards") : undefined;
  const source =
    view.seat !== undefined && view.received.length && view.trickNumber === 0 ? passPartner(view, view.seat, "from") : undefined;
  $("seats").replaceChildren(
    ...view.players.map((player) => {
      const seat = player.seat;
      const pos = positionOf(view, seat);
      const isToAct = view.toAct.includes(seat) && !view.pausedUntil && !isOver(view);
      const item = element("li", "", {
        "data-seat": String(seat),
        "data-pos": pos,
        "data-to-act": String(isToAct),
        "data-you": String(seat === view.seat),
        "data-connected": String(player.isConnected),
        "data-away": String(player.isAway),
      });
      const name = element("div", "", { class: "name" });
      name.append(element("span", isWaiting && !player.displayName ? t("seat.free") : seatName(view, seat)));
      if (seat === view.seat) name.append(" ", element("span", t("seat.you"), { class: "tag you" }));
      const here = presence(view, seat);
      const line = element("div", "", { class: `presence ${here.kind}` });
      line.append(element("span", "", { class: "dot", "aria-hidden": "true" }), here.text);
      item.append(name, line);
      if (!isWaiting) {
        const numbers = element("div", "", { class: "numbers" });
        const hand = element("span", "", { class: "stat", "data-hand-points": String(player.handPoints) });
        // Each number in a box as wide as its most digits: a line wraps the same whatever they say.
        hand.append(element("span", t("seat.handLabel"), { class: "label" }), " ", element("span", String(player.handPoints), { class: "value two" }));
        const total = element("span", "", { class: "stat", "data-total": String(player.total) });
        total.append(element("span", t("seat.totalLabel"), { class: "label" }), " ", element("span", String(player.total), { class: "value three" }));
        const count = element("span", "", { class: "stat count", "data-card-count": String(player.cardCount) });
        count.append(element("span", t("seat.cardsLabel"), { class: "label" }), " ", element("span", String(player.cardCount), { class: "value two" }));
        numbers.append(hand, total, count);
        item.append(numbers);
      }
      // Every line keeps its place, empty or not: nothing below moves as the turn goes round.
      const took = known ? state.taken.get(seat) ?? [] : [];
      if (!isWaiting) item.append(takenLine(took));
      item.append(element("div", doing(view, seat), { class: "doing" }));
      if (!isWaiting) {
        const hasClock = isToAct && !!view.deadline;
        const clock = element("div", "", { class: hasClock ? "clock" : "clock off", "aria-hidden": "true" });
        clock.append(element("div", "", { class: "fill" }));
        item.append(clock);
      }
      let note = "";
      if (seat === target && view.seat !== undefined) {
        item.dataset.receives = "true";
        note = t("seat.getsPass", { arrow: ARROW[pos] ?? "" });
      }
      if (seat === source) note = t("seat.passedToYou");
      if (!isWaiting) item.append(element("div", note, { class: "pass-note" })); // empty, it keeps its line
      return item;
    }),
  );
}

/** The point cards a seat took this hand: the Q♠ and its hearts, in rank order. */
function takenLine(cards: Card[]): HTMLElement {
  const box = element("div", "", { class: "took" });
  if (!cards.length) return box;
  const queen = cards.find((c) => c.text === "QS");
  const hearts = cards.filter((c) => c !== queen).sort((a, b) => a.rank - b.rank);
  box.append(element("span", t("seat.took"), { class: "label" }));
  if (queen) {
    const chip = cardFace(queen);
    chip.classList.add("mini");
    box.append(chip);
  }
  if (hearts.length) {
    const chip = element("span", `♥${hearts.length}`, {
      class: "hearts",
      "data-taken": hearts.map((c) => c.text).join(" "),
      title: t("seat.tookCards", { cards: hearts.map(pretty).join(" ") }),
      "aria-label": t("seat.hearts", { n: hearts.length }),
      role: "img",
    });
    box.append(chip);
  }
  return box;
}

// ------------------------------------------------------------------ the middle of the table

function renderCenter(view: TableView): void {
  const isWaiting = view.phase === Phase.WAITING_FOR_PLAYERS;
  const isPassing = view.phase === Phase.PASSING && !view.pausedUntil;
  const isPlaying = view.phase === Phase.PLAYING || view.phase === Phase.MOON_CHOICE;

  // Table state: hearts broken, where the Q♠ went once it was played.
  const facts = $("table-state");
  facts.hidden = !isPlaying;
  facts.replaceChildren();
  if (isPlaying) {
    const queenTaker = takenIsKnown(view)
      ? [...state.taken].find(([, cards]) => cards.some((c) => c.text === "QS"))?.[0]
      : undefined;
    const queenOnTable = view.trick?.cards.some((c) => c.card?.text === "QS");
    const items = [
      element("span", t(view.heartsBroken ? "fact.broken" : "fact.notBroken"), {
        class: view.heartsBroken ? "fact broken" : "fact",
        "data-hearts-broken": String(view.heartsBroken),
      }),
      element("span", t("fact.trick", { n: Math.min(view.trickNumber + 1, 13) }), { class: "fact" }),
    ];
    if (queenTaker !== undefined) {
      const queen = { class: "fact queen", "data-queen": String(queenTaker) };
      items.push(element("span", t("fact.queenTaken", { name: you(view, queenTaker) }), queen));
    } else if (queenOnTable) {
      items.push(element("span", t("fact.queenOnTable"), { class: "fact queen" }));
    }
    facts.replaceChildren(...items);
  }

  // The trick: each card in front of its seat; at the trick pause, collected to its winner.
  const trickBox = $("trick");
  const live = view.trick?.cards ?? [];
  const last = view.lastTrick?.cards ?? [];
  const winner = view.lastTrickWinner;
  const isCollecting = !live.length && !!view.pausedUntil && last.length > 0 && winner !== undefined;
  const shown: Trick | undefined = !isPlaying ? undefined : live.length ? view.trick : isCollecting ? view.lastTrick : undefined;
  trickBox.hidden = !isPlaying;
  const toPos = isCollecting ? positionOf(view, winner!) : "";
  trickBox.dataset.collect = toPos;
  const cards = shown?.cards ?? [];
  redraw(trickBox, `${view.handNumber}:${view.trickNumber}:${toPos}:${cards.map((c) => c.card?.text).join(",")}`, () =>
    cards.map((played) => {
      const spot = element("div", "", {
        class: "played",
        "data-seat": String(played.seat),
        "data-pos": positionOf(view, played.seat),
      });
      if (played.card) spot.append(cardFace(played.card));
      spot.append(element("span", you(view, played.seat), { class: "by" }));
      return spot;
    }),
  );
  trickBox.setAttribute("aria-label", t(isCollecting ? "trick.last" : "game.trick"));

  const note = $("trick-note");
  let text = "";
  if (isCollecting) {
    const points = last.reduce((sum, c) => sum + (c.card ? cardPoints(c.card) : 0), 0);
    text = winner === view.seat ? t("trick.youTake", { n: points }) : t("trick.takes", { n: points, name: seatName(view, winner!) });
  } else if (view.phase === Phase.PLAYING && !live.length && view.toAct.length && !view.pausedUntil) {
    const leader = view.toAct[0]!;
    text = leader === view.seat ? t("trick.yourLead") : t("trick.leads", { name: seatName(view, leader) });
    if (view.trickNumber === 0 && view.passDirection === PassDirection.HOLD) text = t("trick.noPassing", { text });
  }
  note.textContent = text;
  note.hidden = !isPlaying; // empty, it keeps its line

  // The pass: an arrow to whoever gets your three cards.
  const pass = $("pass-direction");
  pass.dataset.direction = DIRECTION_NAME[view.passDirection] ?? "hold";
  const direction = directionWords(view.passDirection);
  pass.hidden = !isPassing;
  if (!isPassing) pass.replaceChildren(); // out of sight, it keeps no card
  if (isPassing) {
    const seat = view.seat;
    const target = seat === undefined ? undefined : passPartner(view, seat, "towards");
    const pos = target === undefined ? positionOf(view, passPartner(view, 0, "towards") ?? 1) : positionOf(view, target);
    pass.dataset.to = pos;
    const arrow = element("span", ARROW[pos] ?? "", { class: "arrow", "aria-hidden": "true" });
    const words = element("p", "", { class: "pass-words" });
    if (seat === undefined || target === undefined) {
      words.textContent = t("pass.everyone", { direction });
    } else if (view.passChoice.length) {
      words.append(t("pass.youPassed", { name: seatName(view, target) }), ...view.passChoice.map((c) => cardFace(c)));
      pass.classList.add("done");
    } else {
      words.textContent = t("pass.three", { direction, name: seatName(view, target) });
      pass.classList.remove("done");
    }
    pass.replaceChildren(arrow, words);
  }

  // Waiting for players: the link that seats a friend.
  const share = $("share");
  share.hidden = !(isWaiting && state.session?.token);
  if (!share.hidden) {
    const free = view.players.filter((p) => !p.displayName).length;
    $("share-text").textContent = t("share.waiting", { n: free });
    const link = $<HTMLInputElement>("share-link");
    const url = shareLink(linkTable(view.tableId));
    if (link.value !== url) link.value = url;
  }
}

export function shareLink(tableId: string): string {
  return `${location.origin}/?join=${encodeURIComponent(tableId)}`;
}

// ------------------------------------------------------------------ your hand

function renderHand(view: TableView, actions: Actions): void {
  const hand = $("hand");
  const canAct = mustAct(view) && !isBusy();
  const isPassing = view.phase === Phase.PASSING && canAct;
  const isPlaying = view.phase === Phase.PLAYING && canAct;
  const active = document.activeElement as HTMLElement | null;
  const focused = active && hand.contains(active) ? active.dataset.card : undefined;
  hand.hidden = view.seat === undefined || view.hand.length === 0;
  hand.dataset.mode = isPassing ? "passing" : isPlaying ? "playing" : "waiting";
  const faces = view.hand.map((card) => {
    const isReceived = view.received.some((c) => sameCard(c, card));
    const why = whyDim(view, card, isPassing, isPlaying);
    const spoken = [cardName(card), isReceived ? t("hand.passedToYou") : "", why ? why[0]!.toLowerCase() + why.slice(1) : ""]
      .filter(Boolean)
      .join(", ");
    const face = cardFace(card, "button", spoken) as HTMLButtonElement;
    face.type = "button";
    face.tabIndex = -1;
    const isPlayable = isPassing || (isPlaying && isLegal(view, card));
    face.dataset.legal = String(isPlayable);
    if (isReceived) {
      face.classList.add("received");
      face.dataset.received = "true";
      face.dataset.newLabel = t("hand.new");
    }
    if (isPlayable) {
      face.classList.add("legal");
    } else if (isPlaying) {
      face.classList.add("dim");
      face.dataset.reason = whyNot(view, card)?.reason ?? "";
    }
    if (!isPlayable) face.setAttribute("aria-disabled", "true");
    if (why) face.title = why;
    if (view.phase === Phase.PASSING && canAct) {
      face.setAttribute("aria-pressed", String(state.chosen.some((c) => sameCard(c, card))));
    }
    face.addEventListener("click", () => (isPlayable ? actions.onCard(card) : explain(why)));
    return face;
  });
  hand.replaceChildren(...faces);
  // One tab stop for the hand (arrows move within it): the card that had focus, else the
  // first playable card, else the first.
  const again =
    faces.find((f) => f.dataset.card === focused) ??
    faces.find((f) => f.dataset.legal === "true") ??
    faces[0];
  if (again) again.tabIndex = 0;
  if (focused && again) again.focus();

  const pass = $<HTMLButtonElement>("pass-button");
  pass.hidden = !isPassing;
  pass.disabled = state.chosen.length !== 3;
  pass.textContent =
    state.chosen.length === 3
      ? t("hand.pass", { cards: state.chosen.map(pretty).join(" ") })
      : t("hand.chooseMore", { n: 3 - state.chosen.length });
}

/** Why a card of the hand cannot be used now (empty when it can). */
function whyDim(view: TableView, card: Card, isPassing: boolean, isPlaying: boolean): string {
  if (isPassing || (isPlaying && isLegal(view, card))) return "";
  if (isPlaying) return whyNot(view, card)?.text ?? t("why.notPlayable");
  if (isBusy()) return t("why.onItsWay");
  if (view.isHeld) return t("why.held");
  if (view.pausedUntil) return t("why.pausing");
  if (view.phase === Phase.PASSING && view.passChoice.length) return t("why.passed");
  const names = view.toAct.length ? listNames(view.toAct.map((s) => seatName(view, s))) : "";
  return names ? t(view.phase === Phase.PASSING ? "why.waitPass" : "why.waitPlay", { names }) : t("why.notYourTurn");
}

function explain(why: string): void {
  state.hint = why ? t("hint.sentence", { text: why }) : "";
  $("hint").textContent = state.hint;
}

/** Arrow keys, Home and End move between the cards of the hand; Enter or Space plays
 * (they are buttons). */
export function onHandKey(event: KeyboardEvent): void {
  const cards = Array.from($("hand").querySelectorAll<HTMLButtonElement>("button.card"));
  const at = cards.indexOf(document.activeElement as HTMLButtonElement);
  if (at < 0) return;
  const step: Record<string, number> = { ArrowRight: 1, ArrowDown: 1, ArrowLeft: -1, ArrowUp: -1 };
  let next = at;
  if (event.key in step) next = (at + step[event.key]! + cards.length) % cards.length;
  else if (event.key === "Home") next = 0;
  else if (event.key === "End") next = cards.length - 1;
  else return;
  event.preventDefault();
  cards[at]!.tabIndex = -1;
  cards[next]!.tabIndex = 0;
  cards[next]!.focus();
}

// ------------------------------------------------------------------ what happens now

function renderStatus(view: TableView): void {
  const names = listNames(view.toAct.map((s) => seatName(view, s)));
  const me = view.seat;
  let text: string;
  let turn = "other";
  if (view.phase === Phase.WAITING_FOR_PLAYERS) {
    const free = view.players.filter((p) => !p.displayName).length;
    text = t("status.waiting", { n: free });
  } else if (isOver(view)) {
    text = t("status.over");
  } else if (view.isHeld) {
    text = t("status.held");
  } else if (isHandPause(view)) {
    text = t("status.scored", { n: view.handNumber });
  } else if (view.pausedUntil) {
    const winner = view.lastTrickWinner;
    text =
      winner === undefined ? t("status.pause") : winner === me ? t("status.youTake") : t("status.takes", { name: seatName(view, winner) });
  } else if (mustAct(view) && view.phase === Phase.PASSING) {
    const target = passPartner(view, me!, "towards");
    const to = target === undefined ? "?" : seatName(view, target);
    text = t("status.passTurn", { direction: directionWords(view.passDirection), name: to });
    turn = "you";
  } else if (mustAct(view) && view.phase === Phase.MOON_CHOICE) {
    text = t("status.moonTurn");
    turn = "you";
  } else if (mustAct(view)) {
    const led = view.trick?.cards[0]?.card;
    text = led ? t("status.playLed", { suit: SUIT_SYMBOL[led.suit] ?? "?" }) : t("status.lead");
    turn = "you";
  } else if (view.phase === Phase.PASSING) {
    text = names ? t("status.waitPass", { names }) : t("status.passing");
  } else if (view.phase === Phase.MOON_CHOICE) {
    text = t("status.moonOther", { names });
  } else {
    text = names ? t("status.toPlay", { names }) : "";
  }
  if (state.isBusy) text = t("status.sending");
  $("status").textContent = text;
  $("turn").dataset.turn = turn;
  $("game").dataset.turn = turn;
}

function renderMoon(view: TableView, actions: Actions): void {
  const dialog = $<HTMLDialogElement>("moon");
  const choices = mustAct(view) && view.phase === Phase.MOON_CHOICE && !isBusy() ? view.moonChoices : [];
  if (choices.length === 0) {
    if (dialog.open) dialog.close();
    return;
  }
  const total = view.players[view.seat!]?.total ?? 0;
  redraw($("moon-choices"), `${view.handNumber}:${choices.join(",")}:${total}`, () =>
    choices.map((choice) => {
      const effect =
        choice === MoonChoice.SUBTRACT_FROM_SELF
          ? t("moon.yourTotal", { from: total, to: Math.max(0, total - 26) })
          : t("moon.othersTotal");
      const button = element("button", "", { type: "button", "data-choice": MoonChoice[choice] });
      button.append(
        element("span", moonChoiceButton(choice), { class: "big" }),
        element("span", effect, { class: "small" }),
      );
      button.addEventListener("click", () => actions.chooseMoon(choice));
      return button;
    }),
  );
  if (!dialog.open) dialog.showModal();
}

interface Row {
  cells: (string | number)[];
  attributes?: Record<string, string>;
}

/** A table whose first cell in each row names the row. */
function scoreTable(caption: string, headings: string[], rows: Row[], id = ""): HTMLTableElement {
  const table = element("table", "", id ? { id } : {});
  table.append(element("caption", caption, { class: "visually-hidden" }));
  const head = element("tr");
  head.append(...headings.map((h) => element("th", h, { scope: "col" })));
  const thead = element("thead");
  thead.append(head);
  const body = element("tbody");
  for (const row of rows) {
    const line = element("tr", "", row.attributes ?? {});
    row.cells.forEach((cell, i) => line.append(element(i === 0 ? "th" : "td", String(cell), i === 0 ? { scope: "row" } : {})));
    body.append(line);
  }
  table.append(thead, body);
  return table;
}

function renderHandScore(view: TableView): void {
  const box = $("hand-score");
  const hand = state.lastHand;
  box.hidden = !isHandPause(view) || !hand;
  if (box.hidden || !hand) return;
  redraw(box, `${hand.handNumber}:${view.seat}`, () => {
    const nodes: Node[] = [element("h3", t("score.handScored", { n: hand.handNumber + 1 }), { id: "hand-score-title" })];
    if (hand.moonShooter !== undefined) {
      const isYou = hand.moonShooter === view.seat;
      const who = isYou ? t("moon.you") : seatName(view, hand.moonShooter);
      nodes.push(element("p", t("moon.line", { who, outcome: moonOutcome(hand.moonChoice, isYou) }), { class: "moon-line" }));
    }
    nodes.push(
      scoreTable(
        t("table.hand", { n: hand.handNumber + 1 }),
        [t("col.player"), t("col.took"), t("col.scored"), t("col.total")],
        hand.totals.map((total, seat) => ({
          cells: [
            seat === view.seat ? t("score.you", { name: seatName(view, seat) }) : seatName(view, seat),
            hand.taken[seat] ?? 0,
            `+${hand.points[seat] ?? 0}`,
            total,
          ],
          attributes: { "data-seat": String(seat), "data-you": String(seat === view.seat) },
        })),
      ),
      element("p", "", { class: "next", id: "next-hand" }),
    );
    return nodes;
  });
}

/** "You finished 2nd", "You won!", "You share 1st place", or for a spectator the winner. */
export function resultTitle(view: TableView): string {
  const standings = view.standings;
  const winners = standings.filter((s) => s.place === 1 && !s.hasLeft).map((s) => seatName(view, s.seat));
  const mine = standings.find((s) => s.seat === view.seat);
  if (!mine) return winners.length > 1 ? t("result.shareWin", { names: listNames(winners) }) : t("result.wins", { name: winners[0] ?? t("result.nobody") });
  if (mine.hasLeft) return t("result.left", { place: ordinal(mine.place) });
  const shared = standings.some((s) => s.seat !== mine.seat && s.place === mine.place && !s.hasLeft);
  if (mine.place === 1) return t(shared ? "result.shareFirst" : "result.won");
  return t(shared ? "result.sharePlace" : "result.finished", { place: ordinal(mine.place) });
}

function renderStandings(view: TableView, actions: Actions): void {
  const box = $("standings");
  box.hidden = !isOver(view) || isFinalSummary();
  if (box.hidden) return;
  const key = view.standings.map((s) => `${s.seat}/${s.place}/${s.total}`).join(",");
  redraw(box, `${view.tableId}:${state.lastHand?.handNumber}:${state.hands.size}:${key}:${rematchKey()}`, () => {
    const mine = view.standings.find((s) => s.seat === view.seat);
    const heading = element("h3", resultTitle(view), { id: "result-title" });
    if (mine?.place === 1 && !mine.hasLeft) heading.classList.add("won");
    const places = view.standings.map((s) => {
      const isTie = view.standings.some((o) => o.seat !== s.seat && o.place === s.place);
      let name = seatName(view, s.seat);
      if (s.seat === view.seat) name = t("score.you", { name });
      if (s.hasLeft) name = t("score.left", { name });
      return {
        cells: [`${isTie ? "=" : ""}${ordinal(s.place)}`, (s.place === 1 && !s.hasLeft ? "★ " : "") + name, s.total],
        attributes: {
          "data-seat": String(s.seat),
          "data-place": String(s.place),
          "data-winner": String(s.place === 1 && !s.hasLeft),
          "data-left": String(s.hasLeft),
          "data-you": String(s.seat === view.seat),
        },
      };
    });
    const again = element("button", againLabel(view, state.session), { type: "button", id: "again", class: "primary" });
    again.disabled = rematch.isBusy;
    again.addEventListener("click", actions.playAgain);
    const lobby = element("button", t("game.back"), { type: "button", id: "to-lobby" });
    lobby.addEventListener("click", actions.toLobby);
    const buttons = element("p", "", { class: "buttons" });
    buttons.append(again, " ", lobby);
    const offer = element("p", offerText(view), { id: "rematch-offer", class: "rematch-offer" });
    const refused = element("p", rematch.error, { id: "rematch-error", class: "error", role: "alert" });
    const hand = state.lastHand;
    const shooter = hand?.moonShooter;
    const moon =
      hand && shooter !== undefined
        ? [element("p", t("moon.lineLast", { who: shooter === view.seat ? t("moon.you") : seatName(view, shooter), outcome: moonOutcome(hand.moonChoice, shooter === view.seat) }), { class: "moon-line" })]
        : [];
    return [
      heading,
      element("p", endReasonWords(view.endReason), { class: "end-reason", "data-reason": GameEndReason[view.endReason] ?? String(view.endReason) }),
      ...moon,
      scoreTable(t("score.final"), [t("col.place"), t("col.player"), t("col.total")], places, "final-standings"),
      ...(state.hands.size ? [element("h4", t("game.sheet"), { class: "sheet-title" }), scoreSheet(view, "final-sheet")] : []),
      offer,
      buttons,
      refused,
    ];
  });
}

// ------------------------------------------------------------------ cards that move

interface CardsBefore {
  hasView: boolean;
  hand: Map<string, DOMRect>; // where each card of the hand was
  trick: Set<string>; // the cards the trick showed
  passed: Set<string>;
  leaving: Map<string, Leaving>; // the pass's cards (or the hand's), to fly at the exchange
}

let lastDrawnTable = "";

function cardsIn(selector: string): Set<string> {
  return new Set(Array.from(document.querySelectorAll<HTMLElement>(`${selector} [data-card]`), (e) => e.dataset.card ?? ""));
}

/** Before a redraw: where the cards were (the hand's buttons are about to be replaced). */
function whereCardsWere(): CardsBefore {
  const table = state.view?.tableId ?? "";
  const hasView = lastDrawnTable === table && table !== "";
  lastDrawnTable = table;
  const hand = new Map<string, DOMRect>();
  for (const b of document.querySelectorAll<HTMLElement>("#hand button[data-card]")) {
    hand.set(b.dataset.card ?? "", b.getBoundingClientRect());
  }
  return { hasView, hand, trick: cardsIn("#trick"), passed: cardsIn("#pass-direction"), leaving: passedCards() };
}

function isMotionReduced(): boolean {
  return matchMedia("(prefers-reduced-motion: reduce)").matches;
}

/** ``element`` glides from ``from`` to where it is now (transforms only: nothing reflows). */
function glide(element: HTMLElement, from: DOMRect | undefined, ms = 380): Animation | undefined {
  if (!from) return undefined;
  const to = element.getBoundingClientRect();
  const dx = from.left + from.width / 2 - (to.left + to.width / 2);
  const dy = from.top + from.height / 2 - (to.top + to.height / 2);
  if (Math.abs(dx) < 1 && Math.abs(dy) < 1) return undefined;
  return element.animate(
    [
      { transform: `translate(${dx.toFixed(1)}px, ${dy.toFixed(1)}px) scale(0.7)`, opacity: 0.4 },
      { transform: "none", opacity: 1 },
    ],
    { duration: ms, easing: "cubic-bezier(0.2, 0.7, 0.3, 1)" },
  );
}

function seatBox(seat: number | undefined): DOMRect | undefined {
  if (seat === undefined) return undefined;
  return document.querySelector(`#seats li[data-seat="${seat}"]`)?.getBoundingClientRect();
}

/** After a redraw: a card played travels from its seat (yours from your hand) to the trick;
 * a pass leaves your hand for the pass's place; the cards passed to you come from their
 * giver's seat. Nothing moves for whoever asked for reduced motion. */
function moveCards(view: TableView, was: CardsBefore): void {
  if (!was.hasView || isMotionReduced()) return;
  for (const spot of document.querySelectorAll<HTMLElement>("#trick .played")) {
    const text = spot.querySelector<HTMLElement>("[data-card]")?.dataset.card ?? "";
    if (!text || was.trick.has(text)) continue;
    glide(spot, was.hand.get(text) ?? seatBox(Number(spot.dataset.seat)));
  }
  for (const card of document.querySelectorAll<HTMLElement>("#pass-direction [data-card]")) {
    const text = card.dataset.card ?? "";
    if (!was.passed.has(text)) glide(card, was.hand.get(text));
  }
  if (was.hand.size && view.seat !== undefined) {
    const giver = seatBox(passPartner(view, view.seat, "from"));
    let arrived = 0;
    for (const button of document.querySelectorAll<HTMLElement>("#hand button[data-received=true]")) {
      if (was.hand.has(button.dataset.card ?? "")) continue;
      arrived += 1;
      const arriving = glide(button, giver, 520);
      if (!arriving) continue;
      button.dataset.passArriving = "true";
      arriving.addEventListener("finish", () => delete button.dataset.passArriving);
    }
    // The exchange (cards came in): the three you passed leave for their receiver.
    const leaving = view.passChoice.map((c) => was.leaving.get(c.text)).filter((c): c is Leaving => !!c);
    if (arrived) sendAway(leaving, seatBox(passPartner(view, view.seat, "towards")));
  }
}

// ------------------------------------------------------------------ looking back

/** Every hand's points per seat (a moon marked 🌙 on its shooter), then the totals. */
export function scoreSheet(view: TableView, id: string): HTMLTableElement {
  const hands = [...state.hands.values()].sort((a, b) => a.handNumber - b.handNumber);
  const table = element("table", "", { id, class: "sheet" });
  table.append(element("caption", t("score.sheetCaption"), { class: "visually-hidden" }));
  const head = element("tr");
  head.append(element("th", t("col.hand"), { scope: "col" }));
  for (const player of view.players) {
    const name = player.seat === view.seat ? t("score.you", { name: seatName(view, player.seat) }) : seatName(view, player.seat);
    head.append(element("th", name, { scope: "col", "data-seat": String(player.seat) }));
  }
  const thead = element("thead");
  thead.append(head);
  const body = element("tbody");
  for (const hand of hands) {
    const row = element("tr", "", { "data-hand": String(hand.handNumber) });
    row.append(element("th", t("table.hand", { n: hand.handNumber + 1 }), { scope: "row" }));
    view.players.forEach((player) => {
      const points = hand.points[player.seat] ?? 0;
      const isShooter = hand.moonShooter === player.seat;
      const cell = element("td", `${points}${isShooter ? " 🌙" : ""}`, {
        "data-seat": String(player.seat),
        "data-points": String(points),
      });
      if (isShooter) {
        cell.dataset.moon = "true";
        cell.title = t("moon.shot");
      }
      row.append(cell);
    });
    body.append(row);
  }
  const totals = element("tr", "", { class: "totals" });
  totals.append(element("th", t("col.total"), { scope: "row" }));
  for (const player of view.players) {
    totals.append(element("td", String(player.total), { "data-seat": String(player.seat), "data-total": String(player.total) }));
  }
  body.append(totals);
  table.append(thead, body);
  return table;
}

/** The last trick: each card by who played it, and who took it. */
function lastTrickNodes(view: TableView): Node[] {
  const cards = view.lastTrick?.cards ?? [];
  if (!cards.length) return [element("p", t("lastTrick.none"))];
  const list = element("ol", "", { class: "last-trick-cards" });
  for (const played of cards) {
    const item = element("li", "", { "data-seat": String(played.seat) });
    if (played.card) item.append(cardFace(played.card));
    item.append(element("span", you(view, played.seat), { class: "by" }));
    list.append(item);
  }
  const winner = view.lastTrickWinner;
  const points = cards.reduce((sum, c) => sum + (c.card ? cardPoints(c.card) : 0), 0);
  const who =
    winner === undefined ? "" : winner === view.seat ? t("lastTrick.youTook", { n: points }) : t("lastTrick.took", { n: points, name: seatName(view, winner) });
  const line = element("p", who, {
    class: "last-trick-winner",
    "data-winner": String(winner ?? ""),
  });
  return [list, line];
}

/** The open look-back dialogs follow the table; closed, they hold nothing. */
function renderLookBack(view: TableView): void {
  const canLook = view.phase !== Phase.WAITING_FOR_PLAYERS;
  $<HTMLButtonElement>("show-last-trick").disabled = !canLook || !view.lastTrick?.cards.length;
  $<HTMLButtonElement>("show-sheet").disabled = !canLook || !state.hands.size;
  const trick = $<HTMLDialogElement>("last-trick-dialog");
  if (trick.open) {
    const key = `${view.handNumber}:${view.trickNumber}:${(view.lastTrick?.cards ?? []).map((c) => c.card?.text).join(",")}`;
    redraw($("last-trick"), key, () => lastTrickNodes(view));
  }
  const sheet = $<HTMLDialogElement>("sheet-dialog");
  if (sheet.open) {
    const key = `${state.hands.size}:${view.players.map((p) => p.total).join(",")}`;
    redraw($("sheet"), key, () => [scoreSheet(view, "sheet-table")]);
  }
}

/** The buttons that open the last trick and the score sheet, and their dialogs' closing. */
export function startLookBack(): void {
  const open = (button: string, dialog: string) =>
    $(button).addEventListener("click", () => {
      const box = $<HTMLDialogElement>(dialog);
      if (!box.open) box.showModal();
      if (state.view) renderLookBack(state.view);
    });
  open("show-last-trick", "last-trick-dialog");
  open("show-sheet", "sheet-dialog");
  for (const [dialog, content] of [["last-trick-dialog", "last-trick"], ["sheet-dialog", "sheet"]] as const) {
    const box = $<HTMLDialogElement>(dialog);
    const empty = () => {
      $(content).replaceChildren(); // no card kept out of sight
      delete $(content).dataset.key;
    };
    // Emptied as it closes (the "close" event comes a task later; Escape closes by it).
    box.querySelector("button.close")?.addEventListener("click", () => {
      empty();
      box.close();
    });
    box.addEventListener("close", empty);
  }
}

// ------------------------------------------------------------------ clocks

/** The server's --quick-match-bots-after, which it writes into the page (0: none, or an
 * older server's page). */
export function quickMatchBotsAfter(): number {
  const meta = document.querySelector<HTMLMetaElement>('meta[name="copas-quick-match-bots-after"]');
  const seconds = Number(meta?.content ?? 0);
  return Number.isFinite(seconds) && seconds > 0 ? seconds : 0;
}

/** At a quick match still waiting for people: how long this person has waited, and when the
 * bots come for the free seats if nobody else does. */
function tickQuickWait(view: TableView | undefined): void {
  const box = $("quick-wait");
  const since = state.session?.quickSince;
  const after = quickMatchBotsAfter();
  box.hidden = !(view?.phase === Phase.WAITING_FOR_PLAYERS && since !== undefined && after > 0);
  if (box.hidden || since === undefined) return;
  const waited = Math.max(0, Math.floor((Date.now() - since) / 1000));
  const left = Math.max(0, Math.ceil(after - waited));
  box.textContent = left > 0 ? t("quick.wait", { waited, n: left }) : t("quick.botsNow", { waited });
  box.dataset.waited = String(waited);
  box.dataset.left = String(left);
}

/** The live countdowns: yours beside your hand, a bar on whoever must act, the pauses, a
 * quick match's wait. */
export function tick(): void {
  const countdown = $("countdown");
  const view = state.view;
  tickQuickWait(view);
  const paused = !!view?.pausedUntil;
  const until = paused ? state.resumes : state.deadline;
  const next = document.getElementById("next-hand");
  const moon = $("moon-countdown");
  if (next && view && isOver(view) && state.finalSummaryUntil !== undefined) {
    const left = Math.max(0, Math.ceil((state.finalSummaryUntil - performance.now()) / 1000));
    next.textContent = t("score.finalIn", { n: left });
    next.dataset.seconds = String(left);
  }
  if (view?.isHeld && !isOver(view)) {
    countdown.textContent = t("clock.paused");
    countdown.removeAttribute("data-seconds");
    countdown.classList.remove("urgent");
    moon.textContent = "";
    for (const fill of document.querySelectorAll<HTMLElement>("#seats .clock .fill")) fill.style.transform = "scaleX(1)";
    return;
  }
  if (!view || until === undefined || isOver(view)) {
    countdown.textContent = "";
    countdown.removeAttribute("data-seconds");
    countdown.classList.remove("urgent");
    moon.textContent = "";
    return;
  }
  const limit = paused ? Infinity : limitSeconds(view) || Infinity;
  const leftMs = Math.max(0, until - performance.now());
  // Never more than the table's limit (the view's time_left and its arrival are a step apart).
  const seconds = Math.min(Math.ceil(leftMs / 1000), limit);
  countdown.dataset.seconds = String(seconds);
  const isUrgent = !paused && seconds <= 5;
  countdown.classList.toggle("urgent", isUrgent);
  if (paused) countdown.textContent = t("clock.resumes", { n: seconds });
  else if (mustAct(view)) countdown.textContent = t("clock.left", { n: seconds });
  else countdown.textContent = t("clock.seconds", { n: seconds });
  if (next) {
    next.textContent = t("score.nextHand", { n: seconds });
    next.dataset.seconds = String(seconds);
  }
  moon.textContent = view.phase === Phase.MOON_CHOICE && !paused ? t("clock.moon", { n: seconds }) : "";
  const share = paused || !Number.isFinite(limit) ? 1 : Math.min(1, leftMs / 1000 / limit);
  for (const fill of document.querySelectorAll<HTMLElement>("#seats .clock .fill")) {
    fill.style.transform = `scaleX(${share.toFixed(3)})`; // CSSOM: allowed by the page's CSP
    fill.classList.toggle("urgent", isUrgent);
  }
}
