// src/web/words.ts: what the page says of cards, places and refusals.

import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import type { Refusal } from "../src/copas.js";
import { GameEndReason, MoonChoice, RulesSchema, TableViewSchema, TrickSchema } from "../src/gen/copas/v1/copas_pb.js";
import {
  cardName,
  cardPoints,
  endReasonWords,
  isRed,
  listNames,
  moonOutcome,
  ordinal,
  presetName,
  refusalWords,
  seatName,
  shortEndReason,
} from "../src/web/words.js";
import { ErrorReason } from "../src/gen/copas/v1/errors_pb.js";
import { card } from "./cards.js";

const refused = (reason: string, extra: Partial<Refusal> = {}): Refusal => ({
  code: "FAILED_PRECONDITION",
  message: "a message for developers",
  reason,
  domain: "copas.v1",
  quotas: [],
  ...extra,
});

describe("cards in words", () => {
  it("names cards for screen readers", () => {
    expect(cardName(card("QS"))).toBe("queen of spades");
    expect(cardName(card("10H"))).toBe("ten of hearts");
    expect(cardName(card("2C"))).toBe("two of clubs");
  });

  it("knows red cards and point cards", () => {
    expect(isRed(card("5H")) && isRed(card("5D"))).toBe(true);
    expect(isRed(card("5S")) || isRed(card("5C"))).toBe(false);
    expect([cardPoints(card("QS")), cardPoints(card("2H")), cardPoints(card("KS")), cardPoints(card("QD"))]).toEqual([
      13, 1, 0, 0,
    ]);
  });
});

describe("places and names", () => {
  it("writes ordinals", () => {
    expect([1, 2, 3, 4, 11, 12, 13, 21, 22, 101, 111].map(ordinal)).toEqual([
      "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st", "111th",
    ]);
  });

  it("lists names", () => {
    expect(listNames([])).toBe("");
    expect(listNames(["Ana"])).toBe("Ana");
    expect(listNames(["Ana", "Bea"])).toBe("Ana and Bea");
    expect(listNames(["Ana", "Bea", "Cid"])).toBe("Ana, Bea and Cid");
  });

  it("names seats and presets", () => {
    const view = create(TableViewSchema, { players: [{ displayName: "Ana" }, { displayName: "" }] });
    expect(seatName(view, 0)).toBe("Ana");
    expect(seatName(view, 1)).toBe("Seat 2");
    expect(presetName("")).toBe("Four hands");
    expect(presetName("quick")).toBe("One hand");
    expect(presetName("house-rules")).toBe("house-rules");
    expect(moonOutcome(MoonChoice.ADD_TO_OTHERS)).toBe("gave everyone else 26");
  });
});

