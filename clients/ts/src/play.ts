// copas-ts play: a Node client of copas.v1 over gRPC (Connect's gRPC transport on HTTP/2).
// It creates a table with three bots, takes the free seat and plays every decision from its
// view's legal_cards until the game is over; once, it makes a move the rules forbid and shows
// the google.rpc.ErrorInfo the server answers with. --json prints a summary.
//
// --game bisca plays Bisca (--preset one of Bisca's, bisca3 by default; --players for a kind
// its preset does not seat): bots in every other seat, PlayCard its only move; where every
// card in the hand is legal, the forbidden move is a card of no 40-card pack.
//
// --transport play (the default): one bidirectional Play stream, actions in, the seat's
// events and one result per action out. --transport unary: a unary call per action and a
// WatchTable stream for the views.
//
// --guest signs in as a guest of this run (a new device secret), --username and --password
// by password: JoinTable then carries the access token, so the seat is the account's.
//
// In a cluster it calls the table's owner directly: the address JoinTable's initial metadata
// names (x-copas-owner), on a connection of its own. When the game's stream fails with
// UNAVAILABLE (or its connection is reset; on a Play stream INTERNAL counts as UNAVAILABLE, as
// the contract says), it follows the owner a TABLE_MOVED names, or goes back to --server and asks
// it (GetTable's x-copas-owner) where the table is now, and plays on.

import { randomUUID } from "node:crypto";
import { parseArgs } from "node:util";
import { create, type DescMessage } from "@bufbuild/protobuf";
import { anyUnpack } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { createTableRequest, isBisca, kindOf } from "./bisca.js";
import { type Card, CardSchema, Rank } from "./gen/copas/v1/cards_pb.js";
import {
  ChooseMoonRequestSchema,
  CopasService,
  GameEndReason,
  PassCardsRequestSchema,
  Phase,
  PlayCardRequestSchema,
  type PlayRequest,
  PlayRequestSchema,
  type Standing,
  type TableView,
} from "./gen/copas/v1/copas_pb.js";
import type { Status } from "./gen/google/rpc/status_pb.js";
import {
  ErrorInfoSchema,
  QuotaFailureSchema,
  RetryInfoSchema,
} from "./gen/google/rpc/error_details_pb.js";
import {
  AccountSession,
  codeName,
  isOver,
  MemoryStore,
  mustAct,
  playItems,
  pretty,
  type Refusal,
  refusal,
  sameCard,
  tableEvents,
} from "./copas.js";
import { AccountService } from "./gen/copas/v1/accounts_pb.js";

/** Initial metadata of the answers that name a table, in a cluster: the owner's host:port. */
const OWNER_KEY = "x-copas-owner";

/** The new owner a TABLE_MOVED refusal names (its ErrorInfo's metadata.owner), or "". */
function movedTo(error: unknown): string {
  const [info] = ConnectError.from(error).findDetails(ErrorInfoSchema);
  return info?.reason === "TABLE_MOVED" ? (info.metadata.owner ?? "") : "";
}

const TRANSPORTS = ["play", "unary"] as const;
type Transport = (typeof TRANSPORTS)[number];

const { values: args } = parseArgs({
  options: {
    server: { type: "string", default: "localhost:50051" },
    name: { type: "string", default: "TypeScript" },
    game: { type: "string", default: "hearts" }, // hearts | bisca
    preset: { type: "string", default: "" }, // the game's first: online, bisca3
    players: { type: "string" }, // seats at the table (default: the preset's)
    seed: { type: "string" },
    transport: { type: "string", default: "play" }, // play | unary
    json: { type: "boolean", default: false },
    // Play as an account: a guest of this run (--guest), or by username and password.
    guest: { type: "boolean", default: false },
    username: { type: "string" },
    password: { type: "string" },
  },
});

type Client = ReturnType<typeof createClient<typeof CopasService>>;

/** A client of one address, on one HTTP/2 connection (closed at the end). */
function clientOf(address: string): { client: Client; connection: Http2SessionManager } {
  const baseUrl = `http://${address}`;
  const connection = new Http2SessionManager(baseUrl);
  return { client: createClient(CopasService, createGrpcTransport({ baseUrl, sessionManager: connection })), connection };
}

