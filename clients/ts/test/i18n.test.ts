// src/web/i18n.ts: every message in both languages, the same placeholders in each, the
// language chosen from the browser's, and no sentence shown to people written in the code.

import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { CATALOGUES, chooseLang, type Key, type Message, setLang, t } from "../src/i18n.js";
import { BR } from "../src/i18n-br.js";
import { cardIndex } from "../src/web/faces.js";
import { cardName, listNames, ordinal, refusalWords } from "../src/web/words.js";
import { card } from "./cards.js";

const WEB = join(import.meta.dirname, "..", "src", "web");
const HTML = join(import.meta.dirname, "..", "..", "..", "server", "web", "index.html");

function forms(message: Message): string[] {
  return typeof message === "string" ? [message] : Object.values(message).filter((m): m is string => !!m);
}

function placeholders(message: Message): string[] {
  return [...new Set(forms(message).flatMap((m) => [...m.matchAll(/\{(\w+)\}/g)].map((x) => x[1]!)))].sort();
}

afterEach(() => setLang("en"));

describe("the catalogue", () => {
  it("has every key in both languages, none empty", () => {
    const en = Object.keys(CATALOGUES.en).sort();
    const pt = Object.keys(CATALOGUES.pt).sort();
    expect(pt.filter((k) => !en.includes(k))).toEqual([]);
    expect(en.filter((k) => !pt.includes(k))).toEqual([]);
    for (const lang of ["en", "pt"] as const) {
      for (const [key, message] of Object.entries(CATALOGUES[lang])) {
        for (const text of forms(message)) expect(text.trim(), `${lang} ${key}`).not.toBe("");
      }
    }
  });

  it("uses the same placeholders in both languages", () => {
    for (const key of Object.keys(CATALOGUES.en) as Key[]) {
      expect(placeholders(CATALOGUES.pt[key]), key).toEqual(placeholders(CATALOGUES.en[key]));
    }
  });

  it("names in index.html only keys it has", () => {
    const html = readFileSync(HTML, "utf8");
    const used = [...html.matchAll(/data-i18n(?:-label|-placeholder|-title)?="([^"]+)"/g)].map((m) => m[1]!);
    expect(used.length).toBeGreaterThan(50);
    expect(used.filter((k) => !(k in CATALOGUES.en))).toEqual([]);
  });

  it("leaves no sentence for people in the page's code", () => {
    // A string shown to people goes through t(): as an element's text, a textContent, a
    // hint's text, a label or a title. Data attributes, classes and ids are not shown.
    const shown = [
      /element\(\s*"[a-z0-9]+",\s*[`"][^`"]*[A-Za-z]{2}/,
      /\.textContent\s*=\s*[`"][^`"]*[A-Za-z]{2}/,
      /\b(text|title|"aria-label"|placeholder):\s*[`"][^`"]*[A-Za-z]{2}/,
      /\.(title|placeholder)\s*=\s*[`"][^`"]*[A-Za-z]{2}/,
      /(confirm|alert)\(\s*[`"]/,
    ];
    const found: string[] = [];
    const files = readdirSync(WEB).filter((f) => f.endsWith(".ts") && !f.startsWith("i18n")).map((f) => join(WEB, f));
    files.push(join(WEB, "..", "championships.ts")); // the championships' words, shared with the page
    for (const file of files) {
      readFileSync(file, "utf8")
        .split("\n")
        .forEach((line, i) => {
          if (/^\s*(\/\/|\*|\/\*)/.test(line)) return;
          const words = line.replace(/\$\{[^}]*\}/g, "");  // what a template fills in is not its words
          if (shown.some((pattern) => pattern.test(words))) found.push(`${file.split("/src/")[1]}:${i + 1}: ${line.trim()}`);
        });
    }
    expect(found).toEqual([]);
  });
});

describe("the language", () => {
  it("is the kept choice, else the browser's first of Portuguese or English, else English", () => {
    expect(chooseLang(null, ["pt-PT", "en"])).toBe("pt");
    expect(chooseLang(null, ["pt-BR"])).toBe("pt-BR");
    expect(chooseLang(null, ["pt-br", "pt-PT"])).toBe("pt-BR");
    expect(chooseLang(null, ["pt-AO"])).toBe("pt");
    expect(chooseLang("pt-BR", ["pt-PT"])).toBe("pt-BR");
    expect(chooseLang("klingon", ["pt-PT"])).toBe("pt");
    expect(chooseLang(null, ["fr-FR", "pt"])).toBe("pt");
    expect(chooseLang(null, ["en-US", "pt-PT"])).toBe("en");
    expect(chooseLang(null, ["de"])).toBe("en");
    expect(chooseLang("en", ["pt-PT"])).toBe("en");
    expect(chooseLang("pt", ["en"])).toBe("pt");
  });

  it("speaks Portuguese as the rules do", () => {
    setLang("pt");
    expect(cardName(card("QS"))).toBe("dama de espadas");
    expect(cardName(card("AH"))).toBe("ás de copas");
    expect(cardName(card("JD"))).toBe("valete de ouros");
    expect(cardName(card("KC"))).toBe("rei de paus");
    expect(ordinal(2)).toBe("2.º");
    expect(listNames(["Ana", "Bea", "Cid"])).toBe("Ana, Bea e Cid");
    expect(t("seat.hearts", { n: 1 })).toBe("1 copa");
    expect(t("seat.hearts", { n: 3 })).toBe("3 copas");
    expect(t("me.games", { n: 1234, wins: 5 })).toBe("1234 jogos, 5 ganhos");
  });

  it("draws the face cards' indices in the page's language: V, D, R, A in Portuguese", () => {
    const ranks = ["J", "Q", "K", "A", "10", "7"];
    setLang("pt");
    expect(ranks.map(cardIndex)).toEqual(["V", "D", "R", "A", "10", "7"]);
    expect(t("fact.queenOnTable")).toBe("D♠ na mesa"); // the Dama in the words too
    setLang("pt-BR");
    expect(ranks.map(cardIndex)).toEqual(["V", "D", "R", "A", "10", "7"]);
    setLang("en");
    expect(ranks.map(cardIndex)).toEqual(["J", "Q", "K", "A", "10", "7"]);
  });

  it("speaks Brazil's Portuguese where its words differ, Portugal's elsewhere", () => {
    setLang("pt-BR");
    expect(t("field.password")).toBe("Senha");
    expect(t("field.username")).toBe("Nome de usuário");
    expect(t("why.waitPlay", { names: "Ana" })).toBe("Espere: Ana jogando");
    expect(t("again.rematch")).toBe("Revanche");
    expect(cardName(card("QS"))).toBe("dama de espadas"); // the cards are the same
    expect(t("play.title")).toBe(CATALOGUES.pt["play.title"]);
    // Only keys the page has, with the placeholders of the message they replace.
    for (const [key, message] of Object.entries(BR)) {
      expect(key in CATALOGUES.en, key).toBe(true);
      expect(placeholders(message!), key).toEqual(placeholders(CATALOGUES.en[key as Key]));
    }
    // No word only Portugal says reaches the Brazilian page.
    const portugalOnly = [
      /utilizador/i, /palavra-passe/i, /ligação/i, /ecrã/i, /\bequipas?\b/i, /separador/i,
      /\brondas?\b/i, /\bregisto/i, /descarreg/i, /demasiad/i, /desforra/i, /leva-o/,
      /\b(está|estão|estava|\{names\}|\{name\}) a \p{L}+[aei]r\b/iu, /\bA (ligar|entrar|passar)…/,
    ];
    const found = Object.entries(CATALOGUES["pt-BR"]).flatMap(([key, message]) =>
      forms(message).filter((text) => portugalOnly.some((word) => word.test(text))).map((text) => `${key}: ${text}`),
    );
    expect(found).toEqual([]);
  });

  it("gives the rules' reasons in Portuguese", () => {
    setLang("pt");
    const view = { trick: { cards: [{ seat: 1, card: card("5C") }] }, rules: { players: 4 } };
    const refused = { code: "FAILED_PRECONDITION", message: "", reason: "MUST_FOLLOW_SUIT", domain: "copas.v1", quotas: [] };
    // biome-ignore lint/suspicious/noExplicitAny: a partial view is enough for the words
    expect(refusalWords(refused, view as any)).toBe("Tem de assistir a ♣.");
    expect(refusalWords({ ...refused, reason: "SERVER_FULL", retryAfterMs: 3000 })).toBe(
      "O servidor está cheio neste momento. Tente de novo dentro de 3 s.",
    );
  });
});
