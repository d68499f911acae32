// The table's sounds: a short tone when a turn becomes yours, and short cues for a card
// played, a trick taken, hearts broken and the Q♠. Off until the person turns them on; the
// choice is remembered in localStorage (no card, no name: one word).

import { $ } from "./dom.js";
import { t } from "./i18n.js";

const SOUND_KEY = "copas.sound";
let audio: AudioContext | undefined;
let wasYourTurn = false;

export function isSoundOn(): boolean {
  return localStorage.getItem(SOUND_KEY) === "on";
}

function showSound(): void {
  const button = $("sound");
  const isOn = isSoundOn();
  button.setAttribute("aria-pressed", String(isOn));
  button.textContent = t(isOn ? "sound.on" : "sound.off");
}

/** The button that turns the sound on or off (a tone says it is on). */
export function startSound(): void {
  $("sound").addEventListener("click", () => {
    localStorage.setItem(SOUND_KEY, isSoundOn() ? "off" : "on");
    showSound();
    if (isSoundOn()) beep();
  });
  showSound();
}

/** Called on each drawing: a tone when the turn has just become yours. */
export function onTurn(isYourTurn: boolean): void {
  if (isYourTurn && !wasYourTurn && isSoundOn()) beep();
  wasYourTurn = isYourTurn;
}

function beep(): void {
  const game = $("game");
  game.dataset.beeps = String(Number(game.dataset.beeps ?? "0") + 1); // what was played, for tests
  tones([[660, 0, 0.25]], 0.12);
}

/** Notes as [frequency, start, length] in seconds from now. */
function tones(notes: [number, number, number][], loudness: number, wave: OscillatorType = "sine"): void {
  try {
    audio ??= new AudioContext();
    for (const [frequency, start, length] of notes) {
      const tone = audio.createOscillator();
      const volume = audio.createGain();
      const at = audio.currentTime + start;
      tone.type = wave;
      tone.frequency.value = frequency;
      volume.gain.setValueAtTime(loudness, at);
      volume.gain.exponentialRampToValueAtTime(0.0001, at + length);
      tone.connect(volume).connect(audio.destination);
      tone.start(at);
      tone.stop(at + length);
    }
  } catch {
    // No audio on this device: the table still shows it.
  }
}

const CUES: Record<Cue, () => void> = {
  card: () => tones([[1200, 0, 0.05]], 0.05, "triangle"), // a tap
  trick: () => tones([[520, 0, 0.09], [390, 0.08, 0.12]], 0.06, "triangle"), // a sweep
  hearts: () => tones([[880, 0, 0.12], [1175, 0.1, 0.2]], 0.08), // two bright notes
  queen: () => tones([[196, 0, 0.45], [185, 0.05, 0.45]], 0.12, "sawtooth"), // a low buzz
};

export type Cue = "card" | "trick" | "hearts" | "queen";

/** A cue of the table, when the sound is on (the kinds heard are listed on #game for the tests). */
export function cue(kind: Cue): void {
  if (!isSoundOn()) return;
  const game = $("game");
  const heard = new Set((game.dataset.cues ?? "").split(" ").filter(Boolean)).add(kind);
  game.dataset.cues = [...heard].sort().join(" ");
  CUES[kind]();
}
