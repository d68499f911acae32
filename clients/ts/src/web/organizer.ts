// The organizer's panel: a new championship with every setting (ChampionshipSettings), made
// as the signed-in account (ChampionshipService, within the server's quota) or as the
// server's operator (AdminService, no quota), and the tournament director's tools for the
// championship open in the panel above: start it now, pause and resume it, cancel it,
// disqualify a player, swap two players of an announced round, correct a counted result.
//
// The operator's calls need the server's operator token, and the server relays them on the
// web port only with --web-admin. The token is typed into a password field and read from it
// at each call: it is never kept elsewhere (no localStorage, no sessionStorage, no URL), never
// shown, and sent only in the `authorization` header of those calls to this same server.

import { createClient, type Transport } from "@connectrpc/connect";
import { isEnded, momentsOf, timeWords } from "../championships.js";
import { type AccountSession, refusal } from "../copas.js";
import { AdminService } from "../gen/copas/admin/v1/admin_pb.js";
import { type Championship, ChampionshipService, ChampionshipState } from "../gen/copas/v1/championships_pb.js";
import { type DirectorForm, directorActions, numbersOf, settingsFromForm } from "./director.js";
import { $, element } from "./dom.js";
import { refusalWords } from "./words.js";

export interface OrganizerHooks {
  transport: Transport;
  account: AccountSession;
  signedIn: () => Promise<boolean>;
  /** The panel goes after this one. */
  after: HTMLElement;
  /** Follow championship ``id`` and show it (a new one, just made). */
  open: (id: string) => void;
  /** The championship shown above (its tools are for it). */
  current: () => Championship | undefined;
  /** An operator's call changed championship ``id``: show it as it is now. */
  changed: (id: string) => void;
}

let hooks: OrganizerHooks;
let players: ReturnType<typeof createClient<typeof ChampionshipService>>;
let admin: ReturnType<typeof createClient<typeof AdminService>>;

/** A refusal of the page's own, before any call. */
class Unready extends Error {}

function requestId(): string {
  return Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join("");
}

function field(id: string, label: string, input: HTMLElement, note = ""): HTMLElement {
  const box = element("div", "", { class: "field" });
  box.append(element("label", label, { for: id }), input);
  if (note) box.append(element("p", note, { class: "note", id: `${id}-note` }));
  if (note) input.setAttribute("aria-describedby", `${id}-note`);
  return box;
}

function tick(id: string, label: string, isChecked = false): HTMLElement {
  const box = element("div", "", { class: "field tick" });
  const input = element("input", "", { id, type: "checkbox", ...(isChecked ? { checked: "" } : {}) });
  box.append(input, element("label", label, { for: id }));
  return box;
}

function number(id: string, attributes: Record<string, string> = {}): HTMLInputElement {
  return element("input", "", { id, type: "number", inputmode: "decimal", ...attributes });
}

function choice(id: string, options: [string, string][], selected = ""): HTMLSelectElement {
  const select = element("select", "", { id });
  for (const [value, text] of options) {
    select.append(element("option", text, { value, ...(value === selected ? { selected: "" } : {}) }));
  }
  return select;
}

function when(id: string): HTMLInputElement {
  return element("input", "", { id, type: "datetime-local", step: "1" });
}

function fieldset(legend: string, ...fields: HTMLElement[]): HTMLFieldSetElement {
  const set = element("fieldset", "", { class: "fields" });
  set.append(element("legend", legend), ...fields);
  return set;
}

