// What every TypeScript client of copas.v1 needs, in Node and in the browser alike: cards as
// text, whether a view asks this player to act, and a refused call's reasons (the
// google.rpc details the server attaches), and an account's session (sign-in, refresh).
// Imports only the generated code and Connect.

import { type Client, Code, ConnectError } from "@connectrpc/connect";
import type { Account, AccountService, Session } from "./gen/copas/v1/accounts_pb.js";
import type { Card } from "./gen/copas/v1/cards_pb.js";
import { Suit } from "./gen/copas/v1/cards_pb.js";
import {
  type PlayResponse,
  Phase,
  type TableEvent,
  type TableView,
  type WatchTableResponse,
} from "./gen/copas/v1/copas_pb.js";
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

/** The seat of this view must act now (not paused, not held, and in to_act). */
export function mustAct(view: TableView): boolean {
  return view.seat !== undefined && view.toAct.includes(view.seat) && view.pausedUntil === undefined && !view.isHeld;
}

export function isOver(view: TableView): boolean {
  return view.phase === Phase.GAME_OVER;
}

/**
 * A WatchTable stream's events one by one, whether it is batched (`isBatched`: one
 * EventBatch per commit, the view on its last event) or not, each as `{ event }`.
 */
export async function* tableEvents(
  responses: AsyncIterable<WatchTableResponse>,
): AsyncGenerator<{ event?: TableEvent }> {
  for await (const response of responses) {
    if (response.batch) {
      for (const event of response.batch.events) yield { event };
    } else {
      yield { event: response.event };
    }
  }
}

/** One event or one result of a Play stream. */
export type PlayItem = Extract<PlayResponse["kind"], { case: "event" | "result" }>;

/**
 * A Play stream's events and results one by one, in order, whether it is batched (a batch's
 * events, then its results) or not.
 */
