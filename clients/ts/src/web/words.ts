// What the page says: cards in one form (Q♠, 10♥; "queen of spades" for screen readers),
// presets, clocks and moon rules by their names, places, and every ErrorReason of the
// contract in plain words (no codes, no server messages), all from the catalogue (i18n.ts).

import { type Card, Suit } from "../gen/copas/v1/cards_pb.js";
import {
  GameEndReason,
  MoonChoice,
  MoonRule,
  PassDirection,
  type Rules,
  type TableView,
} from "../gen/copas/v1/copas_pb.js";
import { pretty, SUIT_SYMBOL, type Refusal } from "../copas.js";
import { isKey, type Key, locale, t } from "../i18n.js";

export { pretty, SUIT_SYMBOL };

const SUIT_KEY: Record<number, Key> = {
  [Suit.CLUBS]: "suit.clubs",
  [Suit.DIAMONDS]: "suit.diamonds",
  [Suit.SPADES]: "suit.spades",
  [Suit.HEARTS]: "suit.hearts",
};

/** "queen of spades" for QS ("dama de espadas" in Portuguese). */
export function cardName(card: Card): string {
  const rank = card.text.slice(0, -1);
  const rankKey = `rank.${rank}`;
  const suit = SUIT_KEY[card.suit];
  return t("card.name", { rank: isKey(rankKey) ? t(rankKey) : rank, suit: suit ? t(suit) : "?" });
}

export function isRed(card: Card): boolean {
  return card.suit === Suit.HEARTS || card.suit === Suit.DIAMONDS;
}

/** Points the card is worth when taken: 1 a heart, 13 the Q♠. */
export function cardPoints(card: Card): number {
  if (card.suit === Suit.HEARTS) return 1;
  return card.suit === Suit.SPADES && card.text === "QS" ? 13 : 0;
}

export function presetName(preset: string): string {
  const key = `preset.${preset || "online"}`;
  return isKey(key) ? t(key) : preset;
}

/** The moon rule each preset starts from (engine/rules.py PRESETS). */
export const PRESET_MOON: Record<string, MoonRule> = {
  online: MoonRule.OTHERS_PLUS_26,
  quick: MoonRule.SHOOTER_CHOICE,
  classic: MoonRule.SHOOTER_CHOICE,
  "20": MoonRule.SHOOTER_CHOICE,
  "50": MoonRule.SHOOTER_CHOICE,
  "100": MoonRule.SHOOTER_CHOICE,
};

const MOON_RULE_KEY: Record<number, Key> = {
  [MoonRule.OTHERS_PLUS_26]: "moonName.others",
  [MoonRule.SHOOTER_CHOICE]: "moonName.choice",
  [MoonRule.DISABLED]: "moonName.off",
};

/** "moon: the others get 26"; "" for a rule newer than this page. */
export function moonRuleName(rule: MoonRule): string {
  const key = MOON_RULE_KEY[rule];
  return key ? t(key) : "";
}

/** The clocks the lobby offers: seconds to play, to pass, for the moon choice. */
export const CLOCKS: Record<string, { play: number; pass: number; moon: number }> = {
  standard: { play: 20, pass: 30, moon: 15 },
  relaxed: { play: 60, pass: 90, moon: 45 },
  fast: { play: 10, pass: 15, moon: 10 },
  none: { play: 0, pass: 0, moon: 0 },
};

export function clockName(rules: Rules | undefined): string {
  if (!rules || rules.playTimeoutSeconds <= 0) return t("clockName.none");
  return t("clockName.card", { n: Math.round(rules.playTimeoutSeconds) });
}

export function lengthName(rules: Rules | undefined): string {
  if (!rules) return "";
  if (rules.maxHands === 1) return t("length.one");
  if (rules.maxHands > 0) return t("length.hands", { n: rules.maxHands, points: rules.pointLimit });
  return t("length.points", { points: rules.pointLimit });
}

const DIRECTION_KEY: Record<number, Key> = {
  [PassDirection.LEFT]: "direction.left",
  [PassDirection.RIGHT]: "direction.right",
  [PassDirection.ACROSS]: "direction.across",
  [PassDirection.HOLD]: "direction.hold",
};

/** The pass's way in words ("left", "para a esquerda"). */
export function directionWords(direction: PassDirection): string {
  return t(DIRECTION_KEY[direction] ?? "direction.hold");
}

/** The pass's way as data (left, right, across, hold): for the page's attributes, not words. */
export const DIRECTION_NAME: Record<number, string> = {
  [PassDirection.LEFT]: "left",
  [PassDirection.RIGHT]: "right",
  [PassDirection.ACROSS]: "across",
  [PassDirection.HOLD]: "hold",
};

