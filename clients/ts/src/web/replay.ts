// A finished game again, trick by trick (issue 40): the record GetGameRecord gives (the server
// decides what a viewer may see: a championship round's records only once the round is over)
// is read into steps, each hand's deal (every seat's cards as dealt: the record's `deals`, the
// seed replayed by the server, when it has them), its pass, then each of its tricks, and drawn
// as the table was:
// the trick's cards in front of their seats, who took it, the points each seat took so far in
// the hand, and the score sheet beside it. Its link is #/replay/<record id>.

import { create } from "@bufbuild/protobuf";
import type { Client } from "@connectrpc/connect";
import { type Card, CardSchema } from "../gen/copas/v1/cards_pb.js";
import type { CopasService, GameRecord } from "../gen/copas/v1/copas_pb.js";
import { biscaPointsOf, biscaTrickWinner } from "../bisca.js";
import { refusal } from "../copas.js";
import { $, element } from "./dom.js";
import { t } from "./i18n.js";
import { cardFace } from "./table.js";
import { cardPoints, listNames, ordinal, refusalWords } from "./words.js";

const SUITS: Record<string, number> = { C: 1, D: 2, S: 3, H: 4 };
const RANKS: Record<string, number> = { J: 11, Q: 12, K: 13, A: 14 };
const LINK = /^#\/replay\/([\w-]{1,64})$/;

/** "QS" as the contract's Card. */
export function cardOf(text: string): Card {
  const rank = text.slice(0, -1);
  return create(CardSchema, { suit: SUITS[text.slice(-1)] ?? 0, rank: RANKS[rank] ?? Number(rank), text });
}

interface Played {
  seat: number;
  card: string;
}

/** One step of the replay: a hand's deal, its pass, or one of its tricks (whole, or the last,
 * cut short). */
export interface Step {
  hand: number;
  kind: "deal" | "pass" | "trick";
  trick: number; // 0-based; -1 for the deal and the pass
  cards: Played[]; // the trick's, in the order played
  passes: { seat: number; cards: string[] }[];
  winner?: number;
  points: number;
  dealt?: string[][]; // the deal's: each seat's cards
}

interface Action {
  type: string;
  seat: number;
  card?: string;
  cards?: string[];
}

/** The seat that takes ``cards`` (the highest of the suit led). */
export function trickWinner(cards: Played[]): number | undefined {
  const led = cards[0];
  if (!led) return undefined;
  const suit = led.card.slice(-1);
  let best = led;
  for (const played of cards) {
    if (played.card.slice(-1) === suit && cardOf(played.card).rank > cardOf(best.card).rank) best = played;
  }
  return best.seat;
}

/** A Bisca record's trump card of each hand ("7H"); none for Hearts. */
export interface BiscaHands {
  trumps: string[];
}

/** The record's actions as steps: per hand its deal (when ``deals`` has it), its pass (when it
 * had one), then its tricks (a Bisca record's, with ``bisca``: 40 cards, trumps, its points). */
export function stepsOf(actions: Action[], players: number, deals: string[][][] = [], bisca?: BiscaHands): Step[] {
  const steps: Step[] = [];
  for (const step of playSteps(actions, players, bisca)) {
    const dealt = deals[step.hand];
    if (dealt && steps[steps.length - 1]?.hand !== step.hand) {
      steps.push({ hand: step.hand, kind: "deal", trick: -1, cards: [], passes: [], points: 0, dealt });
    }
    steps.push(step);
  }
  return steps;
}

/** The passes and tricks of the record's actions, hand by hand. */
function playSteps(actions: Action[], players: number, bisca?: BiscaHands): Step[] {
  const perHand = Math.floor((bisca ? 40 : 52) / players);
  const steps: Step[] = [];
  let hand = 0;
  let tricks = 0; // this hand's tricks so far
  let passes: Step["passes"] = [];
  let current: Played[] = [];
  const close = () => {
    const cards = current;
    const isWhole = cards.length === players;
    const winner = !isWhole ? undefined : bisca ? biscaTrickWinner(cards, (bisca.trumps[hand] ?? "").slice(-1)) : trickWinner(cards);
    const points = cards.reduce((sum, p) => sum + (bisca ? biscaPointsOf(p.card) : cardPoints(cardOf(p.card))), 0);
    steps.push({ hand, kind: "trick", trick: tricks, cards, passes: [], winner, points });
    current = [];
    tricks += 1;
    if (tricks === perHand) {
      hand += 1;
      tricks = 0;
    }
  };
  for (const action of actions) {
    if (action.type === "pass" && action.cards) {
      passes.push({ seat: action.seat, cards: action.cards });
      if (passes.length === players) {
        steps.push({ hand, kind: "pass", trick: -1, cards: [], passes, points: 0 });
        passes = [];
      }
    } else if (action.type === "play" && action.card) {
      current.push({ seat: action.seat, card: action.card });
      if (current.length === players) close();
    }
  }
  if (passes.length) steps.push({ hand, kind: "pass", trick: -1, cards: [], passes, points: 0 });
  if (current.length) close(); // the game ended in the middle of a trick
  return steps;
}

