// What this tab knows: where it is (a seat's token, or watching), the latest view and the
// public facts the view does not carry (the point cards each seat took this hand, the last
// hand's score), all from the server's streams.

import type { Card } from "../gen/copas/v1/cards_pb.js";
import type { HandScored, MoonChoice, TableView } from "../gen/copas/v1/copas_pb.js";

/** Where this tab is: at a table with a seat (token), or watching one. Kept in
 * sessionStorage so that a reload keeps the seat (the token is the only secret in it). */
export interface Session {
  tableId: string;
  token?: string;
  seat?: number;
  /** When this tab's quick match seated it (ms since 1970): the page counts the wait. */
  quickSince?: number;
}

/** How the last game this tab opened was made, for "Play again". */
export interface Setup {
  preset: string;
  clock: string;
  moon: string;
  friends: number; // 0: against bots
  /** The lobby's card game: "hearts" (or unset), else a Bisca kind's preset (web/bisca.ts). */
  game?: string;
}

export const state = {
  session: undefined as Session | undefined,
  view: undefined as TableView | undefined,
  sequence: 0n,
  lastHand: undefined as HandScored | undefined,
  /** Every hand's score seen (HandScored events, public), by hand number: the score sheet. */
  hands: new Map<number, HandScored>(),
  /** performance.now() until which the game's last hand shows its summary, before the
   * standings (the game ends without a hand pause); undefined once it is over. */
  finalSummaryUntil: undefined as number | undefined,
  /** Point cards taken this hand, per seat, from the TrickWon events (public). */
  taken: new Map<number, Card[]>(),
  /** The hand `taken` is about; -1 when not known (then it is not shown). */
  takenHand: -1,
  chosen: [] as Card[], // the cards picked for a pass
  deadline: undefined as number | undefined, // performance.now() when the turn runs out
  resumes: undefined as number | undefined, // performance.now() when a pause ends
  isBusy: false, // a move is on its way
  /** The sequence of this tab's last accepted move: until the stream shows it, the view is
   * older than the move and the turn is not ours again (no second beep, no stale buttons). */
  awaiting: 0n,
  hint: "",
  error: "",
  errorReason: "",
  watching: undefined as AbortController | undefined,
  lastSetup: undefined as Setup | undefined,
};

/** What the drawing code may ask the rest of the page to do. */
export interface Actions {
  onCard(card: Card): void;
  onPass(): void;
  chooseMoon(choice: MoonChoice): void;
  playAgain(): void;
  toLobby(): void;
}

/** Whether a move of ours is on its way or accepted but not yet seen on the stream. */
export function isBusy(): boolean {
  return state.isBusy || state.sequence < state.awaiting;
}
