// What every TypeScript client of copas.v1 needs, in Node and in the browser alike: cards as
// text, whether a view asks this player to act, and a refused call's reasons (the
// google.rpc details the server attaches). Imports only the generated code and Connect.

import { Code, ConnectError } from "@connectrpc/connect";
import type { Card } from "./gen/copas/v1/cards_pb.js";
import { Suit } from "./gen/copas/v1/cards_pb.js";
import { Phase, type TableView } from "./gen/copas/v1/copas_pb.js";
import {
  ErrorInfoSchema,
  QuotaFailureSchema,
  RetryInfoSchema,
} from "./gen/google/rpc/error_details_pb.js";

export const SUIT_SYMBOL: Record<number, string> = {
  [Suit.CLUBS]: "♣",
  [Suit.DIAMONDS]: "♦",
  [Suit.SPADES]: "♠",
  [Suit.HEARTS]: "♥",
};

/** "Q♠" for QS. */
export function pretty(card: Card): string {
  return card.text.slice(0, -1) + (SUIT_SYMBOL[card.suit] ?? "?");
}

export function sameCard(a: Card, b: Card): boolean {
  return a.suit === b.suit && a.rank === b.rank;
}

/** The seat of this view must act now (not paused, and in to_act). */
export function mustAct(view: TableView): boolean {
  return view.seat !== undefined && view.toAct.includes(view.seat) && view.pausedUntil === undefined;
}

export function isOver(view: TableView): boolean {
  return view.phase === Phase.GAME_OVER;
}

/** A refused call as the server explains it. */
export interface Refusal {
  /** The status code's name as gRPC spells it: "FAILED_PRECONDITION". */
  code: string;
  message: string;
  /** ErrorInfo.reason (the rule: "MUST_FOLLOW_SUIT"), or the code when there is none. */
  reason: string;
  domain: string;
  /** RetryInfo: how long to wait before retrying (over a quota), in milliseconds. */
  retryAfterMs?: number;
  /** QuotaFailure: which quotas ran out. */
  quotas: string[];
}

/** "FailedPrecondition" -> "FAILED_PRECONDITION". */
export function codeName(code: Code): string {
  return (Code[code] ?? "UNKNOWN").replace(/([a-z])([A-Z])/g, "$1_$2").toUpperCase();
}

export function refusal(error: unknown): Refusal {
  const err = ConnectError.from(error);
  const [info] = err.findDetails(ErrorInfoSchema);
  const [retry] = err.findDetails(RetryInfoSchema);
  const quotas = err.findDetails(QuotaFailureSchema).flatMap((q) => q.violations.map((v) => v.subject));
  const code = codeName(err.code);
  const delay = retry?.retryDelay;
  return {
    code,
    message: err.rawMessage,
    reason: info?.reason || code,
    domain: info?.domain ?? "",
    retryAfterMs: delay ? Number(delay.seconds) * 1000 + delay.nanos / 1e6 : undefined,
    quotas,
  };
}