export async function* playItems(responses: AsyncIterable<PlayResponse>): AsyncGenerator<PlayItem> {
  for await (const { kind } of responses) {
    if (kind.case !== "batch") {
      if (kind.case !== undefined) yield kind;
      continue;
    }
    for (const value of kind.value.events) yield { case: "event", value };
    for (const value of kind.value.results) yield { case: "result", value };
  }
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

// ------------------------------------------------------------------ accounts

/** Where a session is kept: localStorage in the browser, a Map (or a file) in Node. */
export interface KeyValue {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
  removeItem(key: string): void;
}

export class MemoryStore implements KeyValue {
  readonly items = new Map<string, string>();
  getItem(key: string): string | null {
    return this.items.get(key) ?? null;
  }
  setItem(key: string, value: string): void {
    this.items.set(key, value);
  }
  removeItem(key: string): void {
    this.items.delete(key);
  }
}

/** The calls a session needs (a Connect client of AccountService has them). */
export type SessionCalls = Pick<
  Client<typeof AccountService>,
  "signInDevice" | "signInPassword" | "refreshSession" | "signOut"
>;

/** What is kept of a session: its tokens and when they run out (ms since the epoch). */
export interface Tokens {
  accessToken: string;
  accessExpireMs: number;
  refreshToken: string;
  refreshExpireMs: number;
  /** "device" (a guest of this device) or "password". */
  method: string;
}

export const DEVICE_KEY = "copas.device";
export const TOKENS_KEY = "copas.account";
/** Refresh this long before the access token runs out. */
export const REFRESH_MARGIN_MS = 30_000;

/** A device secret: 32 random bytes, base64url (43 characters). */
export function newDeviceSecret(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  return btoa(String.fromCharCode(...bytes)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function ms(time: { seconds: bigint; nanos: number } | undefined): number {
  return time ? Number(time.seconds) * 1000 + Math.floor(time.nanos / 1e6) : 0;
}

/** Refusals after which a session is gone for good (sign in again). */
const SESSION_GONE = new Set(["SESSION_EXPIRED", "SESSION_REVOKED", "ACCOUNT_NOT_FOUND", "INVALID_CREDENTIALS"]);

/**
 * One person's session: signs in as the guest of this device (its secret made once and
 * kept) or by username and password, keeps the tokens in ``store``, refreshes the access
 * token when it has run out (one refresh at a time: a refresh token works once), and signs
 * in as the guest again when the session has ended. Tokens are never logged.
 */
export class AccountSession {
  account: Account | undefined;
  private refreshing: Promise<string> | undefined;

  constructor(
    private readonly calls: SessionCalls,
    private readonly store: KeyValue,
    private readonly now: () => number = Date.now,
  ) {}

  get tokens(): Tokens | undefined {
    const kept = this.store.getItem(TOKENS_KEY);
    if (!kept) return undefined;
    try {
      return JSON.parse(kept) as Tokens;
    } catch {
      return undefined;
    }
  }

  /** This device's secret, made (and kept) on first use. */
  deviceSecret(): string {
    let secret = this.store.getItem(DEVICE_KEY);
    if (!secret) {
      secret = newDeviceSecret();
      this.store.setItem(DEVICE_KEY, secret);
    }
    return secret;
  }

  private keep(session: Session | undefined, method: string): Session {
    if (!session) throw new Error("the server answered no session");
    this.account = session.account;
    const tokens: Tokens = {
      accessToken: session.accessToken,
      accessExpireMs: ms(session.accessExpireTime),
      refreshToken: session.refreshToken,
      refreshExpireMs: ms(session.refreshExpireTime),
      method,
    };
    this.store.setItem(TOKENS_KEY, JSON.stringify(tokens));
    return session;
  }

  async signInGuest(displayName = ""): Promise<Session> {
    const { session } = await this.calls.signInDevice({ deviceSecret: this.deviceSecret(), displayName });
    return this.keep(session, "device");
  }

  /** Signs in by username and password: this session replaces the one kept. */
  async signInPassword(username: string, password: string): Promise<Session> {
    const { session } = await this.calls.signInPassword({ username, password });
    return this.keep(session, "password");
  }

  /** A new pair for the kept refresh token (which stops working). */
  async refresh(): Promise<string> {
    this.refreshing ??= (async () => {
      try {
        const refreshToken = this.tokens?.refreshToken;
        if (!refreshToken) throw new ConnectError("not signed in", Code.Unauthenticated);
        const { session } = await this.calls.refreshSession({ refreshToken });
        return this.keep(session, this.tokens?.method ?? "device").accessToken;
      } catch (error) {
        if (SESSION_GONE.has(refusal(error).reason)) this.forget();
        throw error;
      } finally {
        this.refreshing = undefined;
      }
    })();
    return this.refreshing;
  }

  /** An access token that works now: the kept one, a refreshed one, or a new guest's. */
  async accessToken(): Promise<string> {
    const tokens = this.tokens;
    if (tokens && tokens.accessExpireMs - REFRESH_MARGIN_MS > this.now()) return tokens.accessToken;
    if (tokens && tokens.refreshExpireMs > this.now()) {
      try {
        return await this.refresh();
      } catch (error) {
        if (!SESSION_GONE.has(refusal(error).reason)) throw error;
      }
    }
    return (await this.signInGuest()).accessToken;
  }

  /** `authorization: Bearer <access token>`. */
  async headers(): Promise<Record<string, string>> {
    return { authorization: `Bearer ${await this.accessToken()}` };
  }

  /** ``call`` with the access token; once more after a refresh if the server found it run out. */
  async call<T>(call: (headers: Record<string, string>) => Promise<T>): Promise<T> {
    try {
      return await call(await this.headers());
    } catch (error) {
      if (refusal(error).reason !== "SESSION_EXPIRED") throw error;
      await this.refresh().catch(() => this.signInGuest());
      return call(await this.headers());
    }
  }

  /** Ends the session on the server (with ``everywhere``, every session of the account: each
   * browser and device signed in to it) and forgets it here (the device secret stays);
   * returns how many sessions the server ended. */
  async signOut(everywhere = false): Promise<number> {
    if (everywhere && this.tokens) {
      // The access token must be good to end the others: refreshed first if it ran out.
      try {
        return (await this.call((headers) => this.calls.signOut({ everywhere }, { headers }))).sessionsEnded;
      } finally {
        this.forget();
      }
    }
    const tokens = this.tokens;
    this.forget();
    if (!tokens) return 0;
    const answer = await this.calls.signOut({ everywhere }, { headers: { authorization: `Bearer ${tokens.accessToken}` } });
    return answer.sessionsEnded;
  }

  forget(): void {
    this.store.removeItem(TOKENS_KEY);
    this.account = undefined;
  }
}