describe("refusals in plain words", () => {
  it("says the rule, with the suit led", () => {
    const view = create(TableViewSchema, {
      trick: create(TrickSchema, { cards: [{ seat: 1, card: card("KD") }] }),
    });
    expect(refusalWords(refused("MUST_FOLLOW_SUIT"), view)).toBe("You must follow ♦.");
    expect(refusalWords(refused("MUST_FOLLOW_SUIT"))).toBe("You must follow the suit led.");
    const five = create(TableViewSchema, { rules: create(RulesSchema, { players: 5 }) });
    expect(refusalWords(refused("MUST_LEAD_OPENING_CARD"), five)).toBe("The first trick starts with the 3♣.");
  });

  it("says when to try again, from RetryInfo", () => {
    expect(refusalWords(refused("RATE_LIMITED", { retryAfterMs: 1200 }))).toBe(
      "Too many requests at once. Try again in 2 s.",
    );
    expect(refusalWords(refused("RATE_LIMITED"))).toBe("Too many requests at once. Try again in a moment.");
  });

  it("words every refusal of the accounts", () => {
    const reasons = [
      "INVALID_CREDENTIALS", "WEAK_DEVICE_SECRET", "WEAK_PASSWORD", "INVALID_USERNAME", "IDENTITY_TAKEN",
      "SESSION_EXPIRED", "SESSION_REVOKED", "INVALID_ID_TOKEN", "UNKNOWN_ISSUER", "ACCOUNT_BANNED",
      "TOO_MANY_SIGN_INS", "ACCOUNT_NOT_FOUND", "ACCOUNT_ALREADY_SEATED", "TOO_MANY_ACCOUNTS",
    ];
    for (const reason of reasons) expect(ErrorReason[reason as keyof typeof ErrorReason]).toBeGreaterThan(0);
    const unworded = reasons.filter((r) => refusalWords(refused(r)) === "The server refused that.");
    expect(unworded).toEqual([]);
    expect(refusalWords(refused("INVALID_CREDENTIALS"))).toBe("That username and password do not match.");
  });

  it("words every refusal of the championships and of the operator's calls", () => {
    const reasons = [
      "CHAMPIONSHIP_NOT_FOUND", "ALREADY_REGISTERED", "NOT_REGISTERED", "REGISTRATION_CLOSED",
      "REGISTRATION_NOT_OPEN", "CHAMPIONSHIP_FULL", "ALREADY_WITHDRAWN", "CHAMPIONSHIP_NOT_RUNNING",
      "NOT_ENOUGH_PLAYERS", "INVALID_PLAYER_LIMITS", "INVALID_ROUNDS", "INVALID_CHAMPIONSHIP",
      "MATCHPOINTS_NEED_DUPLICATE_DEALS", "TOO_MANY_CHAMPIONSHIPS", "CHECK_IN_NOT_OPEN", "CHECK_IN_CLOSED",
      "ROUND_NOT_ANNOUNCED", "ROUND_ALREADY_STARTED", "PLAYER_NOT_IN_ROUND", "INVALID_SWAP",
      "CHAMPIONSHIP_TABLE_NOT_FOUND", "TABLE_NOT_COUNTED", "INVALID_RESULT", "RESULT_LOCKED",
      "ALREADY_DISQUALIFIED", "ADMIN_DISABLED", "ADMIN_CREDENTIAL_REQUIRED", "ADMIN_DENIED", "MISSING_REASON",
    ];
    for (const reason of reasons) expect(ErrorReason[reason as keyof typeof ErrorReason]).toBeGreaterThan(0);
    const unworded = reasons.filter((r) => refusalWords(refused(r)) === "The server refused that.");
    expect(unworded).toEqual([]);
  });

  it("says a held table is paused by its championship, not between tricks", () => {
    const held = create(TableViewSchema, { isHeld: true });
    expect(refusalWords(refused("TABLE_PAUSED"), held)).toBe(
      "The championship is paused: play goes on when its organizer resumes it.",
    );
    expect(refusalWords(refused("TABLE_PAUSED"))).toBe("The table is pausing between tricks: play again in a moment.");
  });

  it("says why a game ended, a reason newer than the page included", () => {
    expect(endReasonWords(GameEndReason.TIME_LIMIT)).toBe(
      "The round's time limit ended the game: the hand in progress does not count.",
    );
    expect(endReasonWords(GameEndReason.HAND_LIMIT)).toBe("The last hand was played.");
    expect(endReasonWords(42 as GameEndReason)).toBe("The game ended (reason 42).");
    expect(shortEndReason(GameEndReason.TIME_LIMIT)).toBe("time limit");
    expect(shortEndReason(GameEndReason.HAND_LIMIT)).toBe("");
    expect(shortEndReason(42 as GameEndReason)).toBe("ended (reason 42)");
  });

  it("never shows the server's message", () => {
    expect(refusalWords(refused("SOMETHING_NEW"))).toBe("The server refused that.");
    expect(refusalWords(refused("UNAVAILABLE", { code: "UNAVAILABLE" }))).toBe(
      "The server cannot be reached. Try again in a moment.",
    );
  });
});
