// boardgame.io 0.50 serving Hearts: the game in memory (the default InMemory store), the
// socket.io transport, matches made over its lobby API.
"use strict";
const { ActivePlayers, INVALID_MOVE } = require("boardgame.io/core");
const { Server, Origins } = require("boardgame.io/server");
const hearts = require("./hearts.js");

// Every seat may act at any time (passing is simultaneous); the rules refuse a move out of turn.
const refusing = (result) => (result === null ? undefined : INVALID_MOVE);
const Hearts = {
  name: "hearts",
  setup: (_context, setupData) => hearts.newGame(setupData.seed),
  turn: { activePlayers: ActivePlayers.ALL },
  moves: {
    pass: { move: ({ G, playerID }, cards) => refusing(hearts.pass(G, Number(playerID), cards)),
      client: false },
    play: { move: ({ G, playerID }, card) => refusing(hearts.play(G, Number(playerID), card)),
      client: false },
  },
  endIf: ({ G }) => (G.phase === "over" ? { scores: G.scores } : undefined),
  // A seat sees its own hand and who has passed, never another's cards.
  playerView: ({ G, playerID }) => ({ ...G, seed: 0,
    hands: G.hands.map((hand, seat) => (String(seat) === playerID ? hand : hand.length)),
    passes: G.passes.map((chosen, seat) => (String(seat) === playerID ? chosen : chosen !== null)) }),
};

if (require.main === module) {
  const port = Number(process.argv[2]);
  const server = Server({ games: [Hearts], origins: [Origins.LOCALHOST] });
  server.run({ port, lobbyConfig: undefined }, () => console.log(`listening on ${port}`));
}

module.exports = { Hearts };