function enumWords(name: string | undefined, reason: number): string {
  return name?.toLowerCase().replaceAll("_", " ") ?? t("end.reasonNumber", { n: String(reason) });
}

/** Why a game ended, in words; a reason newer than this page still says the game ended. */
export function endReasonWords(reason: GameEndReason): string {
  const key = `end.${GameEndReason[reason]}`;
  return isKey(key) ? t(key) : t("end.other", { reason: enumWords(GameEndReason[reason], reason) });
}

/** A championship table's end, short ("time limit", "closed"), "" while it plays or for an
 * ordinary end. */
export function shortEndReason(reason: GameEndReason): string {
  if (reason === GameEndReason.UNSPECIFIED || reason === GameEndReason.HAND_LIMIT || reason === GameEndReason.POINT_LIMIT) return "";
  const key = `endShort.${GameEndReason[reason]}`;
  return isKey(key) ? t(key) : t("endShort.other", { reason: enumWords(GameEndReason[reason], reason) });
}

/** The moon dialog's button for ``choice``. */
export function moonChoiceButton(choice: MoonChoice): string {
  if (choice === MoonChoice.SUBTRACT_FROM_SELF) return t("moon.subtract");
  if (choice === MoonChoice.ADD_TO_OTHERS) return t("moon.add");
  return MoonChoice[choice] ?? String(choice);
}

/** What the shooter's choice did; ``isYou`` when the reader is the shooter ("your total"). */
export function moonOutcome(choice: MoonChoice, isYou = false): string {
  if (choice === MoonChoice.SUBTRACT_FROM_SELF) return t(isYou ? "moon.tookOffYou" : "moon.tookOff");
  if (choice === MoonChoice.ADD_TO_OTHERS) return t("moon.gave");
  return t("moon.others");
}

/** 1 -> "1st" ("1.º" in Portuguese). */
export function ordinal(n: number): string {
  const form = new Intl.PluralRules("en-GB", { type: "ordinal" }).select(n);
  const key = `ordinal.${form}`;
  return t(isKey(key) ? key : "ordinal.other", { n: String(n) });
}

export function seatName(view: TableView, seat: number): string {
  return view.players[seat]?.displayName || t("seat.numbered", { n: seat + 1 });
}

/** "Ana", "Ana and Bea", "Ana, Bea and Cid" ("Ana, Bea e Cid"). */
export function listNames(names: string[]): string {
  return new Intl.ListFormat(locale(), { style: "long", type: "conjunction" }).format(names);
}

function ledSuit(view: TableView | undefined): string | undefined {
  const led = view?.trick?.cards[0]?.card;
  return led ? SUIT_SYMBOL[led.suit] : undefined;
}

function retryWords(why: Refusal): string {
  const seconds = why.retryAfterMs === undefined ? 0 : Math.ceil(why.retryAfterMs / 1000);
  return seconds > 0 ? t("retry.in", { n: seconds }) : t("retry.moment");
}

/** The refusals a person may simply try again later: their words say when. */
const RETRY = new Set([
  "SERVER_FULL", "TOO_MANY_BOT_TABLES", "RATE_LIMITED", "TOO_MANY_TABLES", "TOO_MANY_JOINS", "TOO_MANY_CALLS",
  "SHUTTING_DOWN", "STORAGE_FAILED", "TABLE_MOVED", "NODE_DRAINING", "TOO_MANY_SIGN_INS", "TOO_MANY_ACCOUNTS",
  "UNAVAILABLE", "DEADLINE_EXCEEDED",
]);

/** A refused call in plain words, from its ErrorInfo reason (the server stays the judge;
 * its message, written for developers, is never shown). */
export function refusalWords(why: Refusal, view?: TableView): string {
  const suit = ledSuit(view);
  const card = view?.rules?.players === 5 ? "3♣" : "2♣";
  let key = `refusal.${why.reason}`;
  if (why.reason === "MUST_FOLLOW_SUIT" && !suit) key = "refusal.MUST_FOLLOW_SUIT_LED";
  if (why.reason === "TABLE_PAUSED" && view?.isHeld) key = "refusal.TABLE_HELD";
  if (isKey(key)) return t(key, { suit: suit ?? "", card }) + (RETRY.has(why.reason) ? retryWords(why) : "");
  const byCode = `refusalCode.${why.code}`;
  if (isKey(byCode)) return t(byCode) + (RETRY.has(why.code) ? retryWords(why) : "");
  return t("refusal.other");
}
