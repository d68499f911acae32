// src/web/director.ts: the organizer's form read into ChampionshipSettings (every setting), and
// a championship's settings said back in words, so what an organizer sets is what players read.

import { create } from "@bufbuild/protobuf";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { describe, expect, it } from "vitest";
import {
  ChampionshipSchema,
  ChampionshipScoring,
  ChampionshipSettingsSchema,
  ChampionshipState,
} from "../src/gen/copas/v1/championships_pb.js";
import { RulesSchema } from "../src/gen/copas/v1/copas_pb.js";
import { type DirectorForm, directorActions, numbersOf, settingsFromForm, settingsLines } from "../src/web/director.js";

const FORM: DirectorForm = {
  name: "  Night Cup ", rounds: "3", preset: "quick", clock: "relaxed", minPlayers: "8", maxPlayers: "16",
  startAt: "2031-06-03T20:00:00", startWhenFull: false, registrationOpens: "2031-06-03T18:00:00",
  registrationCloses: "2031-06-03T19:30:00", lateEntryRounds: "1", checkInMinutes: "10", pauseSeconds: "45",
  noticeSeconds: "60", timeLimitMinutes: "30", scoring: "matchpoints", duplicateDeals: true, buchholz: true,
  finalTable: "4", dropAbsent: false,
};

describe("the organizer's form", () => {
  it("gives every setting", () => {
    const settings = create(ChampionshipSettingsSchema, settingsFromForm(FORM));
    expect(settings.displayName).toBe("Night Cup");
    expect([settings.rounds, settings.preset, settings.minPlayers, settings.maxPlayers]).toEqual([3, "quick", 8, 16]);
    expect([settings.rules?.playTimeoutSeconds, settings.rules?.passTimeoutSeconds, settings.rules?.moonTimeoutSeconds])
      .toEqual([60, 90, 45]);
    // datetime-local values are this browser's time.
    expect(timestampMs(settings.startTime!)).toBe(new Date(2031, 5, 3, 20, 0, 0).getTime());
    expect(timestampMs(settings.registrationOpenTime!)).toBe(new Date(2031, 5, 3, 18, 0, 0).getTime());
    expect(timestampMs(settings.registrationCloseTime!)).toBe(new Date(2031, 5, 3, 19, 30, 0).getTime());
    expect(settings.startWhenFull).toBe(false);
    expect([settings.lateEntryRounds, settings.checkInSeconds, settings.roundPauseSeconds, settings.pairingNoticeSeconds,
      settings.roundTimeLimitSeconds]).toEqual([1, 600, 45, 60, 1800]);
    expect([settings.scoring, settings.duplicateDeals, settings.buchholz, settings.finalTable, settings.dropAbsent])
      .toEqual([ChampionshipScoring.MATCHPOINTS, true, true, 4, false]);
  });

  it("leaves out what is left empty", () => {
    const settings = create(ChampionshipSettingsSchema, settingsFromForm({
      ...FORM, startAt: "", registrationOpens: "", registrationCloses: "not a time", minPlayers: "", maxPlayers: "",
      checkInMinutes: "", timeLimitMinutes: "", noticeSeconds: "", pauseSeconds: "", lateEntryRounds: "",
      scoring: "places", duplicateDeals: false, finalTable: "0", dropAbsent: true, clock: "unknown",
    }));
    expect(settings.startTime).toBeUndefined();
    expect(settings.registrationOpenTime).toBeUndefined();
    expect(settings.registrationCloseTime).toBeUndefined();
    expect([settings.minPlayers, settings.maxPlayers, settings.checkInSeconds, settings.roundTimeLimitSeconds,
      settings.pairingNoticeSeconds, settings.roundPauseSeconds, settings.lateEntryRounds, settings.finalTable])
      .toEqual([0, 0, 0, 0, 0, 0, 0, 0]);
    expect([settings.scoring, settings.duplicateDeals, settings.dropAbsent]).toEqual([ChampionshipScoring.PLACES, false, true]);
    expect(settings.rules?.playTimeoutSeconds).toBe(20); // the standard clock
  });

  it("makes a Bisca championship from a Bisca preset, with the card clock only", () => {
    const settings = create(ChampionshipSettingsSchema, settingsFromForm({ ...FORM, preset: "bisca7", finalTable: "2" }));
    expect([settings.game, settings.preset, settings.finalTable]).toEqual(["bisca", "bisca7", 2]);
    expect([settings.rules?.playTimeoutSeconds, settings.rules?.passTimeoutSeconds, settings.rules?.moonTimeoutSeconds])
      .toEqual([60, undefined, undefined]);
    // A Hearts preset makes a Hearts championship, as before (no game named).
    expect(create(ChampionshipSettingsSchema, settingsFromForm(FORM)).game).toBe("");
  });

  it("reads a correction's numbers", () => {
    expect(numbersOf("5, 10,0 11")).toEqual([5, 10, 0, 11]);
    expect(numbersOf("")).toEqual([]);
    expect(numbersOf("5, x")).toBeUndefined();
    expect(numbersOf("2.5")).toBeUndefined();
  });
});

