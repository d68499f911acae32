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
import { BISCA_CHAMPIONSHIP_PRESETS, type DirectorForm, directorActions, numbersOf, settingsFromForm } from "./director.js";
import { $, element } from "./dom.js";
import { type Key, t } from "./i18n.js";
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
  box.append(element("h2", t("org.title"), { id: "organize-title" }));

  const operator = fieldset(
    t("org.operator"),
    field("operator-token", t("org.token"), element("input", "", {
      id: "operator-token", type: "password", autocomplete: "off", spellcheck: "false", maxlength: "512",
    }), t("org.tokenNote")),
    field("operator-reason", t("org.why"), element("input", "", {
      id: "operator-reason", type: "text", maxlength: "200", autocomplete: "off",
    })),
  );

  const form = element("form", "", { id: "organize-form", "aria-labelledby": "organize-new" });
  form.append(
    fieldset(t("org.championship"),
      field("organize-name", t("org.name"), element("input", "", { id: "organize-name", required: "", maxlength: "60", autocomplete: "off" })),
      field("organize-rounds", t("col.rounds"), number("organize-rounds", { min: "1", max: "20", value: "3", required: "" })),
      field("organize-preset", t("col.games"), choice("organize-preset", [
        ["online", t("preset.online")], ["quick", t("preset.quick")], ["20", t("preset.20")], ["50", t("preset.50")], ["classic", t("preset.100")],
        ...BISCA_CHAMPIONSHIP_PRESETS.map((preset): [string, string] => [preset, t(`kind.${preset}` as Key)]),
      ])),
      field("organize-clock", t("play.clock"), choice("organize-clock", [
        ["standard", t("clock.standard")], ["relaxed", t("clock.relaxed")], ["fast", t("clock.fast")],
      ])),
      field("organize-min", t("org.min"), number("organize-min", { min: "3", placeholder: "3" })),
      field("organize-max", t("org.max"), number("organize-max", { min: "3", placeholder: t("org.maxPlaceholder") })),
    ),
    fieldset(t("org.when"),
      field("organize-start", t("org.startsAt"), when("organize-start"), t("org.startsNote")),
      tick("organize-when-full", t("org.whenFull")),
      field("organize-opens", t("org.opens"), when("organize-opens"), t("org.opensNote")),
      field("organize-closes", t("org.closes"), when("organize-closes"), t("org.closesNote")),
      field("organize-late", t("org.late"), number("organize-late", { min: "0", max: "20", placeholder: t("org.zeroNone") })),
      field("organize-check-in", t("org.checkIn"), number("organize-check-in", { min: "0", step: "any", placeholder: t("org.zeroNone") }),
        t("org.checkInNote")),
      field("organize-pause", t("org.pause"), number("organize-pause", { min: "0", max: "3600", step: "any", placeholder: "0" })),
      field("organize-notice", t("org.notice"), number("organize-notice", { min: "0", max: "3600", step: "any", placeholder: t("org.noticePlaceholder") })),
      field("organize-time-limit", t("org.timeLimit"), number("organize-time-limit", { min: "0", step: "any", placeholder: t("org.zeroNone") })),
    ),
    fieldset(t("setting.scoring"),
      field("organize-scoring", t("org.rankedBy"), choice("organize-scoring", [
        ["places", t("org.byPlace")], ["matchpoints", t("org.byMatchpoints")],
      ])),
      tick("organize-duplicate", t("org.duplicate")),
      tick("organize-buchholz", t("org.buchholz")),
      field("organize-final", t("champ.finalTable"), choice("organize-final", [["0", t("org.none")], ["2", t("org.best2")], ["3", t("org.best3")], ["4", t("org.best4")], ["5", t("org.best5")]])),
      tick("organize-drop", t("org.drop"), true),
    ),
  );
  const make = element("p", "", { class: "buttons" });
  make.append(
    element("button", t("org.create"), { id: "organize-create", type: "submit", class: "primary" }),
  );
  form.append(tick("organize-as-operator", t("org.asOperator")), make);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    void createChampionship();
  });
  const create = element("details", "", { id: "organize-new-box" });
  create.append(element("summary", t("org.new"), { id: "organize-new" }), form);

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
  if (!token) throw new Unready(t("org.needToken"));
  const reason = value("operator-reason").trim();
  if (!reason) throw new Unready(t("org.needReason"));
  return { headers: { authorization: `Bearer ${token}` }, reason };
}

