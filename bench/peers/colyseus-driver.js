// Four Colyseus clients per table over WebSocket, each playing its first legal card (or
// passing its first 3 cards) the moment a patch says it may (or, at a human pace, once it
// has waited the interval: see swarm.js).
"use strict";
const { Client } = require("@colyseus/sdk");
const hearts = require("./hearts.js");
const { options, swarm } = require("./swarm.js");

const { port } = options(process.argv.slice(2));
const client = new Client(`ws://127.0.0.1:${port}`);

// The rules' view of a seat's state: enough for hearts.legalCards.
const asGame = (state, seat) => ({ hands: { [seat]: [...state.seats[seat].hand] },
  trick: [...state.trick], trickNumber: state.trickNumber, heartsBroken: state.heartsBroken });

// A card's place in the game (see swarm.js's Pace).
const progress = (state) => state.handNumber * 64 +
  (state.phase === "playing" ? state.trickNumber * 4 + state.trick.length : 0);

async function playGame(seed, played, stopped, pace) {
  if (pace) await pace.enter();
  const first = await client.create("hearts", { seed });
  const rooms = [first, ...(await Promise.all([1, 2, 3].map(() => client.joinById(first.roomId))))];
  await new Promise((resolve) => {
    const check = setInterval(() => { if (stopped()) { clearInterval(check); resolve(); } }, 100);
    rooms.forEach((room, seat) => {
      const acted = new Set();
      room.onMessage("refused", (reason) => { throw new Error(`refused: ${reason}`); });
      const consider = (state) => {
        if (state.phase === "over") { clearInterval(check); resolve(); return; }
        const hand = state.seats[seat] && state.seats[seat].hand;
        if (!hand || hand.length === 0) return; // the view has not shown our hand yet
        if (pace) {
          pace.seated(seat);
          pace.viewed(seat, progress(state));
        }
        const key = `${state.handNumber}/${state.phase}/${state.trickNumber}/${state.trick.length}`;
        if (acted.has(key)) return;
        const later = () => consider(room.state);
        if (state.phase === "passing" && !state.seats[seat].passed) {
          if (pace && !pace.ready(seat, key, later)) return;
          acted.add(key);
          room.send("pass", [...hand].slice(0, 3));
        } else if (state.phase === "playing" && state.turn === seat) {
          if (pace && !pace.ready(seat, key, later)) return;
          acted.add(key);
          played(); // sent is accepted: the card is legal and it is our turn
          if (pace) pace.sent(seat, progress(state));
          room.send("play", hearts.legalCards(asGame(state, seat), seat)[0]);
        }
      };
      room.onStateChange(consider);
    });
  });
  await Promise.all(rooms.map((room) => room.leave()));
}

swarm(process.argv.slice(2), playGame);