function panel(): HTMLElement {
  const box = element("section", "", { id: "organize", class: "panel", "aria-labelledby": "organize-title" });
  box.append(element("h2", "Organize a championship", { id: "organize-title" }));

  const operator = fieldset(
    "The server's operator",
    field("operator-token", "Operator token", element("input", "", {
      id: "operator-token", type: "password", autocomplete: "off", spellcheck: "false", maxlength: "512",
    }), "Only for the operator's tools (start, pause, correct, disqualify, re-seat) and to create without a quota. " +
      "It stays in this field: never saved, never shown, sent only to this server with those calls."),
    field("operator-reason", "Why (for the operators' log)", element("input", "", {
      id: "operator-reason", type: "text", maxlength: "200", autocomplete: "off",
    })),
  );

  const form = element("form", "", { id: "organize-form", "aria-labelledby": "organize-new" });
  form.append(
    fieldset("The championship",
      field("organize-name", "Name", element("input", "", { id: "organize-name", required: "", maxlength: "60", autocomplete: "off" })),
      field("organize-rounds", "Rounds", number("organize-rounds", { min: "1", max: "20", value: "3", required: "" })),
      field("organize-preset", "Games", choice("organize-preset", [
        ["online", "Four hands"], ["quick", "One hand"], ["20", "To 20 points"], ["50", "To 50 points"], ["classic", "To 100 points"],
      ])),
      field("organize-clock", "Clock", choice("organize-clock", [
        ["standard", "20 s a card, 30 s to pass"], ["relaxed", "60 s a card, 90 s to pass"], ["fast", "10 s a card, 15 s to pass"],
      ])),
      field("organize-min", "Players at least", number("organize-min", { min: "3", placeholder: "3" })),
      field("organize-max", "Players at most", number("organize-max", { min: "3", placeholder: "the server's most" })),
    ),
    fieldset("When",
      field("organize-start", "Starts at", when("organize-start"), "Your time. Empty: when full, or when the operator starts it."),
      tick("organize-when-full", "Start as soon as it is full"),
      field("organize-opens", "Registration opens at", when("organize-opens"), "Empty: at once."),
      field("organize-closes", "Registration closes at", when("organize-closes"), "Empty: at the start."),
      field("organize-late", "Late entry until round", number("organize-late", { min: "0", max: "20", placeholder: "0: none" })),
      field("organize-check-in", "Check-in (minutes before the start)", number("organize-check-in", { min: "0", step: "any", placeholder: "0: none" }),
        "Players say they are here in that time; who has not is removed at the start. Needs a start time."),
      field("organize-pause", "Pause between rounds (seconds)", number("organize-pause", { min: "0", max: "3600", step: "any", placeholder: "0" })),
      field("organize-notice", "Pairings shown ahead (seconds)", number("organize-notice", { min: "0", max: "3600", step: "any", placeholder: "0: with the tables" })),
      field("organize-time-limit", "Time limit per round (minutes)", number("organize-time-limit", { min: "0", step: "any", placeholder: "0: none" })),
    ),
    fieldset("Scoring",
      field("organize-scoring", "Ranked by", choice("organize-scoring", [
        ["places", "Championship points by place"], ["matchpoints", "Matchpoints against the same cards"],
      ])),
      tick("organize-duplicate", "Duplicate deals (every table of a size gets the same cards; matchpoints need them)"),
      tick("organize-buchholz", "Buchholz tie-break (the opponents' scores) right after the score"),
      field("organize-final", "Final table", choice("organize-final", [["0", "None"], ["3", "The best 3"], ["4", "The best 4"], ["5", "The best 5"]])),
      tick("organize-drop", "Drop players who never come to a game from the next rounds", true),
    ),
  );
  const make = element("p", "", { class: "buttons" });
  make.append(
    element("button", "Create the championship", { id: "organize-create", type: "submit", class: "primary" }),
  );
  form.append(tick("organize-as-operator", "Create it as the server's operator (no quota: needs the operator token)"), make);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    void createChampionship();
  });
  const create = element("details", "", { id: "organize-new-box" });
  create.append(element("summary", "A new championship", { id: "organize-new" }), form);

  const director = element("section", "", { id: "director", hidden: "", "aria-labelledby": "director-title" });
  director.append(
    element("h3", "", { id: "director-title" }),
    element("div", "", { id: "director-tools" }),
  );
  box.append(operator, create, director,
    element("p", "", { id: "organize-status", role: "status" }),
    element("p", "", { id: "organize-error", class: "error", role: "alert" }));
  return box;
}

function value(id: string): string {
  return $<HTMLInputElement>(id).value;
}

function isTicked(id: string): boolean {
  return $<HTMLInputElement>(id).checked;
}