const entry = clientOf(args.server); // where the client starts: any node
const opened: Http2SessionManager[] = [entry.connection];
const accountCalls = createClient(
  AccountService,
  createGrpcTransport({ baseUrl: `http://${args.server}`, sessionManager: entry.connection }),
);

/** Where the table's calls go: its owner's address (x-copas-owner), else the entry. */
const route = {
  owner: "",
  client: entry.client,
  followed: [] as string[],
  /** Call `owner` from now on (the entry when it is the entry, or empty). */
  follow(owner: string | null | undefined): void {
    if (!owner || owner === this.owner || (owner === args.server && this.owner === "")) return;
    if (owner === args.server) {
      this.owner = "";
      this.client = entry.client;
      return;
    }
    const direct = clientOf(owner);
    opened.push(direct.connection);
    this.owner = owner;
    this.client = direct.client;
    this.followed.push(owner);
  },
  back(): void {
    this.owner = "";
    this.client = entry.client;
  },
};
const FOLLOWS = 10; // the owner moved (or went away) at most this often in one game
// UNAVAILABLE: refused for now (TABLE_MOVED, ...) or not reached; ABORTED and CANCELED: how
// Node reports a connection reset, or its streams closed, under a call (its server went away).
const GONE = new Set(["UNAVAILABLE", "ABORTED", "CANCELED"]);
const say = (line: string) => {
  if (!args.json) console.log(line);
};
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const QUOTA_RETRIES = 5; // over a quota: wait as RetryInfo says, then the same request again
const REFUSALS_IN_A_ROW = 3; // refused moves (not the deliberate one) before giving up

/** One action, as a Play stream carries it (and as the unary calls take it). */
type Action = Extract<PlayRequest["kind"], { case: "passCards" | "playCard" | "chooseMoon" }>;

/** How one game went, whichever the transport. */
interface Outcome {
  view: TableView;
  moves: number; // accepted actions of ours
  refused?: Refusal; // the deliberate illegal move's refusal
  results: number | null; // PlayResults received on the Play stream (quota retries too); null over unary
}

async function main(): Promise<void> {
  const transport = args.transport as Transport;
  if (!TRANSPORTS.includes(transport)) {
    throw new Error(`--transport must be one of ${TRANSPORTS.join(", ")}, not ${args.transport}`);
  }
  const kind = kindOf(args.game, args.preset);
  if (args.players) kind.players = Number(args.players);
  // No time limits or pauses: this client answers at once.
  const { table } = await entry.client.createTable(
    createTableRequest(kind, { displayName: `${args.name}'s table`, seed: args.seed, immediate: true }),
  );
  const tableId = table!.tableId;
  // As an account, the seat is the account's and takes its name (the access token goes along).
  const account = await signIn();
  const joined = await entry.client.joinTable(
    { tableId, displayName: account ? "" : args.name, requestId: randomUUID() },
    {
      onHeader: (header) => route.follow(header.get(OWNER_KEY)),
      headers: account ? await account.headers() : undefined,
    },
  );
  playedAs = account?.account?.accountId ?? "";
  if (account) say(`signed in as ${account.account?.displayName} (${account.account?.accountId})`);
  const headers = { authorization: `Bearer ${joined.playerToken}` };
  say(`table ${tableId}: seat ${joined.seat} (transport ${transport})${route.owner ? ` at its owner ${route.owner}` : ""}`);
  for (let follows = 0; ; follows++) {
    try {
      const outcome = transport === "play" ? await overPlay(tableId, headers) : await overUnary(tableId, headers);
      report(tableId, joined.seat, transport, outcome);
      return;
    } catch (error) {
      if (!GONE.has(refusal(error).code) || follows >= FOLLOWS) throw error;
      await relocate(tableId, movedTo(error));
    }
  }
}

let playedAs = ""; // the account's id, when signed in

