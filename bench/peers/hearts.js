// The rules of Copas's default table (preset "online"), for the peers' servers: 4 players,
// a seeded deal of 13 each, pass 3 left/right/across/hold, the 2C leads, follow suit, no
// points on the first trick, hearts broken, 26 points a hand or the moon (the others +26),
// 4 hands or 100 points. A card is suit * 13 + rank: suits C D S H, ranks 2..A (2C = 0).
"use strict";

const QUEEN_OF_SPADES = 2 * 13 + 10;
const PASS_OFFSETS = [1, 3, 2, 0]; // left, right, across, hold: the seat a pass goes to
const suit = (card) => Math.floor(card / 13);
const points = (card) => (suit(card) === 3 ? 1 : card === QUEEN_OF_SPADES ? 13 : 0);

function random(seed) { // mulberry32: a small seeded generator
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function newGame(seed) {
  const game = { seed, handNumber: 0, scores: [0, 0, 0, 0], phase: "", hands: [], passes: [],
    turn: -1, trick: [], leader: -1, trickNumber: 0, heartsBroken: false, taken: [] };
  deal(game);
  return game;
}

function deal(game) {
  const next = random(game.seed * 7919 + game.handNumber);
  const deck = [...Array(52).keys()];
  for (let i = deck.length - 1; i > 0; i--) {
    const j = Math.floor(next() * (i + 1));
    [deck[i], deck[j]] = [deck[j], deck[i]];
  }
  game.hands = [0, 1, 2, 3].map((seat) => deck.slice(seat * 13, seat * 13 + 13).sort((a, b) => a - b));
  game.passes = [null, null, null, null];
  game.phase = "passing";
  if (PASS_OFFSETS[game.handNumber % 4] === 0) startPlay(game);
}

function startPlay(game) {
  game.phase = "playing";
  game.turn = game.leader = game.hands.findIndex((hand) => hand.includes(0));
  game.trick = [];
  game.trickNumber = 0;
  game.heartsBroken = false;
  game.taken = [0, 0, 0, 0];
}

function legalCards(game, seat) {
  const hand = game.hands[seat];
  if (game.trick.length === 0) {
    if (game.trickNumber === 0) return [0];
    const notHearts = hand.filter((card) => suit(card) !== 3);
    return game.heartsBroken || notHearts.length === 0 ? hand : notHearts;
  }
  const following = hand.filter((card) => suit(card) === suit(game.trick[0]));
  if (following.length > 0) return following;
  const clean = hand.filter((card) => points(card) === 0);
  return game.trickNumber === 0 && clean.length > 0 ? clean : hand;
}

// pass() and play() change the game and return null, or return why the move is refused.
function pass(game, seat, cards) {
  if (game.phase !== "passing") return "not passing";
  if (game.passes[seat] !== null) return "already passed";
  if (!Array.isArray(cards) || cards.length !== 3 || new Set(cards).size !== 3 ||
      !cards.every((card) => game.hands[seat].includes(card))) return "not 3 cards of the hand";
  game.passes[seat] = [...cards];
  if (game.passes.some((chosen) => chosen === null)) return null;
  const offset = PASS_OFFSETS[game.handNumber % 4];
  const kept = game.hands.map((hand, from) => hand.filter((card) => !game.passes[from].includes(card)));
  game.passes.forEach((chosen, from) => kept[(from + offset) % 4].push(...chosen));
  game.hands = kept.map((hand) => hand.sort((a, b) => a - b));
  startPlay(game);
  return null;
}

function play(game, seat, card) {
  if (game.phase !== "playing") return "not playing";
  if (game.turn !== seat) return "not your turn";
  if (!legalCards(game, seat).includes(card)) return "not a legal card";
  game.hands[seat].splice(game.hands[seat].indexOf(card), 1);
  game.trick.push(card);
  if (suit(card) === 3) game.heartsBroken = true;
  if (game.trick.length < 4) {
    game.turn = (game.turn + 1) % 4;
    return null;
  }
  const led = suit(game.trick[0]);
  let best = 0;
  game.trick.forEach((played, i) => {
    if (suit(played) === led && played > game.trick[best]) best = i;
  });
  const winner = (game.leader + best) % 4;
  game.taken[winner] += game.trick.reduce((sum, played) => sum + points(played), 0);
  game.trick = [];
  game.turn = game.leader = winner;
  game.trickNumber += 1;
  if (game.trickNumber === 13) endHand(game);
  return null;
}

function endHand(game) {
  const shooter = game.taken.indexOf(26);
  game.scores = game.scores.map((score, seat) =>
    score + (shooter < 0 ? game.taken[seat] : seat === shooter ? 0 : 26));
  game.handNumber += 1;
  if (game.handNumber >= 4 || Math.max(...game.scores) >= 100) {
    game.phase = "over";
    game.turn = -1;
  } else {
    deal(game);
  }
}

module.exports = { newGame, legalCards, pass, play };
