// Four boardgame.io clients per table over socket.io, each playing its first legal card (or
// passing its first 3 cards) the moment the state says it may (or, at a human pace, once it
// has waited the interval: see swarm.js).
"use strict";
const { Client } = require("boardgame.io/client");
const { SocketIO } = require("boardgame.io/multiplayer");
const hearts = require("./hearts.js");
const { Hearts } = require("./boardgameio-server.js");
const { options, swarm } = require("./swarm.js");

const { port } = options(process.argv.slice(2));
const lobby = `http://127.0.0.1:${port}/games/hearts`;

async function post(path, body) {
  const answer = await fetch(`${lobby}${path}`, { method: "POST", body: JSON.stringify(body),
    headers: { "Content-Type": "application/json" } });
  if (!answer.ok) throw new Error(`${path}: ${answer.status}`);
  return answer.json();
}

// A card's place in the game (see swarm.js's Pace): a new hand's pass follows every card of
// the hands before it.
const progress = (G) => G.handNumber * 64 +
  (G.phase === "playing" ? G.trickNumber * 4 + G.trick.length : 0);

async function playGame(seed, played, stopped, pace) {
  if (pace) await pace.enter();
  const { matchID } = await post("/create", { numPlayers: 4, setupData: { seed } });
  const seats = [0, 1, 2, 3];
  const credentials = await Promise.all(seats.map((seat) =>
    post(`/${matchID}/join`, { playerID: String(seat), playerName: `p${seat}` })));
  const clients = seats.map((seat) => Client({ game: Hearts, matchID, playerID: String(seat),
    credentials: credentials[seat].playerCredentials, debug: false,
    multiplayer: SocketIO({ server: `http://127.0.0.1:${port}` }) }));
  await new Promise((resolve) => {
    const check = setInterval(() => { if (stopped()) resolve(); }, 100);
    clients.forEach((client, seat) => {
      const acted = new Set();
      const consider = (state) => {
        if (state === null) return;
        const G = state.G;
        if (state.ctx.gameover) { clearInterval(check); resolve(); return; }
        if (pace) {
          pace.seated(seat);
          pace.viewed(seat, progress(G));
        }
        const later = () => consider(client.getState());
        // A move names the state it was made on; one made on a state that another seat's pass
        // has since replaced is dropped, so a seat passes again on each new state until its
        // pass shows.
        const key = state._stateID;
        if (G.phase === "passing" && G.passes[seat] === null && !acted.has(key)) {
          if (pace && !pace.ready(seat, `pass/${G.handNumber}`, later)) return;
          acted.add(key);
          client.moves.pass(G.hands[seat].slice(0, 3));
        } else if (G.phase === "playing" && G.turn === seat && !acted.has(key)) {
          if (pace && !pace.ready(seat, `play/${progress(G)}`, later)) return;
          acted.add(key);
          played(); // sent is accepted: the card is legal and it is our turn
          if (pace) pace.sent(seat, progress(G));
          client.moves.play(hearts.legalCards(G, seat)[0]);
        }
      };
      client.subscribe(consider);
      client.start();
    });
  });
  clients.forEach((client) => client.stop());
}

swarm(process.argv.slice(2), playGame);