/** The account to play as (--guest, or --username and --password), or none. */
async function signIn(): Promise<AccountSession | undefined> {
  if (!args.guest && !args.username) return undefined;
  const session = new AccountSession(accountCalls, new MemoryStore());
  if (args.username) await session.signInPassword(args.username, args.password ?? "");
  else await session.signInGuest(args.name);
  return session;
}

/** The game's stream failed (UNAVAILABLE, or a reset): follow the owner a TABLE_MOVED names, or ask the entry. */
async function relocate(tableId: string, owner: string): Promise<void> {
  if (owner) {
    route.follow(owner);
    return;
  }
  route.back();
  for (let attempt = 0; ; attempt++) {
    try {
      await entry.client.getTable({ tableId }, { onHeader: (header) => route.follow(header.get(OWNER_KEY)) });
      return;
    } catch (error) {
      if (!GONE.has(refusal(error).code) || attempt >= 30) throw error;
      await sleep(Math.min(200 * 2 ** attempt, 2000)); // the table is moving: its lease runs out first
    }
  }
}

/**
 * One decision, from the view alone: the first legal cards (and the first moon choice); after
 * `attempt` refusals of this decision, the next ones. A new request_id each time.
 */
function decide(tableId: string, view: TableView, attempt = 0): Action {
  const requestId = randomUUID(); // the same id on a retry (over a quota): applied once
  const at = <T>(options: T[]): T => options[attempt % options.length];
  switch (view.phase) {
    case Phase.PASSING: {
      const legal = view.legalCards;
      const start = legal.length > 3 ? attempt % (legal.length - 2) : 0;
      const cards = legal.slice(start, start + 3);
      return { case: "passCards", value: create(PassCardsRequestSchema, { tableId, cards, requestId }) };
    }
    case Phase.PLAYING: {
      const card = at(view.legalCards);
      return { case: "playCard", value: create(PlayCardRequestSchema, { tableId, card, requestId }) };
    }
    case Phase.MOON_CHOICE: {
      const choice = at(view.moonChoices);
      return { case: "chooseMoon", value: create(ChooseMoonRequestSchema, { tableId, choice, requestId }) };
    }
    default:
      throw new Error(`nothing to do in phase ${Phase[view.phase]}`);
  }
}

/** A card in the hand that the rules forbid now, if there is one; at Bisca, where every card
 * may often be played, a card of no 40-card pack (the 10 of the first legal card's suit). */
function illegalCard(view: TableView): Card | undefined {
  const forbidden = view.hand.find((c) => !view.legalCards.some((l) => sameCard(c, l)));
  if (forbidden || !isBisca(view.rules) || !view.legalCards.length) return forbidden;
  return create(CardSchema, { suit: view.legalCards[0].suit, rank: Rank.TEN, text: "10" });
}

/** The card as a request names it: suit and rank (the server reads no more). */
function only(card: Card): Card {
  return create(CardSchema, { suit: card.suit, rank: card.rank });
}

/** What an action is, in a few words: "Q♠", "the pass 2♣ 3♣ 4♣", "the moon choice". */
function label(action: Action): string {
  switch (action.case) {
    case "playCard":
      return action.value.card ? pretty(action.value.card) : "a card";
    case "passCards":
      return `the pass ${action.value.cards.map(pretty).join(" ")}`;
    case "chooseMoon":
      return "the moon choice";
  }
}

function sayRefused(what: string, why: Refusal): void {
  say(`refused ${what}: ${why.code} ${why.reason} (${why.domain}): ${why.message}`);
}

// ------------------------------------------------------------------------ over the Play stream

/** An async queue of requests: the Play stream's request side, pushed into as the views ask. */
class Outbox<T> implements AsyncIterable<T> {
  private readonly items: T[] = [];
  private wake?: () => void;
  private closed = false;

  push(item: T): void {
    if (this.closed) throw new Error("the stream's request side is closed");
    this.items.push(item);
    this.wake?.();
  }

  close(): void {
    this.closed = true;
    this.wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for (;;) {
      const item = this.items.shift();
      if (item !== undefined) {
        yield item;
      } else if (this.closed) {
        return;
      } else {
        await new Promise<void>((resolve) => (this.wake = resolve));
        this.wake = undefined;
      }
    }
  }
}

