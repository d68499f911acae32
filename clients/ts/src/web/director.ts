// A championship's settings on the page, both ways: the organizer's form read into
// ChampionshipSettings (every setting of championships.proto), and a championship's settings
// said back in words, each line keyed, so that everything an organizer set is shown where
// players read it. Pure: no DOM, no calls (tested in clients/ts/test/).

import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import {
  type Championship,
  ChampionshipScoring,
  type ChampionshipSettingsSchema,
  ChampionshipState,
} from "../gen/copas/v1/championships_pb.js";
import { type Rules, RulesOverridesSchema } from "../gen/copas/v1/copas_pb.js";
import { BISCA, BISCA_KINDS, isBisca } from "../bisca.js";
import { durationWords, enumWords, isMatchpoints, momentsOf, timeWords } from "../championships.js";
import { type Key, t } from "../i18n.js";
import { CLOCKS, presetName } from "./words.js";

/** The organizer's form as typed: text as the inputs give it, ticks as booleans. */
export interface DirectorForm {
  name: string;
  rounds: string;
  preset: string;
  /** A key of CLOCKS ("standard", "relaxed", "fast"). */
  clock: string;
  minPlayers: string;
  maxPlayers: string;
  /** datetime-local values ("2025-06-03T20:00:00", this browser's time), or "". */
  startAt: string;
  startWhenFull: boolean;
  registrationOpens: string;
  registrationCloses: string;
  lateEntryRounds: string;
  /** Minutes before the start (0 or "": no check-in). */
  checkInMinutes: string;
  /** Seconds between a round's end and the next one's seating. */
  pauseSeconds: string;
  /** Seconds a round's pairings are shown before its tables start. */
  noticeSeconds: string;
  /** Minutes a round's games may run (0 or "": no limit). */
  timeLimitMinutes: string;
  /** "places" or "matchpoints". */
  scoring: string;
  duplicateDeals: boolean;
  buchholz: boolean;
  /** "0", "2" (Bisca), "3", "4" or "5" (Hearts). */
  finalTable: string;
  dropAbsent: boolean;
}

type SettingsInit = MessageInitShape<typeof ChampionshipSettingsSchema>;

const count = (text: string) => (text.trim() ? Math.trunc(Number(text)) || 0 : 0);
const amount = (text: string) => (text.trim() ? Number(text) || 0 : 0);

/** A datetime-local value as a Timestamp (undefined when empty or not a time). */
export function localTime(value: string): ReturnType<typeof timestampFromMs> | undefined {
  if (!value.trim()) return undefined;
  const ms = new Date(value).getTime(); // a date-time without an offset is local time
  return Number.isNaN(ms) ? undefined : timestampFromMs(ms);
}

/** The organizer's Bisca presets: its kinds of two players (a Bisca championship seats
 * tables of 2, one of 3 when the count is odd: RULES.md, "A Bisca championship"). */
export const BISCA_CHAMPIONSHIP_PRESETS: readonly string[] = BISCA_KINDS.filter((k) => k.players === 2 && !k.partnerships).map((k) => k.preset);

/** The settings the form says (the server checks them and says what it refuses). A Bisca
 * preset makes a Bisca championship, with the clock's card time only (pass and moon clocks
 * are Hearts's options); any other is Hearts's, as before. */
export function settingsFromForm(form: DirectorForm): SettingsInit {
  const clock = CLOCKS[form.clock] ?? CLOCKS.standard!;
  const isBiscaForm = BISCA_CHAMPIONSHIP_PRESETS.includes(form.preset);
  return {
    displayName: form.name.trim(),
    rounds: count(form.rounds),
    preset: form.preset,
    ...(isBiscaForm ? { game: BISCA } : {}),
    rules: create(RulesOverridesSchema, isBiscaForm ? { playTimeoutSeconds: clock.play } : {
      playTimeoutSeconds: clock.play,
      passTimeoutSeconds: clock.pass,
      moonTimeoutSeconds: clock.moon,
    }),
    duplicateDeals: form.duplicateDeals || form.scoring === "matchpoints",
    maxPlayers: count(form.maxPlayers),
    minPlayers: count(form.minPlayers),
    startTime: localTime(form.startAt),
    startWhenFull: form.startWhenFull,
    roundPauseSeconds: amount(form.pauseSeconds),
    scoring: form.scoring === "matchpoints" ? ChampionshipScoring.MATCHPOINTS : ChampionshipScoring.PLACES,
    buchholz: form.buchholz,
    finalTable: count(form.finalTable),
    registrationOpenTime: localTime(form.registrationOpens),
    registrationCloseTime: localTime(form.registrationCloses),
    lateEntryRounds: count(form.lateEntryRounds),
    checkInSeconds: amount(form.checkInMinutes) * 60,
    dropAbsent: form.dropAbsent,
    roundTimeLimitSeconds: amount(form.timeLimitMinutes) * 60,
    pairingNoticeSeconds: amount(form.noticeSeconds),
  };
}

/** The games' clock: "20 s a card, 30 s to pass". */
export function clockWords(rules: Rules | undefined): string {
  if (!rules || rules.playTimeoutSeconds <= 0) return t("clockName.none");
  return t("clock.words", { play: Math.round(rules.playTimeoutSeconds), pass: Math.round(rules.passTimeoutSeconds) });
}

/** The games a championship plays, in words: Hearts's preset and clocks (as before), or
 * Bisca's kind, how it seats its tables, its hand and target, and its clock. */
