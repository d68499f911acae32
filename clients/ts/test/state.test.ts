// src/web/state.ts: a new tab knows nothing yet (no seat, no view, nothing chosen or busy).

import { describe, expect, it } from "vitest";
import { state } from "../src/web/state.js";

describe("a new tab's state", () => {
  it("starts empty", () => {
    expect(state.session).toBeUndefined();
    expect(state.view).toBeUndefined();
    expect(state.sequence).toBe(0n);
    expect(state.taken.size).toBe(0);
    expect(state.takenHand).toBe(-1);
    expect(state.chosen).toEqual([]);
    expect(state.isBusy).toBe(false);
    expect([state.hint, state.error, state.errorReason]).toEqual(["", "", ""]);
  });
});