/** The action sent and not answered yet (one at a time: each waits for its result). */
interface Pending {
  action: Action;
  what: string; // the action in a line, for its refusal
  illegal: boolean; // the deliberate move the rules forbid
  retries: number; // over a quota
}

/** A PlayResult's error (google.rpc.Status) as the server explains it: its details unpacked. */
function statusRefusal(status: Status): Refusal {
  const details = <Desc extends DescMessage>(schema: Desc) =>
    status.details.flatMap((any) => anyUnpack(any, schema) ?? []);
  const [info] = details(ErrorInfoSchema);
  const [retry] = details(RetryInfoSchema);
  const quotas = details(QuotaFailureSchema).flatMap((q) => q.violations.map((v) => v.subject));
  const code = codeName(status.code as Code);
  const delay = retry?.retryDelay;
  return {
    code,
    message: status.message,
    reason: info?.reason || code,
    domain: info?.domain ?? "",
    retryAfterMs: delay ? Number(delay.seconds) * 1000 + delay.nanos / 1e6 : undefined,
    quotas,
  };
}

/**
 * The game over one Play stream: the view from each event (a snapshot first), an action when
 * the view asks this seat to act and no action of ours is unanswered, its result read in turn
 * (it comes after the events the action caused, so the view is already the one it led to).
 */
/**
 * A Play stream's failure as the contract reads it: INTERNAL on a Play stream is how an
 * HTTP/2 stack may report the stream cut under it (its node drained or went away), so it
 * counts as UNAVAILABLE: reconnect and resume, as after any other drop.
 */
function asPlayFailure(error: unknown): unknown {
  const failed = ConnectError.from(error);
  if (failed.code !== Code.Internal) return error;
  return new ConnectError(failed.rawMessage, Code.Unavailable, failed.metadata, undefined, failed);
}

async function overPlay(tableId: string, headers: Record<string, string>): Promise<Outcome> {
  const outbox = new Outbox<PlayRequest>();
  // Batched: one message per commit, the view on its last event, our result in it.
  outbox.push(create(PlayRequestSchema, { kind: { case: "open", value: { tableId, isBatched: true } } }));
  const cancel = new AbortController(); // the server keeps the stream open after the game
  let view: TableView | undefined;
  let pending: Pending | undefined;
  let moves = 0;
  let results = 0;
  let inARow = 0; // our moves refused in a row (not the deliberate one)
  let refused: Refusal | undefined;
  const send = (next: Pending) => {
    pending = next;
    outbox.push(create(PlayRequestSchema, { kind: next.action }));
  };
  try {
    for await (const kind of playItems(route.client.play(outbox, { headers, signal: cancel.signal }))) {
      if (kind.case === "event") {
        if (kind.value.view === undefined) continue; // more of the same commit follow
        view = kind.value.view;
      } else if (kind.case === "result") {
        results += 1;
        const answered = pending;
        pending = undefined;
        if (answered === undefined) throw new Error("a result for no action of ours");
        const { error } = kind.value;
        const { what } = answered;
        if (error === undefined) {
          if (answered.illegal) throw new Error(`the server accepted ${what}, which is not a legal card now`);
          moves += 1;
          inARow = 0;
        } else {
          const why = statusRefusal(error);
          if (why.retryAfterMs !== undefined && answered.retries < QUOTA_RETRIES) {
            await sleep(why.retryAfterMs); // over a quota: the same request (same request_id) again
            send({ ...answered, retries: answered.retries + 1 });
            continue;
          }
          sayRefused(what, why);
          if (answered.illegal) {
            refused = why;
          } else if (++inARow >= REFUSALS_IN_A_ROW) {
            throw new Error(`${inARow} moves refused in a row, the last for ${why.reason}`);
          }
        }
      }
      if (view === undefined || pending !== undefined) continue;
      if (isOver(view)) return { view, moves, refused, results };
      if (!mustAct(view)) continue;
      const card = refused === undefined && view.phase === Phase.PLAYING ? illegalCard(view) : undefined;
      if (card !== undefined) {
        const action: Action = { case: "playCard", value: create(PlayCardRequestSchema, { card: only(card) }) };
        send({ action, what: pretty(card), illegal: true, retries: 0 });
      } else {
        const action = decide(tableId, view, inARow);
        send({ action, what: label(action), illegal: false, retries: 0 });
      }
    }
  } catch (error) {
    throw asPlayFailure(error);
  } finally {
    outbox.close();
    cancel.abort();
  }
  throw new Error("the Play stream ended before the game was over");
}