export function gameWords(c: Championship): string {
  const rules = c.rules;
  const preset = c.settings?.preset ?? "";
  if (!rules || !isBisca(rules)) return [presetName(preset), clockWords(rules)].filter(Boolean).join(", ");
  const kind = BISCA_KINDS.some((k) => k.preset === preset) ? t(`kind.${preset}` as Key) : t("bisca.name");
  const clock = rules.playTimeoutSeconds > 0 ? t("clockName.card", { n: Math.round(rules.playTimeoutSeconds) }) : t("clockName.none");
  const hand = t("setting.biscaHand", { cards: rules.bisca?.handSize ?? 3, target: rules.bisca?.target ?? 4 });
  return [kind, t("setting.biscaTables"), hand, clock].join(", ");
}

/** One setting in words, keyed (the page marks each with its key). */
export interface SettingLine {
  key: string;
  label: string;
  text: string;
}

/** Every setting of the championship in words, as the server keeps it (``nowMs`` only chooses
 * whether times carry their date). */
export function settingsLines(c: Championship, nowMs: number): SettingLine[] {
  const s = c.settings;
  const at = (ms: number) => timeWords(ms, nowMs);
  const m = momentsOf(s);
  const rounds = s?.rounds ?? 0;
  const most = s?.maxPlayers ?? 0;
  const least = s?.minPlayers || 3;
  const starts: string[] = [];
  if (m.startMs !== undefined) starts.push(t("setting.startAt", { at: at(m.startMs) }));
  if (s?.startWhenFull) starts.push(t("setting.startFull", { n: most }));
  let registration: string;
  if (m.registrationOpensMs !== undefined && m.registrationClosesMs !== undefined) {
    registration = t("setting.fromTo", { from: at(m.registrationOpensMs), to: at(m.registrationClosesMs) });
  } else if (m.registrationOpensMs !== undefined) {
    registration = t("setting.fromToStart", { from: at(m.registrationOpensMs) });
  } else if (m.registrationClosesMs !== undefined) {
    registration = t("setting.until", { at: at(m.registrationClosesMs) });
  } else {
    registration = t("setting.untilStart");
  }
  const late = s?.lateEntryRounds ?? 0;
  const checkIn = s?.checkInSeconds ?? 0;
  const matchpoints = isMatchpoints(s);
  const known = [ChampionshipScoring.UNSPECIFIED, ChampionshipScoring.PLACES, ChampionshipScoring.MATCHPOINTS];
  const scoring = matchpoints
    ? t("setting.matchpoints")
    : known.includes(s?.scoring ?? 0)
      ? t(s?.duplicateDeals ? "setting.placesDuplicate" : "setting.places")
      : enumWords({}, ChampionshipScoring, s?.scoring ?? 0, "setting.scoringOther"); // newer than this page
  const final = s?.finalTable ?? 0;
  const limit = s?.roundTimeLimitSeconds ?? 0;
  const notice = s?.pairingNoticeSeconds ?? 0;
  const pause = s?.roundPauseSeconds ?? 0;
  return [
    { key: "rounds", label: t("col.rounds"), text: t("round.count", { n: rounds }) },
    { key: "game", label: t("col.games"), text: gameWords(c) },
    { key: "players", label: t("col.players"), text: most ? t("setting.playersRange", { least, most }) : t("setting.playersAtLeast", { least }) },
    { key: "start", label: t("setting.start"), text: starts.length ? starts.join(t("setting.or")) : t("setting.startOperator") },
    { key: "registration", label: t("setting.registration"), text: registration },
    { key: "late-entry", label: t("setting.lateEntry"), text: late ? t("setting.untilRound", { round: late }) : t("duration.none") },
    {
      key: "check-in",
      label: t("setting.checkIn"),
      text: checkIn > 0 && m.checkInOpensMs !== undefined
        ? t("setting.checkInLast", { length: durationWords(checkIn), from: at(m.checkInOpensMs) })
        : t("duration.none"),
    },
    { key: "scoring", label: t("setting.scoring"), text: scoring },
    {
      key: "tie-breaks",
      label: t("setting.tieBreaks"),
      text: t(s?.buchholz ? "setting.tieBreaksBuchholz" : "setting.tieBreaksText"),
    },
    { key: "final", label: t("champ.finalTable"), text: final ? t("setting.finalBest", { n: final }) : t("duration.none") },
    {
      key: "absent",
      label: t("setting.absent"),
      text: t(s?.dropAbsent === false ? "setting.absentSeated" : "setting.absentDropped"),
    },
    { key: "time-limit", label: t("setting.timeLimit"), text: limit > 0 ? t("setting.perRound", { length: durationWords(limit) }) : t("duration.none") },
    {
      key: "pairing-notice",
      label: t("setting.pairings"),
      text: notice > 0 ? t("setting.noticeBefore", { length: durationWords(notice) }) : t("setting.noticeAtStart"),
    },
    { key: "pause", label: t("setting.between"), text: pause > 0 ? durationWords(pause) : t("setting.noPause") },
  ];
}

/** Whether an operator may act on it now: start (registering), pause or resume (running). */
export function directorActions(c: Championship): { start: boolean; pause: boolean; cancel: boolean } {
  const running = c.state === ChampionshipState.RUNNING;
  return {
    start: c.state === ChampionshipState.REGISTERING,
    pause: running,
    cancel: running || c.state === ChampionshipState.REGISTERING,
  };
}

/** "5,10,0,11" -> [5, 10, 0, 11]; undefined when a part is not a whole number. */
export function numbersOf(text: string): number[] | undefined {
  const parts = text.split(/[\s,]+/).filter(Boolean);
  const numbers = parts.map(Number);
  return numbers.every((n) => Number.isInteger(n)) ? numbers : undefined;
}
