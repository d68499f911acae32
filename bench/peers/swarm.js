// What both drivers share: keep T tables busy for D seconds (a finished game is replaced by a
// new one at that table), then print one JSON line: cards played, moves/s, errors.
"use strict";

function options(argv) {
  const named = {};
  for (let i = 0; i < argv.length; i += 2) named[argv[i].replace(/^--/, "")] = argv[i + 1];
  return { port: Number(named.port), tables: Number(named.tables || 20),
    duration: Number(named.duration || 15), firstSeed: Number(named["first-seed"] || 1) };
}

// playGame(seed, played, stopped) plays one game with its four connections and resolves when
// it is over or stopped() is true; played() counts a card the server accepted.
async function swarm(argv, playGame) {
  const { tables, duration, firstSeed } = options(argv);
  const start = process.hrtime.bigint();
  const elapsed = () => Number(process.hrtime.bigint() - start) / 1e9;
  const stopped = () => elapsed() >= duration;
  let moves = 0;
  let games = 0;
  let errors = 0;
  const slot = async (table) => {
    for (let game = 0; !stopped(); game++) {
      try {
        await playGame(firstSeed + table * 100000 + game, () => { if (!stopped()) moves++; }, stopped);
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
  console.log(JSON.stringify({ moves, games, errors, duration_s: seconds,
    moves_per_s: Math.round((moves / seconds) * 10) / 10 }));
  process.exit(0);
}

module.exports = { options, swarm };
