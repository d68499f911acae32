// What the page says: cards in one form (Q♠, 10♥; "queen of spades" for screen readers),
// presets, clocks and moon rules by their names, places, and every ErrorReason of the
// contract in plain words (no codes, no server messages).

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

export { pretty, SUIT_SYMBOL };

const SUIT_NAME: Record<number, string> = {
  [Suit.CLUBS]: "clubs",
  [Suit.DIAMONDS]: "diamonds",
  [Suit.SPADES]: "spades",
  [Suit.HEARTS]: "hearts",
};
const RANK_NAME: Record<string, string> = {
  "2": "two", "3": "three", "4": "four", "5": "five", "6": "six", "7": "seven", "8": "eight",
  "9": "nine", "10": "ten", J: "jack", Q: "queen", K: "king", A: "ace",
};

/** "queen of spades" for QS. */
export function cardName(card: Card): string {
  const rank = card.text.slice(0, -1);
  return `${RANK_NAME[rank] ?? rank} of ${SUIT_NAME[card.suit] ?? "?"}`;
}

export function isRed(card: Card): boolean {
  return card.suit === Suit.HEARTS || card.suit === Suit.DIAMONDS;
}

/** Points the card is worth when taken: 1 a heart, 13 the Q♠. */
export function cardPoints(card: Card): number {
  if (card.suit === Suit.HEARTS) return 1;
  return card.suit === Suit.SPADES && card.text === "QS" ? 13 : 0;
}

export const PRESET_NAME: Record<string, string> = {
  online: "Four hands",
  quick: "One hand",
  classic: "Classic: to 100 points",
  "20": "To 20 points",
  "50": "To 50 points",
  "100": "To 100 points",
};

