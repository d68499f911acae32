// Bisca (docs/RULES.md, "Bisca"; docs/CLIENTS.md, "Bisca over the contract") for every
// TypeScript client, in Node and in the browser alike: the kinds of table a person chooses,
// the requests that make or find one, a Bisca hand in the game's order, and each side's
// points from the view. Imports only the generated code.

import type { MessageInitShape } from "@bufbuild/protobuf";
import { type Card, Rank } from "./gen/copas/v1/cards_pb.js";
import type {
  CreateTableRequestSchema,
  JoinTableRequestSchema,
  Rules,
  TableView,
} from "./gen/copas/v1/copas_pb.js";

export const BISCA = "bisca";

/** A kind of table a person chooses: a game, its preset, its seats, partners or not. */
export interface GameKind {
  /** "hearts" or "bisca" (Rules.game). */
  game: string;
  preset: string;
  players: number;
  partnerships: boolean;
}

/** Hearts as it always was: its first preset, four seats. */
export const HEARTS_KIND: GameKind = { game: "hearts", preset: "online", players: 4, partnerships: false };

/** Bisca's kinds, as its presets seat them (docs/RULES.md, "Bisca"): the first is the default. */
export const BISCA_KINDS: readonly GameKind[] = [
  { game: BISCA, preset: "bisca3", players: 2, partnerships: false },
  { game: BISCA, preset: "bisca7", players: 2, partnerships: false },
  { game: BISCA, preset: "bisca9", players: 2, partnerships: false },
  { game: BISCA, preset: "pairs", players: 4, partnerships: true },
  { game: BISCA, preset: "four", players: 4, partnerships: false },
  { game: BISCA, preset: "three", players: 3, partnerships: false },
  { game: BISCA, preset: "six", players: 6, partnerships: true },
];

/** The kind of ``preset`` of ``game`` (Bisca's by its preset; Hearts's is HEARTS_KIND), a
 * copy the caller may change. */
export function kindOf(game: string, preset = ""): GameKind {
  if (game !== BISCA) return { ...HEARTS_KIND, preset: preset || HEARTS_KIND.preset };
  return { ...(BISCA_KINDS.find((k) => k.preset === (preset || "bisca3")) ?? { ...BISCA_KINDS[0], preset }) };
}

/** No pauses and no clocks: for a client that answers at once (a Bisca table takes no pass
 * or moon clock, which are Hearts's options). */
function noWaiting(game: string) {
  const common = { trickPauseSeconds: 0, handPauseSeconds: 0, playTimeoutSeconds: 0 };
  return game === BISCA ? common : { ...common, passTimeoutSeconds: 0, moonTimeoutSeconds: 0 };
}

/**
 * CreateTable for a person and bots at a table of ``kind``: the person takes the one seat the
 * bots leave. ``immediate`` takes away the pauses and clocks.
 */
export function createTableRequest(
  kind: GameKind,
  options: {
    displayName?: string;
    playerDisplayName?: string;
    requestId?: string;
    seed?: string;
    immediate?: boolean;
    botSeats?: number;
    playTimeoutSeconds?: number;
  } = {},
): MessageInitShape<typeof CreateTableRequestSchema> {
  const isHearts = kind.game !== BISCA;
  const clock = options.playTimeoutSeconds === undefined ? {} : { playTimeoutSeconds: options.playTimeoutSeconds };
  return {
    game: isHearts ? "" : kind.game,
    preset: kind.preset,
    botSeats: options.botSeats ?? kind.players - 1,
    displayName: options.displayName ?? "",
    ...(options.playerDisplayName === undefined ? {} : { playerDisplayName: options.playerDisplayName }),
    ...(options.requestId === undefined ? {} : { requestId: options.requestId }),
    seed: options.seed,
    rules: {
      ...(options.immediate ? noWaiting(kind.game) : clock),
      // Hearts's tables keep their preset's seats, as they always did.
      ...(isHearts ? {} : { players: kind.players }),
    },
  };
}

/** JoinTable for a quick match of ``kind``: a table of people of that game and kind. */
export function quickMatchRequest(kind: GameKind, displayName = ""): MessageInitShape<typeof JoinTableRequestSchema> {
  if (kind.game !== BISCA) return { preset: kind.preset, displayName };
  return {
    game: kind.game,
    preset: kind.preset,
    players: kind.players,
    partnerships: kind.partnerships,
    displayName,
  };
}

