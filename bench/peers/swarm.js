// What both drivers share: keep T tables busy for D seconds (a finished game is replaced by a
// new one at that table), then print one JSON line: cards played, moves/s, errors.
// With --move-interval S (bench/peers.py --pace): a human pace instead, each seat waiting S
// seconds before each of its decisions (as `copas loadtest --move-interval`), each table
// starting at a seeded random moment within the first S; only the cards sent and the views
// seen between --window-start and --window-end (epoch seconds; without them, a line
// "start end stop" on stdin tells them) count; the run stops at --stop.
// Errors are the whole run's (an error stops its table).
"use strict";

function options(argv) {
  const named = {};
  for (let i = 0; i < argv.length; i += 2) named[argv[i].replace(/^--/, "")] = argv[i + 1];
  return { port: Number(named.port), tables: Number(named.tables || 20),
    duration: Number(named.duration || 15), firstSeed: Number(named["first-seed"] || 1),
    moveInterval: Number(named["move-interval"] || 0),
    windowStart: Number(named["window-start"] || 0), windowEnd: Number(named["window-end"] || 0),
    stop: Number(named.stop || 0) };
}

// playGame(seed, played, stopped, pace) plays one game with its four connections and resolves
// when it is over or stopped() is true; played() counts a card the server accepted; pace is
// null flat out, else a Pace for this game.
async function swarm(argv, playGame) {
  const { tables, duration, firstSeed, moveInterval } = options(argv);
  if (moveInterval > 0) return paced(argv, playGame);
  const start = process.hrtime.bigint();
  const elapsed = () => Number(process.hrtime.bigint() - start) / 1e9;
  const stopped = () => elapsed() >= duration;
  let moves = 0;
  let games = 0;
  let errors = 0;
  const slot = async (table) => {
    for (let game = 0; !stopped(); game++) {
      try {
        await playGame(firstSeed + table * 100000 + game, () => { if (!stopped()) moves++; }, stopped, null);
        games++;
      } catch (error) {
        errors++; // the table stops: an error is the driver's or the peer's to fix
        if (errors <= 3) console.error(error);
        return;
      }
    }
  };
  await Promise.all([...Array(tables).keys()].map(slot));
  const seconds = Math.min(elapsed(), duration);
  // To a pipe, stdout is written asynchronously: exit once the line is out (process.exit
  // right after console.log cut a line of more than 64 KiB).
  process.stdout.write(`${JSON.stringify({ moves, games, errors, duration_s: seconds,
    moves_per_s: Math.round((moves / seconds) * 10) / 10 })}\n`, () => process.exit(0));
}

// One game's pacing and timing. A seat's decision (a key naming it: the hand's pass, one card
// of one trick) is taken only once the seat has waited the interval since it first saw it;
// a card's sending and the other seats' first views of it are timed by its place in the game
// (progress: hand * 64 + trick * 4 + cards on the trick).
class Pace {
  constructor(intervalMs, counts) {
    this.intervalMs = intervalMs;
    this.counts = counts;
    this.seats = new Set(); // the seats that have seen the game
    this.inside = false;
    this.waited = [new Set(), new Set(), new Set(), new Set()];
    this.timers = new Map();
    this.sentAt = new Map(); // progress of a card -> [seat, ms]
    this.seen = [-1, -1, -1, -1];
  }

  // True when the seat may act on this decision now; otherwise calls again() once it may.
  ready(seat, key, again) {
    if (this.waited[seat].has(key)) return true;
    const timer = `${seat}/${key}`;
    if (!this.timers.has(timer)) {
      this.timers.set(timer, setTimeout(() => {
        this.timers.delete(timer);
        this.waited[seat].add(key);
        again();
      }, this.intervalMs));
    }
    return false;
  }

  sent(seat, progress) {
    const now = nowMs();
    this.sentAt.set(progress, [seat, now]);
    if (inWindow(this.counts, now)) this.counts.moves++;
  }