export function presetName(preset: string): string {
  return PRESET_NAME[preset || "online"] ?? preset;
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

export const MOON_RULE_NAME: Record<number, string> = {
  [MoonRule.OTHERS_PLUS_26]: "moon: the others get 26",
  [MoonRule.SHOOTER_CHOICE]: "moon: the shooter chooses",
  [MoonRule.DISABLED]: "no moon",
};

/** The clocks the lobby offers: seconds to play, to pass, for the moon choice. */
export const CLOCKS: Record<string, { play: number; pass: number; moon: number }> = {
  standard: { play: 20, pass: 30, moon: 15 },
  relaxed: { play: 60, pass: 90, moon: 45 },
  fast: { play: 10, pass: 15, moon: 10 },
  none: { play: 0, pass: 0, moon: 0 },
};

export function clockName(rules: Rules | undefined): string {
  if (!rules || rules.playTimeoutSeconds <= 0) return "no time limit";
  return `${Math.round(rules.playTimeoutSeconds)} s a card`;
}

export function lengthName(rules: Rules | undefined): string {
  if (!rules) return "";
  if (rules.maxHands === 1) return "one hand";
  if (rules.maxHands > 0) return `${rules.maxHands} hands or ${rules.pointLimit} points`;
  return `to ${rules.pointLimit} points`;
}

export const DIRECTION_WORD: Record<number, string> = {
  [PassDirection.LEFT]: "left",
  [PassDirection.RIGHT]: "right",
  [PassDirection.ACROSS]: "across",
  [PassDirection.HOLD]: "hold",
};

export const END_REASON: Record<number, string> = {
  [GameEndReason.HAND_LIMIT]: "The last hand was played.",
  [GameEndReason.POINT_LIMIT]: "A player reached the point limit.",
  [GameEndReason.LAST_PLAYER]: "Everyone else left.",
  [GameEndReason.ABANDONED]: "The table ended the game: no person was playing.",
  [GameEndReason.CLOSED]: "An operator ended the game.",
  [GameEndReason.TIME_LIMIT]: "The round's time limit ended the game: the hand in progress does not count.",
};

/** Why a game ended, in words; a reason newer than this page still says the game ended. */
export function endReasonWords(reason: GameEndReason): string {
  return END_REASON[reason] ?? `The game ended (${GameEndReason[reason]?.toLowerCase().replaceAll("_", " ") ?? `reason ${reason}`}).`;
}

/** A championship table's end, short ("time limit", "closed"), "" while it plays or for an
 * ordinary end. */
export function shortEndReason(reason: GameEndReason): string {
  if (reason === GameEndReason.UNSPECIFIED || reason === GameEndReason.HAND_LIMIT || reason === GameEndReason.POINT_LIMIT) return "";
  const words: Record<number, string> = {
    [GameEndReason.TIME_LIMIT]: "time limit",
    [GameEndReason.CLOSED]: "closed by an operator",
    [GameEndReason.ABANDONED]: "abandoned",
    [GameEndReason.LAST_PLAYER]: "everyone else left",
  };
  return words[reason] ?? GameEndReason[reason]?.toLowerCase().replaceAll("_", " ") ?? `ended (reason ${reason})`;
}

export const MOON_CHOICE_BUTTON: Record<number, string> = {
  [MoonChoice.SUBTRACT_FROM_SELF]: "Take 26 off my total",
  [MoonChoice.ADD_TO_OTHERS]: "Add 26 to everyone else",
};

export function moonOutcome(choice: MoonChoice): string {
  if (choice === MoonChoice.SUBTRACT_FROM_SELF) return "took 26 off their total";
  if (choice === MoonChoice.ADD_TO_OTHERS) return "gave everyone else 26";
  return "everyone else gets 26";
}

/** 1 -> "1st". */
export function ordinal(n: number): string {
  const tens = n % 100;
  const suffix = tens >= 11 && tens <= 13 ? "th" : ({ 1: "st", 2: "nd", 3: "rd" } as Record<number, string>)[n % 10] ?? "th";
  return `${n}${suffix}`;
}

export function seatName(view: TableView, seat: number): string {
  return view.players[seat]?.displayName || `Seat ${seat + 1}`;
}

/** "Ana", "Ana and Bea", "Ana, Bea and Cid". */
export function listNames(names: string[]): string {
  if (names.length <= 1) return names.join("");
  return `${names.slice(0, -1).join(", ")} and ${names[names.length - 1]}`;
}

function ledSuit(view: TableView | undefined): string | undefined {
  const led = view?.trick?.cards[0]?.card;
  return led ? SUIT_SYMBOL[led.suit] : undefined;
}

function retryWords(why: Refusal): string {
  const seconds = why.retryAfterMs === undefined ? 0 : Math.ceil(why.retryAfterMs / 1000);
  return seconds > 0 ? ` Try again in ${seconds} s.` : " Try again in a moment.";
}

/** A refused call in plain words, from its ErrorInfo reason (the server stays the judge;
 * its message, written for developers, is never shown). */
export function refusalWords(why: Refusal, view?: TableView): string {
  const suit = ledSuit(view);
  const opening = view?.rules?.players === 5 ? "3♣" : "2♣";
  const words: Record<string, string> = {
    WRONG_PHASE: "The table has moved on: that move no longer fits.",
    NOT_YOUR_TURN: "It is not your turn.",
    SEAT_HAS_LEFT: "You left this game; the table plays your seat now.",
    CARD_NOT_IN_HAND: "That card is no longer in your hand.",
    MUST_FOLLOW_SUIT: suit ? `You must follow ${suit}.` : "You must follow the suit led.",
    HEARTS_NOT_BROKEN: "Hearts are not broken yet: lead another suit.",
    NO_POINTS_ON_FIRST_TRICK: "No point cards on the first trick while you hold another card.",
    MUST_LEAD_OPENING_CARD: `The first trick starts with the ${opening}.`,
    ALREADY_PASSED: "You already passed this hand.",
    NOT_THE_SHOOTER: "Only the player who shot the moon chooses.",
    TABLE_PAUSED: view?.isHeld
      ? "The championship is paused: play goes on when its organizer resumes it."
      : "The table is pausing between tricks: play again in a moment.",
    GAME_NOT_STARTED: "The game starts when every seat is taken.",
    SEAT_TAKEN: "That seat was just taken: choose another.",
    JOIN_GIVEN_UP: "That seat was given up: join again.",
    ALREADY_SEATED: "You already have a seat at that table: play the one you have.",
    PASS_NEEDS_THREE_CARDS: "Choose exactly three cards to pass.",
    INVALID_SEAT: "There is no such seat.",
    INVALID_CARD: "That is not a card.",
    INVALID_ACTION: "The server could not read that move.",
    INVALID_RULES: "Those table options are not allowed on this server.",
    INVALID_BOT_SEATS: "That number of bots does not fit the table.",
    INVALID_NAME: "Choose a name of 1 to 32 letters, without control or invisible characters.",
    NAME_RESERVED: "That name is kept for the server (its bots, its operators): choose another name.",
    NAME_TAKEN: "Another player already has that name (or one that looks the same): choose another.",
    FIELD_TOO_LONG: "Something typed is too long.",
    MISSING_TABLE_ID: "Give the id of a table.",
    REQUEST_ID_REUSED: "That request was already used: try again.",
    BAD_TOKEN: "Your seat is not known here: join the table again.",
    TOKEN_REVOKED: "Your seat is no longer yours: join again.",
    RESERVATION_EXPIRED: "Your seat was kept for you for a few seconds only: join again.",
    WRONG_TABLE: "Your seat belongs to another table.",
    SEED_NOT_ALLOWED: "This server does not take fixed deals.",
    TABLE_NOT_FOUND: "That table no longer exists.",
    TABLE_EXPIRED: "That table closed: nobody was at it.",
    TABLE_CLOSED: "An operator closed that table.",
    TABLE_FULL: "That table is full, or its game has started.",
    SERVER_FULL: "The server is full right now." + retryWords(why),
    TOO_MANY_BOT_TABLES: "Too many games of bots are playing right now." + retryWords(why),
    TOO_MANY_WATCHERS: "Too many people are watching that table.",
    TOO_MANY_STREAMS: "This seat is open in too many tabs: close one.",
    RATE_LIMITED: "Too many requests at once." + retryWords(why),
    TOO_MANY_TABLES: "You opened many tables in a short time." + retryWords(why),
    TOO_MANY_JOINS: "You joined many tables in a short time." + retryWords(why),
    TOO_MANY_CALLS: "Too many requests are waiting from your network." + retryWords(why),
    SHUTTING_DOWN: "The server is restarting." + retryWords(why),
    STORAGE_FAILED: "The server is restarting." + retryWords(why),
    TABLE_QUARANTINED: "This table cannot be played right now; the operators were told.",
    TABLE_MOVED: "The table moved to another server." + retryWords(why),
    NODE_DRAINING: "This server is about to restart and takes no new games." + retryWords(why),
    INVALID_CREDENTIALS: "That username and password do not match.",
    WEAK_DEVICE_SECRET: "This browser could not make a safe key: reload the page.",
    WEAK_PASSWORD: "Choose a password of 10 to 128 characters.",
    INVALID_USERNAME: "Choose a username of 3 to 32 letters, digits, dots, dashes or underscores.",
    IDENTITY_TAKEN: "That username is taken, or already linked to another account.",
    SESSION_EXPIRED: "You were signed out after a long while: sign in again.",
    SESSION_REVOKED: "You were signed out: sign in again.",
    SIGN_IN_REQUIRED: "Sign in first.",
    SPECTATING_CLOSED: "This championship table is watched by its players only, until its round ends.",
    RECORD_WITHHELD: "This game's round is still being played: its record comes when the round ends.",
    INVALID_ID_TOKEN: "That sign-in could not be checked: try again.",
    UNKNOWN_ISSUER: "This server does not accept that way to sign in.",
    ACCOUNT_BANNED: "This account may not play here.",
    TOO_MANY_SIGN_INS: "Too many sign-in attempts." + retryWords(why),
    TOO_MANY_ACCOUNTS: "Too many new accounts from your network." + retryWords(why),
    ACCOUNT_NOT_FOUND: "That account no longer exists.",
    ACCOUNT_ALREADY_SEATED: "You already have a seat at that table.",
    CHAMPIONSHIP_NOT_FOUND: "That championship does not exist here.",
    ALREADY_REGISTERED: "You are registered already.",
    NOT_REGISTERED: "You are not registered in this championship.",
    REGISTRATION_CLOSED: "Registration is closed.",
    REGISTRATION_NOT_OPEN: "Registration is not open yet: register when it opens.",
    CHAMPIONSHIP_FULL: "The championship is full.",
    ALREADY_WITHDRAWN: "You withdrew from this championship already.",
    CHAMPIONSHIP_NOT_RUNNING: "The championship is not in a state for that (not started, or over).",
    NOT_ENOUGH_PLAYERS: "Not enough players are registered to start (at least 3, and its minimum).",
    INVALID_PLAYER_LIMITS: "The numbers of players do not fit: at least 3, the minimum not above the maximum.",
    INVALID_ROUNDS: "A championship has 1 to 20 rounds.",
    INVALID_CHAMPIONSHIP: "Those championship settings are not allowed: check the name, the times and the limits.",
    MATCHPOINTS_NEED_DUPLICATE_DEALS: "Matchpoints compare tables dealt the same cards: choose duplicate deals too.",
    TOO_MANY_CHAMPIONSHIPS: "You have as many championships under way as this server allows: wait for one to end.",
    CHECK_IN_NOT_OPEN: "Check-in is not open yet.",
    CHECK_IN_CLOSED: "Check-in is over: the championship has started.",
    ROUND_NOT_ANNOUNCED: "That round's pairings are not waiting to start.",
    ROUND_ALREADY_STARTED: "That round's tables are made: its pairings are final.",
    PLAYER_NOT_IN_ROUND: "That player does not play that round.",
    INVALID_SWAP: "Choose two players at two different tables.",
    CHAMPIONSHIP_TABLE_NOT_FOUND: "That round has no such table.",
    TABLE_NOT_COUNTED: "That table's game is not over and counted yet.",
    INVALID_RESULT: "A result is one total per seat (none negative), each seat at most once among the leavers and the absent.",
    RESULT_LOCKED: "That result can no longer be changed (the final is seated, or the championship was cancelled).",
    ALREADY_DISQUALIFIED: "That player is disqualified already.",
    ADMIN_DISABLED: "This server takes no operator calls (it has no operator's token).",
    ADMIN_CREDENTIAL_REQUIRED: "Type the operator's token first.",
    ADMIN_DENIED: "That is not the operator's token.",
    MISSING_REASON: "Say why, for the operators' log.",
  };
  const byCode: Record<string, string> = {
    UNAVAILABLE: "The server cannot be reached." + retryWords(why),
    DEADLINE_EXCEEDED: "The server took too long to answer." + retryWords(why),
    CANCELED: "The request was cancelled.",
    UNIMPLEMENTED: "This server does not take that call here.",
  };
  return words[why.reason] ?? byCode[why.code] ?? "The server refused that.";
}
