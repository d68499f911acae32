// copas-ts play: a Node client of copas.v1 over gRPC (Connect's gRPC transport on HTTP/2).
// It creates a table with three bots, takes the free seat, watches its view and plays every
// decision from the view's legal_cards until the game is over; once, it makes a move the rules
// forbid and shows the google.rpc.ErrorInfo the server answers with. --json prints a summary.

import { randomUUID } from "node:crypto";
import { parseArgs } from "node:util";
import { create } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { type Card, CardSchema } from "./gen/copas/v1/cards_pb.js";
import {
  CopasService,
  GameEndReason,
  Phase,
  type Standing,
  type TableView,
} from "./gen/copas/v1/copas_pb.js";
import { isOver, mustAct, pretty, type Refusal, refusal, sameCard } from "./copas.js";

const { values: args } = parseArgs({
  options: {
    server: { type: "string", default: "localhost:50051" },
    name: { type: "string", default: "TypeScript" },
    preset: { type: "string", default: "online" },
    seed: { type: "string" },
    json: { type: "boolean", default: false },
  },
});

const baseUrl = `http://${args.server}`;
const connection = new Http2SessionManager(baseUrl); // one HTTP/2 connection, closed at the end
const client = createClient(CopasService, createGrpcTransport({ baseUrl, sessionManager: connection }));
const say = (line: string) => {
  if (!args.json) console.log(line);
};

async function main(): Promise<void> {
  const { table } = await client.createTable({
    preset: args.preset,
    botSeats: 3,
    displayName: `${args.name}'s table`,
    // No time limits or pauses: this client answers at once.
    rules: {
      trickPauseSeconds: 0,
      handPauseSeconds: 0,
      playTimeoutSeconds: 0,
      passTimeoutSeconds: 0,
      moonTimeoutSeconds: 0,
    },
    seed: args.seed,
  });
  const tableId = table!.tableId;
  const joined = await client.joinTable({ tableId, displayName: args.name, requestId: randomUUID() });
  const headers = { authorization: `Bearer ${joined.playerToken}` };
  say(`table ${tableId}: seat ${joined.seat}`);

  let acted = 0n; // the sequence of our last accepted action: older views are stale
  let moves = 0;
  let refused: Refusal | undefined;
  const stream = client.watchTable({ tableId }, { headers });
  for await (const { event } of stream) {
    const view = event?.view;
    if (!event || !view || event.sequence < acted) continue;
    if (isOver(view)) {
      report(tableId, joined.seat, moves, view, refused);
      return;
    }
    if (!mustAct(view)) continue;
    if (refused === undefined && view.phase === Phase.PLAYING) {
      refused = await tryIllegal(tableId, headers, view);
    }
    acted = await act(tableId, headers, view);
    moves += 1;
  }
  throw new Error("the stream ended before the game was over");
}

/** One decision, from the view alone: the first legal cards (and the first moon choice). */
async function act(tableId: string, headers: Record<string, string>, view: TableView): Promise<bigint> {
  const requestId = randomUUID(); // the same id on a retry: applied once
  for (let attempt = 0; ; attempt++) {
    try {
      switch (view.phase) {
        case Phase.PASSING:
          return (await client.passCards({ tableId, cards: view.legalCards.slice(0, 3), requestId }, { headers }))
            .sequence;
        case Phase.PLAYING:
          return (await client.playCard({ tableId, card: view.legalCards[0], requestId }, { headers })).sequence;
        case Phase.MOON_CHOICE:
          return (await client.chooseMoon({ tableId, choice: view.moonChoices[0], requestId }, { headers })).sequence;
        default:
          throw new Error(`nothing to do in phase ${Phase[view.phase]}`);
      }
    } catch (error) {
      const why = refusal(error);
      if (why.retryAfterMs === undefined || attempt >= 5) throw error; // not over a quota
      await new Promise((resolve) => setTimeout(resolve, why.retryAfterMs));
    }
  }
}

/** Plays a card the rules forbid now (one in the hand but not legal) and returns the refusal. */
async function tryIllegal(tableId: string, headers: Record<string, string>, view: TableView): Promise<Refusal | undefined> {
  const card: Card | undefined = view.hand.find((c) => !view.legalCards.some((l) => sameCard(c, l)));
  if (card === undefined) return undefined; // every card is legal: try at the next decision
  try {
    await client.playCard({ tableId, card: create(CardSchema, { suit: card.suit, rank: card.rank }) }, { headers });
  } catch (error) {
    const why = refusal(error);
    say(`refused ${pretty(card)}: ${why.code} ${why.reason} (${why.domain}): ${why.message}`);
    return why;
  }
  throw new Error(`the server accepted ${card.text}, which is not among the legal cards`);
}

function report(tableId: string, seat: number, moves: number, view: TableView, refused?: Refusal): void {
  const standings = view.standings.map((s: Standing) => ({ seat: s.seat, place: s.place, total: s.total }));
  if (args.json) {
    const summary = {
      table_id: tableId,
      seat,
      moves,
      hands: view.handNumber + 1,
      end_reason: GameEndReason[view.endReason],
      standings,
      refused: refused ?? null,
    };
    console.log(JSON.stringify(summary));
    return;
  }
  say(`game over (${GameEndReason[view.endReason]}) after ${moves} moves of yours:`);
  for (const s of standings) {
    const who = view.players[s.seat]?.displayName ?? `seat ${s.seat}`;
    say(`  ${s.place}. ${who}${s.seat === seat ? " (you)" : ""}: ${s.total}`);
  }
}

main()
  .catch((error: unknown) => {
    console.error(`copas-ts: ${error instanceof Error ? error.message : String(error)}`);
    process.exitCode = 1;
  })
  .finally(() => connection.abort());
