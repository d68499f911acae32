// src/copas.ts: cards as text, whose turn it is, and a refusal's reasons from its details.

import { create } from "@bufbuild/protobuf";
import { timestampNow } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { codeName, isOver, mustAct, playItems, pretty, refusal, sameCard, tableEvents } from "../src/copas.js";
import {
  Phase,
  PlayResponseSchema,
  TableEventSchema,
  TableViewSchema,
  WatchTableResponseSchema,
} from "../src/gen/copas/v1/copas_pb.js";
import { ErrorInfoSchema, QuotaFailureSchema, RetryInfoSchema } from "../src/gen/google/rpc/error_details_pb.js";
import { card } from "./cards.js";

describe("cards as text", () => {
  it("shows the rank and the suit's symbol", () => {
    expect(pretty(card("QS"))).toBe("Q♠");
    expect(pretty(card("10H"))).toBe("10♥");
    expect(pretty(card("2C"))).toBe("2♣");
    expect(pretty(card("AD"))).toBe("A♦");
  });

  it("compares cards by suit and rank", () => {
    expect(sameCard(card("QS"), card("QS"))).toBe(true);
    expect(sameCard(card("QS"), card("QH"))).toBe(false);
    expect(sameCard(card("QS"), card("KS"))).toBe(false);
  });
});

describe("whose turn", () => {
  it("asks the seat in to_act, unless the table is paused", () => {
    const view = create(TableViewSchema, { seat: 2, toAct: [2], phase: Phase.PLAYING });
    expect(mustAct(view)).toBe(true);
    expect(mustAct(create(TableViewSchema, { ...view, toAct: [1] }))).toBe(false);
    expect(mustAct(create(TableViewSchema, { ...view, pausedUntil: timestampNow() }))).toBe(false);
    expect(mustAct(create(TableViewSchema, { toAct: [0] }))).toBe(false); // a spectator
    // Held (its championship paused): nobody acts, whatever the view says.
    expect(mustAct(create(TableViewSchema, { ...view, isHeld: true }))).toBe(false);
  });

  it("knows a game that is over", () => {
    expect(isOver(create(TableViewSchema, { phase: Phase.GAME_OVER }))).toBe(true);
    expect(isOver(create(TableViewSchema, { phase: Phase.PLAYING }))).toBe(false);
  });
});

describe("refusals", () => {
  it("spells status codes as gRPC does", () => {
    expect(codeName(Code.FailedPrecondition)).toBe("FAILED_PRECONDITION");
    expect(codeName(Code.ResourceExhausted)).toBe("RESOURCE_EXHAUSTED");
    expect(codeName(Code.NotFound)).toBe("NOT_FOUND");
  });

  it("reads ErrorInfo, RetryInfo and QuotaFailure", () => {
    const error = new ConnectError("over a quota", Code.ResourceExhausted, undefined, [
      { desc: ErrorInfoSchema, value: { reason: "RATE_LIMITED", domain: "copas.v1" } },
      { desc: RetryInfoSchema, value: { retryDelay: { seconds: 1n, nanos: 500_000_000 } } },
      { desc: QuotaFailureSchema, value: { violations: [{ subject: "address 127.0.0.1" }] } },
    ]);
    expect(refusal(error)).toEqual({
      code: "RESOURCE_EXHAUSTED",
      message: "over a quota",
      reason: "RATE_LIMITED",
      domain: "copas.v1",
      retryAfterMs: 1500,
      quotas: ["address 127.0.0.1"],
    });
  });

  it("falls back to the code when there is no ErrorInfo", () => {
    const why = refusal(new ConnectError("gone", Code.Unavailable));
    expect(why.reason).toBe("UNAVAILABLE");
    expect(why.retryAfterMs).toBeUndefined();
    expect(why.quotas).toEqual([]);
  });
});

describe("batched streams (one message per commit)", () => {
  const event = (sequence: bigint, withView: boolean) =>
    create(TableEventSchema, {
      sequence,
      view: withView ? create(TableViewSchema, { seat: 1 }) : undefined,
      kind: { case: "cardPlayed", value: {} },
    });

  it("gives a WatchTable stream's events one by one, batched or not", async () => {
    const responses = [
      create(WatchTableResponseSchema, { event: event(1n, true) }),
      create(WatchTableResponseSchema, { batch: { events: [event(2n, false), event(3n, true)] } }),
    ];
    const seen: bigint[] = [];
    for await (const { event } of tableEvents(stream(responses))) seen.push(event?.sequence ?? -1n);
    expect(seen).toEqual([1n, 2n, 3n]);
  });

  it("gives a Play batch's events, then its results, in order", async () => {
    const responses = [
      create(PlayResponseSchema, { kind: { case: "event", value: event(1n, true) } }),
      create(PlayResponseSchema, {
        kind: {
          case: "batch",
          value: { events: [event(2n, false), event(3n, true)], results: [{ sequence: 2n, lastSequence: 3n }] },
        },
      }),
      create(PlayResponseSchema, { kind: { case: "result", value: { lastSequence: 3n } } }),
    ];
    const seen: string[] = [];
    for await (const kind of playItems(stream(responses))) {
      seen.push(kind.case === "event" ? `e${kind.value.sequence}` : `r${kind.value.lastSequence}`);
    }
    expect(seen).toEqual(["e1", "e2", "e3", "r3", "r3"]);
  });
});

async function* stream<T>(items: T[]): AsyncGenerator<T> {
  for (const item of items) yield item;
}