function readForm(): DirectorForm {
  return {
    name: value("organize-name"), rounds: value("organize-rounds"), preset: value("organize-preset"),
    clock: value("organize-clock"), minPlayers: value("organize-min"), maxPlayers: value("organize-max"),
    startAt: value("organize-start"), startWhenFull: isTicked("organize-when-full"),
    registrationOpens: value("organize-opens"), registrationCloses: value("organize-closes"),
    lateEntryRounds: value("organize-late"), checkInMinutes: value("organize-check-in"),
    pauseSeconds: value("organize-pause"), noticeSeconds: value("organize-notice"),
    timeLimitMinutes: value("organize-time-limit"), scoring: value("organize-scoring"),
    duplicateDeals: isTicked("organize-duplicate"), buchholz: isTicked("organize-buchholz"),
    finalTable: value("organize-final"), dropAbsent: isTicked("organize-drop"),
  };
}

function say(text: string): void {
  $("organize-status").textContent = text;
}

function showError(text: string, reason = ""): void {
  $("organize-error").textContent = text;
  $("organize-error").dataset.reason = reason;
}

/** The operator's headers and reason, from the fields (read now, kept nowhere). */
function operator(): { headers: Record<string, string>; reason: string } {
  const token = value("operator-token").trim();
  if (!token) throw new Unready("Type the operator token first (under “The server's operator”).");
  const reason = value("operator-reason").trim();
  if (!reason) throw new Unready("Say why, for the operators' log (under “The server's operator”).");
  return { headers: { authorization: `Bearer ${token}` }, reason };
}

function failed(what: string, error: unknown): void {
  if (error instanceof Unready) {
    showError(`${what}. ${error.message}`, "PAGE");
    return;
  }
  const why = refusal(error);
  const words = why.code === "UNIMPLEMENTED"
    ? "This server does not take the operator's calls on its page (it was started without --web-admin): use `copas admin championship`."
    : refusalWords(why);
  showError(`${what}. ${words}`, why.reason);
}

async function createChampionship(): Promise<void> {
  const button = $<HTMLButtonElement>("organize-create");
  button.disabled = true;
  showError("");
  say("");
  try {
    const settings = settingsFromForm(readForm());
    let made: Championship | undefined;
    if (isTicked("organize-as-operator")) {
      const { headers, reason } = operator();
      made = (await admin.createChampionship({ settings, reason, requestId: requestId() }, { headers })).championship;
    } else {
      if (!(await hooks.signedIn())) throw new Unready("Sign in first (the page signs you in as a guest).");
      made = (await hooks.account.call((headers) => players.createChampionship({ settings, requestId: requestId() }, { headers })))
        .championship;
    }
    if (!made) return;
    say(`“${made.settings?.displayName ?? ""}” is open: its link is under its name above.`);
    $<HTMLDetailsElement>("organize-new-box").open = false;
    hooks.open(made.championshipId);
  } catch (error) {
    failed("Could not create the championship", error);
  } finally {
    button.disabled = false;
  }
}

/** An operator's call for the championship shown, with the fields' token and reason. */
async function direct(what: string, done: string, button: HTMLButtonElement,
  call: (id: string, reason: string, headers: Record<string, string>) => Promise<{ championship?: Championship }>): Promise<void> {
  const c = hooks.current();
  if (!c) return;
  button.disabled = true;
  showError("");
  say("");
  try {
    const { headers, reason } = operator();
    const answer = await call(c.championshipId, reason, headers);
    say(done);
    // Shown at once, also where no stream brings it (a finished championship's correction).
    hooks.changed(c.championshipId);
    // The tools as the answer leaves it (Resume after Pause), before the stream says it too.
    if (answer.championship && hooks.current()?.championshipId === answer.championship.championshipId) {
      renderDirector(answer.championship);
    }
  } catch (error) {
    failed(what, error);
  } finally {
    button.disabled = false;
  }
}

function button(id: string, text: string, click: (self: HTMLButtonElement) => void, primary = false): HTMLButtonElement {
  const made = element("button", text, { id, type: "button", ...(primary ? { class: "primary" } : {}) });
  made.addEventListener("click", () => click(made));
  return made;
}