export function isBisca(rules: Rules | undefined): boolean {
  return rules?.game === BISCA;
}

/** Bisca's ranks, high to low: A 7 K J Q 6 5 4 3 2 (no 8, 9 or 10). */
export const BISCA_RANKS: readonly Rank[] = [
  Rank.ACE,
  Rank.SEVEN,
  Rank.KING,
  Rank.JACK,
  Rank.QUEEN,
  Rank.SIX,
  Rank.FIVE,
  Rank.FOUR,
  Rank.THREE,
  Rank.TWO,
];

const CARD_POINTS: Partial<Record<Rank, number>> = {
  [Rank.ACE]: 11,
  [Rank.SEVEN]: 10,
  [Rank.KING]: 4,
  [Rank.JACK]: 3,
  [Rank.QUEEN]: 2,
};

/** What a card is worth at Bisca: A 11, 7 10, K 4, J 3, Q 2, the rest 0. */
export function biscaPoints(card: Card): number {
  return CARD_POINTS[card.rank] ?? 0;
}

/** A Bisca hand by suit (the trump suit last), then high to low in Bisca's order. */
export function sortBiscaHand(hand: readonly Card[], trumpSuit?: number): Card[] {
  const suitKey = (c: Card) => (c.suit === trumpSuit ? 10 : c.suit);
  return [...hand].sort((a, b) => suitKey(a) - suitKey(b) || BISCA_RANKS.indexOf(a.rank) - BISCA_RANKS.indexOf(b.rank));
}

/** One side of a Bisca table: a seat alone, or a team of partners. */
export interface Side {
  side: number;
  seats: number[];
  /** Card points this side took this hand. */
  points: number;
  /** Its game points. */
  total: number;
}

/** The sides of a Bisca view, each with its seats and points (teams by number in
 * partnerships, else a side per seat). */
export function sides(view: TableView): Side[] {
  const bisca = view.bisca;
  if (!bisca) return [];
  const seats = view.players.map((p) => p.seat);
  const count = Math.max(bisca.sidePoints.length, bisca.sideTotals.length);
  return Array.from({ length: count }, (_, side) => ({
    side,
    seats: bisca.teams.length ? seats.filter((s) => bisca.teams[s] === side) : [side],
    points: bisca.sidePoints[side] ?? 0,
    total: bisca.sideTotals[side] ?? 0,
  }));
}

/** The side ``seat`` plays for: its team in partnerships, else itself. */
export function sideOf(view: TableView, seat: number): number {
  const teams = view.bisca?.teams ?? [];
  return teams.length ? (teams[seat] ?? seat) : seat;
}

/** Whom a Bisca trick goes to (cards as text, "7H", in the order played): the highest trump
 * if any was played, else the highest card of the suit led, in Bisca's order. */
export function biscaTrickWinner(cards: readonly { seat: number; card: string }[], trumpSuit: string): number | undefined {
  const led = cards[0];
  if (!led) return undefined;
  const strength = (text: string) => BISCA_RANKS.length - BISCA_RANKS.indexOf(RANK_OF[text.slice(0, -1)] ?? Rank.TWO);
  const rank = (text: string) =>
    text.slice(-1) === trumpSuit ? 100 + strength(text) : text.slice(-1) === led.card.slice(-1) ? strength(text) : 0;
  let best = led;
  for (const played of cards) if (rank(played.card) > rank(best.card)) best = played;
  return best.seat;
}

const RANK_OF: Record<string, Rank> = {
  A: Rank.ACE,
  K: Rank.KING,
  Q: Rank.QUEEN,
  J: Rank.JACK,
  "7": Rank.SEVEN,
  "6": Rank.SIX,
  "5": Rank.FIVE,
  "4": Rank.FOUR,
  "3": Rank.THREE,
  "2": Rank.TWO,
};

/** A Bisca card's points by its text ("AS": 11). */
export function biscaPointsOf(text: string): number {
  return CARD_POINTS[RANK_OF[text.slice(0, -1)] ?? Rank.TWO] ?? 0;
}