let client: Client<typeof CopasService> | undefined;
let record: GameRecord | undefined;
let steps: Step[] = [];
let at = 0;
let trumps: string[] = []; // a Bisca record's trump card of each hand
let leave: () => void = () => undefined;

function name(seat: number): string {
  return record?.seats[seat]?.displayName || t("seat.numbered", { n: seat + 1 });
}

function show(index: number): void {
  at = Math.max(0, Math.min(index, steps.length - 1));
  const step = steps[at];
  const box = $("replay");
  box.dataset.step = String(at);
  box.dataset.steps = String(steps.length);
  const perHand = steps.filter((s) => s.hand === step?.hand && s.kind === "trick").length;
  $("replay-where").textContent = !step
    ? t("replay.empty")
    : step.kind === "deal"
      ? t("replay.deal", { hand: step.hand + 1 })
      : step.kind === "pass"
      ? t("replay.pass", { hand: step.hand + 1 })
      : t("replay.trick", { hand: step.hand + 1, n: step.trick + 1, of: perHand });
  $<HTMLButtonElement>("replay-prev").disabled = at <= 0;
  $<HTMLButtonElement>("replay-next").disabled = at >= steps.length - 1;
  $<HTMLButtonElement>("replay-prev-hand").disabled = !step || step.hand === 0;
  $<HTMLButtonElement>("replay-next-hand").disabled = !step || !steps.some((s) => s.hand > step.hand);
  const trump = step ? trumps[step.hand] : undefined;
  if (trump) $("replay-where").append(` · ${t("replay.trump", { card: trump })}`);
  $("replay").dataset.trump = trump ?? "";
  drawTable(step);
  drawSheet(step);
}

/** The seats around the trick, each with what it played (or passed) and took this hand. */
function drawTable(step: Step | undefined): void {
  const seats = record?.seats ?? [];
  const taken = new Map<number, number>();
  for (const s of steps.slice(0, at + 1)) {
    if (step && s.hand === step.hand && s.winner !== undefined) taken.set(s.winner, (taken.get(s.winner) ?? 0) + s.points);
  }
  const list = element("ol", "", { class: "replay-seats", "data-kind": step?.kind ?? "" });
  for (const seat of seats) {
    const item = element("li", "", { "data-seat": String(seat.seat), "data-winner": String(step?.winner === seat.seat) });
    item.append(element("span", name(seat.seat), { class: "name" }));
    const played = step?.cards.find((c) => c.seat === seat.seat);
    const passed = step?.passes.find((p) => p.seat === seat.seat);
    const dealt = step?.dealt?.[seat.seat] ?? [];
    const cards = element("span", "", { class: dealt.length ? "replay-cards dealt" : "replay-cards" });
    cards.append(...dealt.map((c) => cardFace(cardOf(c))));
    if (played) cards.append(cardFace(cardOf(played.card)));
    if (passed) cards.append(...passed.cards.map((c) => cardFace(cardOf(c))));
    item.append(cards, element("span", t("replay.took", { n: taken.get(seat.seat) ?? 0 }), { class: "took", "data-taken": String(taken.get(seat.seat) ?? 0) }));
    list.append(item);
  }
  const line = step?.kind === "deal" ? t(trumps.length ? "replay.dealLineBisca" : "replay.dealLine") : !step || step.kind === "pass" ? t("replay.passLine") : step.winner === undefined ? t("replay.cut") : t("trick.takes", { name: name(step.winner), n: step.points });
  $("replay-table").replaceChildren(list, element("p", line, { class: "replay-line", id: "replay-line" }));
}