function playerChoice(id: string, c: Championship, ids: string[]): HTMLSelectElement {
  const names = new Map(c.players.map((p) => [p.playerId, p.displayName]));
  return choice(id, ids.map((p) => [p, `${names.get(p) ?? p} (${p})`]));
}

function tool(title: string, ...parts: (HTMLElement | string)[]): HTMLElement {
  const set = element("fieldset", "", { class: "tool" });
  set.append(element("legend", title), ...parts);
  return set;
}

/** The director's tools for the championship shown (nothing when none is, or it is over). */
export function renderDirector(c: Championship | undefined): void {
  const box = document.getElementById("director");
  if (!box) return;
  const tools = $("director-tools");
  // Redrawn on a change (its version; also its state, pause and rounds, for a server whose
  // messages carry no version).
  const key = c ? `${c.championshipId}:${c.version}:${c.state}:${c.isPaused}:${c.rounds.map((r) => `${r.isAnnounced}${r.isFinished}`)}` : "";
  const isOperator = !!value("operator-token").trim();
  if (tools.dataset.key === key && box.hidden === !isOperator) return; // the same: keep what is typed, chosen
  tools.dataset.key = key;
  // Shown once an operator token is typed: the tools are the operator's.
  box.hidden = !c || (isEnded(c) && c.state !== ChampionshipState.FINISHED) || !isOperator;
  if (!c || box.hidden) {
    tools.replaceChildren();
    return;
  }
  box.dataset.championship = c.championshipId;
  $("director-title").textContent = `Run “${c.settings?.displayName || "Championship"}” (operator)`;
  const can = directorActions(c);
  const parts: HTMLElement[] = [];
  const now = Date.now();
  const line = element("p", "", { class: "buttons" });
  if (can.start) {
    const start = momentsOf(c.settings).startMs;
    line.append(button("director-start", "Start now", (self) => void direct("Could not start it", "Started.", self,
      (id, reason, headers) => admin.startChampionship({ championshipId: id, reason }, { headers })), true), " ");
    if (start !== undefined) line.append(element("span", `(else it starts at ${timeWords(start, now)}) `, { class: "note" }));
  }
  if (can.pause) {
    const isPaused = c.isPaused;
    line.append(button("director-pause", isPaused ? "Resume" : "Pause", (self) => void direct(
      isPaused ? "Could not resume it" : "Could not pause it", isPaused ? "Resumed." : "Paused: every table waits.", self,
      (id, reason, headers) => admin.pauseChampionship({ championshipId: id, isPaused: !isPaused, reason }, { headers })), true), " ");
  }
  if (can.cancel) {
    line.append(button("director-cancel", "Cancel the championship", (self) => {
      if (!confirm("Cancel it for good? Its games in play end and are not counted.")) return;
      void direct("Could not cancel it", "Cancelled.", self,
        (id, reason, headers) => admin.cancelChampionship({ championshipId: id, reason }, { headers }));
    }));
  }
  if (line.childNodes.length) parts.push(line);

  const playing = c.players.filter((p) => !p.isDisqualified && !p.hasWithdrawn).map((p) => p.playerId);
  if (c.state === ChampionshipState.RUNNING && playing.length) {
    const who = playerChoice("director-disqualify-player", c, playing);
    parts.push(tool("Disqualify a player (ranked last, results kept)",
      field("director-disqualify-player", "Player", who),
      button("director-disqualify", "Disqualify", (self) => void direct("Could not disqualify", "Disqualified.", self,
        (id, reason, headers) => admin.disqualifyChampionshipPlayer({ championshipId: id, player: who.value, reason }, { headers })))));
  }

  const announced = c.rounds.find((r) => r.isAnnounced);
  if (announced) {
    const seated = announced.tables.flatMap((t) => t.seats.map((s) => s.playerId));
    const a = playerChoice("director-reseat-a", c, seated);
    const b = playerChoice("director-reseat-b", c, seated);
    if (seated.length > 1) b.selectedIndex = seated.length - 1;
    const round = announced.roundNumber;
    parts.push(tool(`Swap two players of ${announced.isFinal ? "the final" : `round ${round}`} before it starts`,
      field("director-reseat-a", "One", a), field("director-reseat-b", "The other (at another table)", b),
      button("director-reseat", "Swap them", (self) => void direct("Could not swap them", "Swapped.", self,
        (id, reason, headers) => admin.reseatChampionshipRound(
          { championshipId: id, roundNumber: round, playerA: a.value, playerB: b.value, reason }, { headers })))));
  }

  const counted = c.rounds.flatMap((r) => r.tables.filter((t) => t.isFinished).map((t) => ({ round: r, table: t })));
  if (counted.length) {
    const which = choice("director-correct-table", counted.map(({ round, table }) => [
      `${round.roundNumber}:${table.tableNumber}`,
      `${round.isFinal ? "Final" : `Round ${round.roundNumber}`}, table ${table.tableNumber}: ${table.seats.map((s) => s.displayName).join(", ")}`,
    ]));
    const totals = element("input", "", { id: "director-correct-totals", type: "text", autocomplete: "off", inputmode: "numeric" });
    const leavers = element("input", "", { id: "director-correct-leavers", type: "text", autocomplete: "off", inputmode: "numeric" });
    const absent = element("input", "", { id: "director-correct-absent", type: "text", autocomplete: "off", inputmode: "numeric" });
    const fill = () => {
      const found = counted.find(({ round, table }) => `${round.roundNumber}:${table.tableNumber}` === which.value);
      totals.value = found ? found.table.seats.map((s) => s.total).join(", ") : "";
      leavers.value = found ? found.table.seats.filter((s) => s.hasLeft).map((s) => s.seat).join(", ") : "";
      absent.value = found ? found.table.seats.filter((s) => s.isNoShow).map((s) => s.seat).join(", ") : "";
    };
    which.addEventListener("change", fill);
    fill();
    const setAbsences = tick("director-correct-absences", "Also set who left (in order) and who never came");
    parts.push(tool("Correct a result (seats from 0)",
      field("director-correct-table", "Table", which),
      field("director-correct-totals", "Game points by seat", totals, "One number a seat, in seat order: 5, 10, 0, 11."),
      setAbsences,
      field("director-correct-leavers", "Seats that left, first to leave first", leavers),
      field("director-correct-absent", "Seats that never came", absent),
      button("director-correct", "Correct it", (self) => void direct("Could not correct it", "Corrected: the standings follow.", self,
        (id, reason, headers) => {
          const [round, table] = which.value.split(":").map(Number);
          const seatTotals = numbersOf(totals.value);
          const left = numbersOf(leavers.value);
          const never = numbersOf(absent.value);
          if (!seatTotals || !left || !never) throw new Unready("Write whole numbers, separated by commas.");
          return admin.correctChampionshipResult({
            championshipId: id, roundNumber: round ?? 0, tableNumber: table ?? 0, totals: seatTotals,
            setAbsences: isTicked("director-correct-absences"), leaverSeats: left, noShowSeats: never, reason,
          }, { headers });
        }))));
  }
  if (!parts.length) parts.push(element("p", "Nothing to do now.", { class: "note" }));
  // What the operator chose or typed stays, where it still fits (a change redraws the tools).
  const kept = new Map(Array.from(tools.querySelectorAll<HTMLInputElement | HTMLSelectElement>("input, select"),
    (input) => [input.id, input instanceof HTMLInputElement && input.type === "checkbox" ? String(input.checked) : input.value]));
  tools.replaceChildren(...parts);
  for (const input of tools.querySelectorAll<HTMLInputElement | HTMLSelectElement>("input, select")) {
    const was = kept.get(input.id);
    if (was === undefined) continue;
    if (input instanceof HTMLInputElement && input.type === "checkbox") input.checked = was === "true";
    else if (!(input instanceof HTMLSelectElement) || Array.from(input.options).some((o) => o.value === was)) input.value = was;
  }
}

export function startOrganizer(given: OrganizerHooks): void {
  hooks = given;
  players = createClient(ChampionshipService, hooks.transport);
  admin = createClient(AdminService, hooks.transport);
  hooks.after.after(panel());
  $("operator-token").addEventListener("input", () => renderDirector(hooks.current()));
}