// ------------------------------------------------- over unary calls and a WatchTable stream

async function overUnary(tableId: string, headers: Record<string, string>): Promise<Outcome> {
  let acted = 0n; // the sequence of our last accepted action: older views are stale
  let moves = 0;
  let refused: Refusal | undefined;
  const stream = tableEvents(route.client.watchTable({ tableId, isBatched: true }, { headers }));
  for await (const { event } of stream) {
    const view = event?.view;
    if (!event || !view || event.sequence < acted) continue;
    if (isOver(view)) return { view, moves, refused, results: null };
    if (!mustAct(view)) continue;
    if (refused === undefined && view.phase === Phase.PLAYING) {
      refused = await tryIllegal(tableId, headers, view);
    }
    acted = await act(headers, decide(tableId, view));
    moves += 1;
  }
  throw new Error("the stream ended before the game was over");
}

/** One action as its unary call; over a quota, retried with the same request_id. */
async function act(headers: Record<string, string>, action: Action): Promise<bigint> {
  for (let attempt = 0; ; attempt++) {
    try {
      switch (action.case) {
        case "passCards":
          return (await route.client.passCards(action.value, { headers })).sequence;
        case "playCard":
          return (await route.client.playCard(action.value, { headers })).sequence;
        case "chooseMoon":
          return (await route.client.chooseMoon(action.value, { headers })).sequence;
      }
    } catch (error) {
      const why = refusal(error);
      if (why.retryAfterMs === undefined || attempt >= QUOTA_RETRIES) throw error; // not over a quota
      await sleep(why.retryAfterMs);
    }
  }
}

/** Plays a card the rules forbid now (one in the hand but not legal) and returns the refusal. */
async function tryIllegal(tableId: string, headers: Record<string, string>, view: TableView): Promise<Refusal | undefined> {
  const card = illegalCard(view);
  if (card === undefined) return undefined; // every card is legal: try at the next decision
  try {
    await route.client.playCard({ tableId, card: only(card) }, { headers });
  } catch (error) {
    const why = refusal(error);
    sayRefused(pretty(card), why);
    return why;
  }
  throw new Error(`the server accepted ${card.text}, which is not among the legal cards`);
}

// ------------------------------------------------------------------------------ the summary

function report(tableId: string, seat: number, transport: Transport, outcome: Outcome): void {
  const { view, moves, refused, results } = outcome;
  const standings = view.standings.map((s: Standing) => ({ seat: s.seat, place: s.place, total: s.total }));
  if (args.json) {
    const summary = {
      table_id: tableId,
      seat,
      transport,
      moves,
      results,
      hands: view.handNumber + 1,
      end_reason: GameEndReason[view.endReason],
      standings,
      refused: refused ?? null,
      owner: route.owner || null, // the address it played at, when not --server
      followed: route.followed,
      account_id: playedAs || null,
    };
    console.log(JSON.stringify(summary));
    return;
  }
  say(`game over (${GameEndReason[view.endReason]}) after ${moves} moves of yours:`);
  for (const s of standings) {
    const who = view.players[s.seat]?.displayName ?? `seat ${s.seat}`;
    say(`  ${s.place}. ${who}${s.seat === seat ? " (you)" : ""}: ${s.total}`);
  }
  say(
    transport === "play"
      ? `transport play: one Play stream, ${results} results`
      : "transport unary: a unary call per action, views from WatchTable",
  );
}

main()
  .catch((error: unknown) => {
    console.error(`copas-ts: ${error instanceof Error ? error.message : String(error)}`);
    process.exitCode = 1;
  })
  .finally(() => {
    for (const connection of opened) connection.abort();
  });
