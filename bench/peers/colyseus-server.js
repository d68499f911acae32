// Colyseus 0.17 serving Hearts: one room per table, its state a schema whose hands are seen
// only by their seat (a StateView), with immediate patches: no patch interval
// (patchRate = null), a patch broadcast after every accepted move.
"use strict";
const { Room, Server } = require("@colyseus/core");
const { WebSocketTransport } = require("@colyseus/ws-transport");
const { ArraySchema, schema, StateView } = require("@colyseus/schema");
const hearts = require("./hearts.js");

const Seat = schema({ hand: { type: ["uint8"], view: true }, passed: "boolean", cards: "uint8" });
const Table = schema({ seats: [Seat], phase: "string", handNumber: "uint8", trickNumber: "uint8",
  turn: "int8", trick: ["uint8"], heartsBroken: "boolean", scores: ["int16"] });

function copy(array, values) { // change only what changed, so a patch carries only that
  values.forEach((value, i) => { if (array[i] !== value) array[i] = value; });
  while (array.length > values.length) array.pop();
}

function show(state, game) {
  game.hands.forEach((hand, seat) => {
    const shown = state.seats[seat];
    copy(shown.hand, hand);
    shown.passed = game.phase === "passing" && game.passes[seat] !== null;
    shown.cards = hand.length;
  });
  Object.assign(state, { phase: game.phase, handNumber: game.handNumber,
    trickNumber: game.trickNumber, turn: game.turn, heartsBroken: game.heartsBroken });
  copy(state.trick, game.trick);
  copy(state.scores, game.scores);
}

class HeartsRoom extends Room {
  maxClients = 4;
  patchRate = null;

  onCreate(options) {
    this.game = hearts.newGame(options.seed);
    this.state = new Table();
    for (let seat = 0; seat < 4; seat++) this.state.seats.push(new Seat({ hand: new ArraySchema() }));
    show(this.state, this.game);
    this.joined = 0;
    this.onMessage("pass", (client, cards) => this.act(client, (seat) => hearts.pass(this.game, seat, cards)));
    this.onMessage("play", (client, card) => this.act(client, (seat) => hearts.play(this.game, seat, card)));
  }

  onJoin(client) {
    client.userData = { seat: this.joined++ };
    client.view = new StateView();
    client.view.add(this.state.seats[client.userData.seat]);
  }

  act(client, move) {
    const refused = move(client.userData.seat);
    if (refused !== null) {
      client.send("refused", refused);
      return;
    }
    show(this.state, this.game);
    this.broadcastPatch();
  }
}

if (require.main === module) {
  const port = Number(process.argv[2]);
  const server = new Server({ transport: new WebSocketTransport(), greet: false });
  server.define("hearts", HeartsRoom);
  // A port taken since it was chosen can leave the server up but not listening: end instead.
  const giveUp = setTimeout(() => process.exit(1), 10000);
  server.listen(port, "127.0.0.1").then(() => {
    clearTimeout(giveUp);
    console.log(`listening on ${port}`);
  }, () => process.exit(1));
}