describe("a championship's settings in words", () => {
  it("says back every setting the form gave", () => {
    const now = new Date(2031, 5, 3, 17, 0, 0).getTime();
    const c = create(ChampionshipSchema, {
      state: ChampionshipState.REGISTERING,
      settings: settingsFromForm(FORM),
      rules: create(RulesSchema, { playTimeoutSeconds: 60, passTimeoutSeconds: 90, maxHands: 1 }),
    });
    expect(Object.fromEntries(settingsLines(c, now).map((l) => [l.key, l.text]))).toEqual({
      rounds: "3 rounds",
      game: "One hand, 60 s a card, 90 s to pass",
      players: "8 to 16",
      start: "at 20:00:00",
      registration: "from 18:00:00 to 19:30:00",
      "late-entry": "until round 1 is paired",
      "check-in": "the last 10 min before the start (from 19:50:00)",
      scoring: "matchpoints against the same cards (duplicate deals)",
      "tie-breaks": "Buchholz, then first places, game points against the tables, head to head, a seeded draw",
      final: "the best 4 play a final",
      absent: "seated again in the next rounds",
      "time-limit": "30 min a round",
      "pairing-notice": "shown 1 min before each round",
      pause: "45 s",
    });
  });

  it("says the defaults", () => {
    const c = create(ChampionshipSchema, { settings: { rounds: 1, maxPlayers: 4, startWhenFull: true } });
    const lines = Object.fromEntries(settingsLines(c, 0).map((l) => [l.key, l.text]));
    expect(lines.start).toBe("when 4 are registered");
    expect(lines.registration).toBe("until the start");
    expect(lines["check-in"]).toBe("none");
    expect(lines.scoring).toBe("championship points by place");
    expect(lines.absent).toBe("dropped from the next rounds"); // unset: dropped
    expect(lines["pairing-notice"]).toBe("shown when each round starts");
    expect(lines.game).toContain("no time limit");
    const newer = create(ChampionshipSchema, { settings: { scoring: 5 as ChampionshipScoring } });
    expect(settingsLines(newer, 0).find((l) => l.key === "scoring")?.text).toBe("scoring 5");
  });

  it("says a Bisca championship's game: its kind, its tables, its hand and target, its clock", () => {
    const c = create(ChampionshipSchema, {
      settings: { rounds: 2, preset: "bisca7", game: "bisca" },
      rules: create(RulesSchema, { game: "bisca", players: 2, playTimeoutSeconds: 15, bisca: { handSize: 7, target: 2 } }),
    });
    const game = settingsLines(c, 0).find((l) => l.key === "game")?.text;
    expect(game).toBe("Bisca of 7 (2 players), tables of 2 (one of 3 when the count is odd), the most game points win, 7 cards, to 2 game points, 15 s a card");
    // A Hearts championship's words are as they were (no Bisca words).
    const hearts = create(ChampionshipSchema, { settings: { preset: "quick" }, rules: create(RulesSchema, { playTimeoutSeconds: 60, passTimeoutSeconds: 90 }) });
    expect(settingsLines(hearts, 0).find((l) => l.key === "game")?.text).not.toContain("Bisca");
  });

  it("offers the operator what fits the championship's state", () => {
    const of = (state: ChampionshipState) => directorActions(create(ChampionshipSchema, { state }));
    expect(of(ChampionshipState.REGISTERING)).toEqual({ start: true, pause: false, cancel: true });
    expect(of(ChampionshipState.RUNNING)).toEqual({ start: false, pause: true, cancel: true });
    expect(of(ChampionshipState.FINISHED)).toEqual({ start: false, pause: false, cancel: false });
  });
});