  viewed(seat, progress) { // the seat's view now shows every card before `progress`
    const now = nowMs();
    for (let card = Math.max(0, this.seen[seat]); card < progress; card++) {
      const sending = this.sentAt.get(card);
      if (sending && sending[0] !== seat && inWindow(this.counts, now)) {
        this.counts.viewMs.push(Math.round((now - sending[1]) * 1000) / 1000);
      }
    }
    this.seen[seat] = Math.max(this.seen[seat], progress);
  }

  // A game's making (lobby calls, connections, until its four seats see it) waits its turn:
  // at most SETTING_UP games of a driver at once, so that a thousand tables starting within
  // one interval do not overflow the peer's listen backlog (the making is no part of the pace).
  async enter() {
    await this.counts.settingUp.enter();
    this.inside = true;
  }

  seated(seat) {
    this.seats.add(seat);
    if (this.seats.size === 4) this.leave();
  }

  leave() {
    if (this.inside) this.counts.settingUp.leave();
    this.inside = false;
  }

  stop() {
    this.timers.forEach((timer) => clearTimeout(timer));
    this.leave();
  }
}

const SETTING_UP = 100; // boardgame.io: up to 4 lobby calls each, under its listen backlog (511)

function gate(size) { // a semaphore: at most `size` inside at once, the others wait in turn
  let free = size;
  const waiting = [];
  return {
    enter: () => (free > 0 ? Promise.resolve(free--) : new Promise((resolve) => waiting.push(resolve))),
    leave: () => { const next = waiting.shift(); if (next) next(); else free++; },
  };
}

// The epoch in milliseconds, to the microsecond (Date.now() has whole milliseconds only).
const { performance } = require("node:perf_hooks");
const nowMs = () => performance.timeOrigin + performance.now();
const inWindow = (counts, ms) => ms >= counts.windowStart && ms < counts.windowEnd;

function random(seed) { // mulberry32, as hearts.js
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

async function paced(argv, playGame) {
  const { tables, firstSeed, moveInterval, windowStart, windowEnd, stop } = options(argv);
  const counts = { moves: 0, errors: 0, runMoves: 0, viewMs: [], settingUp: gate(SETTING_UP),
    windowStart: Infinity, windowEnd: Infinity, stop: Infinity };
  const told = (start, end, stopAt) => Object.assign(counts,
    { windowStart: start * 1000, windowEnd: end * 1000, stop: stopAt * 1000 });
  if (windowStart) {
    told(windowStart, windowEnd, stop);
  } else { // bench/peers.py tells the window once every player is connected: "start end stop"
    let heard = "";
    process.stdin.setEncoding("utf8");
    process.stdin.on("data", (chunk) => {
      heard += chunk;
      if (heard.includes("\n")) told(...heard.split("\n")[0].trim().split(/\s+/).map(Number));
    });
    process.stdin.on("end", () => { if (counts.stop === Infinity) process.exit(1); });
  }
  const stopped = () => Date.now() >= counts.stop;
  const next = random(firstSeed);
  const slot = async (table, offset) => {
    await new Promise((resolve) => setTimeout(resolve, offset));
    for (let game = 0; !stopped(); game++) {
      const pace = new Pace(moveInterval * 1000, counts);
      try {
        await playGame(firstSeed + table * 100000 + game, () => { counts.runMoves++; }, stopped, pace);
      } catch (error) {
        counts.errors++; // the table stops, as flat out
        if (counts.errors <= 3) console.error(error);
        return;
      } finally {
        pace.stop();
      }
    }
  };
  await Promise.all([...Array(tables).keys()].map((table) => slot(table, next() * moveInterval * 1000)));
  process.stdout.write(`${JSON.stringify({ moves: counts.moves, errors: counts.errors,
    view_ms: counts.viewMs, run_moves: counts.runMoves })}\n`, () => process.exit(0));
}

module.exports = { options, swarm };
