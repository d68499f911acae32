// The "your turn" sound: a short tone when a turn becomes yours. Off until the person turns
// it on; the choice is remembered in localStorage (no card, no name: one word).

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
  try {
    audio ??= new AudioContext();
    const tone = audio.createOscillator();
    const volume = audio.createGain();
    const now = audio.currentTime;
    tone.frequency.value = 660;
    volume.gain.setValueAtTime(0.12, now);
    volume.gain.exponentialRampToValueAtTime(0.0001, now + 0.25);
    tone.connect(volume).connect(audio.destination);
    tone.start(now);
    tone.stop(now + 0.25);
  } catch {
    // No audio on this device: the turn still shows.
  }
}