/** The hands scored so far (the current one once its last trick is shown), then the totals. */
function drawSheet(step: Step | undefined): void {
  const hands = record?.hands ?? [];
  const seats = record?.seats ?? [];
  const last = steps[steps.length - 1];
  const isHandDone = (hand: number) => {
    const later = steps.some((s, i) => i > at && s.hand === hand);
    return !later || (step !== undefined && step.hand > hand);
  };
  const shown = hands.filter((h) => step !== undefined && (h.handNumber < step.hand || (h.handNumber === step.hand && isHandDone(h.handNumber))));
  const table = element("table", "", { class: "sheet", id: "replay-sheet-table" });
  table.append(element("caption", t("score.sheetCaption"), { class: "visually-hidden" }));
  const head = element("tr");
  head.append(element("th", t("col.hand"), { scope: "col" }), ...seats.map((s) => element("th", name(s.seat), { scope: "col" })));
  const body = element("tbody");
  for (const hand of shown) {
    const row = element("tr", "", { "data-hand": String(hand.handNumber) });
    row.append(element("th", t("table.hand", { n: hand.handNumber + 1 }), { scope: "row" }));
    row.append(...seats.map((s) => element("td", `${hand.points[s.seat] ?? 0}${hand.moonShooter === s.seat ? " 🌙" : ""}`, { "data-points": String(hand.points[s.seat] ?? 0) })));
    body.append(row);
  }
  const totals = element("tr", "", { class: "totals" });
  totals.append(element("th", t("col.total"), { scope: "row" }));
  const lastShown = shown[shown.length - 1];
  totals.append(...seats.map((s) => {
    const total = lastShown?.totals[s.seat] ?? 0;
    return element("td", String(total), { "data-seat": String(s.seat), "data-total": String(total) });
  }));
  body.append(totals);
  const thead = element("thead");
  thead.append(head);
  table.append(thead, body);
  const nodes: Node[] = [table];
  if (step && last && at === steps.length - 1) {
    const places = (record?.standings ?? []).map((s) => t("replay.place", { place: ordinal(s.place), name: name(s.seat), total: s.total }));
    nodes.push(element("p", listNames(places), { class: "replay-result", id: "replay-result" }));
  }
  $("replay-sheet").replaceChildren(...nodes);
}

function firstOfHand(hand: number): number {
  return Math.max(0, steps.findIndex((s) => s.hand === hand));
}

/** Opens the replay of ``recordId`` (the lobby and the table go out of sight). */
export async function openReplay(recordId: string): Promise<void> {
  if (!client) return;
  leave();
  $("lobby").hidden = true;
  $("game").hidden = true;
  const box = $("replay");
  box.hidden = false;
  box.dataset.record = recordId;
  $("replay-error").textContent = "";
  $("replay-title").textContent = t("replay.title");
  record = undefined;
  steps = [];
  trumps = [];
  show(0);
  if (location.hash !== `#/replay/${recordId}`) history.replaceState(null, "", `/#/replay/${recordId}`);
  scrollTo(0, 0);
  try {
    const answer = await client.getGameRecord({ recordId });
    record = answer.record;
    const data = JSON.parse(record?.recordJson || "{}") as {
      game?: string;
      actions?: Action[];
      deals?: string[][][];
      result?: { hands?: { trump_card?: string }[] };
    };
    trumps = data.game === "bisca" ? (data.result?.hands ?? []).map((h) => h.trump_card ?? "") : [];
    const bisca = data.game === "bisca" ? { trumps } : undefined;
    steps = stepsOf(data.actions ?? [], record?.seats.length || 4, data.deals ?? [], bisca);
    $("replay-title").textContent = t("replay.titleOf", { name: record?.displayName || t("lobby.openTable") });
    const names = (record?.seats ?? []).map((s) => name(s.seat));
    $("replay-info").textContent = listNames(names);
    box.dataset.loaded = "true";
    show(0);
  } catch (error) {
    const why = refusal(error);
    $("replay-error").textContent = t("replay.failed", { why: refusalWords(why) });
  }
}

function closeReplay(toLobby: () => void): void {
  $("replay").hidden = true;
  delete $("replay").dataset.loaded;
  if (location.hash) history.replaceState(null, "", "/");
  toLobby();
}

/** The replay's buttons and its link (#/replay/ID, opened on load and on a change of hash). */
export function startReplay(given: Client<typeof CopasService>, leaveTable: () => void, toLobby: () => void): boolean {
  client = given;
  leave = leaveTable;
  $("replay-prev").addEventListener("click", () => show(at - 1));
  $("replay-next").addEventListener("click", () => show(at + 1));
  $("replay-prev-hand").addEventListener("click", () => {
    const hand = steps[at]?.hand ?? 0;
    show(firstOfHand(steps[at]?.kind === "pass" || steps[firstOfHand(hand)] === steps[at] ? hand - 1 : hand));
  });
  $("replay-next-hand").addEventListener("click", () => show(firstOfHand((steps[at]?.hand ?? 0) + 1)));
  $("replay-back").addEventListener("click", () => closeReplay(toLobby));
  $("replay-copy").addEventListener("click", () => {
    const link = `${location.origin}/#/replay/${$("replay").dataset.record ?? ""}`;
    void navigator.clipboard?.writeText(link).then(() => ($("replay-copy").textContent = t("game.copied")), () => undefined);
  });
  addEventListener("hashchange", () => {
    const found = LINK.exec(location.hash);
    if (found) void openReplay(found[1]!);
  });
  const found = LINK.exec(location.hash);
  if (found) void openReplay(found[1]!);
  return !!found;
}