function failed(what: string, error: unknown): void {
  if (error instanceof Unready) {
    showError(t("org.failed", { what, why: error.message }), "PAGE");
    return;
  }
  const why = refusal(error);
  const words = why.code === "UNIMPLEMENTED"
    ? t("org.noWebAdmin")
    : refusalWords(why);
  showError(t("org.failed", { what, why: words }), why.reason);
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
      if (!(await hooks.signedIn())) throw new Unready(t("org.signInFirst"));
      made = (await hooks.account.call((headers) => players.createChampionship({ settings, requestId: requestId() }, { headers })))
        .championship;
    }
    if (!made) return;
    say(t("org.made", { name: made.settings?.displayName ?? "" }));
    $<HTMLDetailsElement>("organize-new-box").open = false;
    hooks.open(made.championshipId);
  } catch (error) {
    failed(t("org.couldNotCreate"), error);
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
  $("director-title").textContent = t("org.run", { name: c.settings?.displayName || t("col.championship") });
  const can = directorActions(c);
  const parts: HTMLElement[] = [];
  const now = Date.now();
  const line = element("p", "", { class: "buttons" });
  if (can.start) {
    const start = momentsOf(c.settings).startMs;
    line.append(button("director-start", t("org.startNow"), (self) => void direct(t("org.couldNotStart"), t("org.started"), self,
      (id, reason, headers) => admin.startChampionship({ championshipId: id, reason }, { headers })), true), " ");
    if (start !== undefined) line.append(element("span", t("org.elseStarts", { at: timeWords(start, now) }), { class: "note" }), " ");
  }
  if (can.pause) {
    const isPaused = c.isPaused;
    line.append(button("director-pause", isPaused ? t("org.resume") : t("org.pauseButton"), (self) => void direct(
      isPaused ? t("org.couldNotResume") : t("org.couldNotPause"), isPaused ? t("org.resumed") : t("org.paused"), self,
      (id, reason, headers) => admin.pauseChampionship({ championshipId: id, isPaused: !isPaused, reason }, { headers })), true), " ");
  }
  if (can.cancel) {
    line.append(button("director-cancel", t("org.cancel"), (self) => {
      if (!confirm(t("org.cancelConfirm"))) return;
      void direct(t("org.couldNotCancel"), t("org.cancelled"), self,
        (id, reason, headers) => admin.cancelChampionship({ championshipId: id, reason }, { headers }));
    }));
  }
  if (line.childNodes.length) parts.push(line);

  const playing = c.players.filter((p) => !p.isDisqualified && !p.hasWithdrawn).map((p) => p.playerId);
  if (c.state === ChampionshipState.RUNNING && playing.length) {
    const who = playerChoice("director-disqualify-player", c, playing);
    parts.push(tool(t("org.disqualifyTitle"),
      field("director-disqualify-player", t("col.player"), who),
      button("director-disqualify", t("org.disqualify"), (self) => void direct(t("org.couldNotDisqualify"), t("org.disqualified"), self,
        (id, reason, headers) => admin.disqualifyChampionshipPlayer({ championshipId: id, player: who.value, reason }, { headers })))));
  }

  const announced = c.rounds.find((r) => r.isAnnounced);
  if (announced) {
    const seated = announced.tables.flatMap((t) => t.seats.map((s) => s.playerId));
    const a = playerChoice("director-reseat-a", c, seated);
    const b = playerChoice("director-reseat-b", c, seated);
    if (seated.length > 1) b.selectedIndex = seated.length - 1;
    const round = announced.roundNumber;
    parts.push(tool(t("org.swapTitle", { round: announced.isFinal ? t("champ.theFinal") : t("champ.round", { round }) }),
      field("director-reseat-a", t("org.one"), a), field("director-reseat-b", t("org.other"), b),
      button("director-reseat", t("org.swap"), (self) => void direct(t("org.couldNotSwap"), t("org.swapped"), self,
        (id, reason, headers) => admin.reseatChampionshipRound(
          { championshipId: id, roundNumber: round, playerA: a.value, playerB: b.value, reason }, { headers })))));
  }

  const counted = c.rounds.flatMap((r) => r.tables.filter((t) => t.isFinished).map((t) => ({ round: r, table: t })));
  if (counted.length) {
    const which = choice("director-correct-table", counted.map(({ round, table }) => [
      `${round.roundNumber}:${table.tableNumber}`,
      t("org.tableChoice", {
        round: round.isFinal ? t("col.final") : t("champ.roundTitle", { round: round.roundNumber }),
        n: table.tableNumber,
        names: table.seats.map((s) => s.displayName).join(", "),
      }),
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
    const setAbsences = tick("director-correct-absences", t("org.setAbsences"));
    parts.push(tool(t("org.correctTitle"),
      field("director-correct-table", t("col.table"), which),
      field("director-correct-totals", t("org.totals"), totals, t("org.totalsNote")),
      setAbsences,
      field("director-correct-leavers", t("org.leavers"), leavers),
      field("director-correct-absent", t("org.absent"), absent),
      button("director-correct", t("org.correct"), (self) => void direct(t("org.couldNotCorrect"), t("org.corrected"), self,
        (id, reason, headers) => {
          const [round, table] = which.value.split(":").map(Number);
          const seatTotals = numbersOf(totals.value);
          const left = numbersOf(leavers.value);
          const never = numbersOf(absent.value);
          if (!seatTotals || !left || !never) throw new Unready(t("org.wholeNumbers"));
          return admin.correctChampionshipResult({
            championshipId: id, roundNumber: round ?? 0, tableNumber: table ?? 0, totals: seatTotals,
            setAbsences: isTicked("director-correct-absences"), leaverSeats: left, noShowSeats: never, reason,
          }, { headers });
        }))));
  }
  if (!parts.length) parts.push(element("p", t("org.nothing"), { class: "note" }));
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
