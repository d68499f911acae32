// src/web/hints.ts: why a card of the hand may not be played now, as the server would say.

import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { Phase, RulesSchema, TrickSchema } from "../src/gen/copas/v1/copas_pb.js";
import { isLegal, whyNot } from "../src/web/hints.js";
import { card, playing } from "./cards.js";

const led = (text: string) => create(TrickSchema, { leader: 1, cards: [{ seat: 1, card: card(text) }] });

describe("why a card may not be played", () => {
  it("says nothing of a legal card", () => {
    const view = playing(["2C", "QS"], ["2C"]);
    expect(isLegal(view, card("2C"))).toBe(true);
    expect(whyNot(view, card("2C"))).toBeUndefined();
  });

  it("says nothing when it is not this seat's turn, nor outside play", () => {
    expect(whyNot(playing(["2C", "QS"], [], { toAct: [1] }), card("QS"))).toBeUndefined();
    expect(whyNot(playing(["2C", "QS"], [], { phase: Phase.PASSING }), card("QS"))).toBeUndefined();
  });

  it("asks for the opening card on the first trick: 2♣, or 3♣ with five players", () => {
    const first = playing(["2C", "QS"], ["2C"], { trickNumber: 0 });
    expect(whyNot(first, card("QS"))).toEqual({
      reason: "MUST_LEAD_OPENING_CARD",
      text: "The first trick starts with the 2♣",
    });
    const five = playing(["3C", "QS"], ["3C"], { trickNumber: 0, rules: create(RulesSchema, { players: 5 }) });
    expect(whyNot(five, card("QS"))?.text).toBe("The first trick starts with the 3♣");
  });

  it("keeps hearts from being led before they are broken", () => {
    const view = playing(["5H", "9D"], ["9D"]);
    expect(whyNot(view, card("5H"))?.reason).toBe("HEARTS_NOT_BROKEN");
  });

  it("asks to follow the suit led", () => {
    const view = playing(["5D", "QS"], ["5D"], { trick: led("KD") });
    expect(whyNot(view, card("QS"))).toEqual({ reason: "MUST_FOLLOW_SUIT", text: "You must follow ♦" });
  });

  it("keeps point cards off the first trick unless the rules allow them", () => {
    const view = playing(["QS", "5H", "9D"], ["9D"], { trickNumber: 0, trick: led("2C") });
    expect(whyNot(view, card("QS"))?.reason).toBe("NO_POINTS_ON_FIRST_TRICK");
    expect(whyNot(view, card("5H"))?.reason).toBe("NO_POINTS_ON_FIRST_TRICK");
    const allowed = playing(["QS", "9D"], ["9D"], {
      trickNumber: 0,
      trick: led("2C"),
      rules: create(RulesSchema, { pointsOnFirstTrick: true }),
    });
    expect(whyNot(allowed, card("QS"))).toEqual({ reason: "", text: "Not playable now" });
  });
});
