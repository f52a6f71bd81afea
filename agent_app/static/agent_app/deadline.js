/**
 * Deadlines on questions and approvals: the payload's `expires_at` (ISO 8601, UTC) shown as
 * a countdown ("Answer within 4:59") that runs out into "expired".
 *
 * One timer for all countdowns on the page, ticking once a second while at least one runs.
 * The text is not a live region: a screen reader would otherwise read a number every
 * second. The exact deadline is the element's tooltip and `datetime`.
 */
import { parseTime } from "./time.js";

const TICK_MS = 1000;
const exact = new Intl.DateTimeFormat(document.documentElement.lang || "en", {
  dateStyle: "medium",
  timeStyle: "medium",
});

/** "4:59", "1:02:03"; whole seconds, rounded up, never below zero. */
export function remainingText(milliseconds) {
  const total = Math.max(0, Math.ceil(milliseconds / 1000));
  const hours = Math.floor(total / 3600);
  const minutes = Math.floor((total % 3600) / 60);
  const seconds = String(total % 60).padStart(2, "0");
  return hours > 0 ? `${hours}:${String(minutes).padStart(2, "0")}:${seconds}` : `${minutes}:${seconds}`;
}

export class Countdowns {
  constructor() {
    /** @type {Set<{deadline: Date, time: HTMLTimeElement, onExpire: () => void}>} */
    this.running = new Set();
    this.timer = null;
  }

  /**
   * A countdown to `expiresAt`: `{element, stop}`, or null when it is missing or not a
   * date. Calls `onExpire` once, when the deadline passes before `stop()` (at once, in a
   * microtask, when it has passed already).
   */
  start(expiresAt, onExpire) {
    const deadline = parseTime(expiresAt);
    if (deadline === null) {
      return null;
    }
    const line = document.createElement("p");
    line.className = "widget__deadline";
    const time = document.createElement("time");
    time.dateTime = deadline.toISOString();
    time.title = `Open until ${exact.format(deadline)}`;
    line.append("Answer within ", time);
    const entry = { deadline, time, onExpire };
    const stop = () => this.running.delete(entry);
    if (!this.update(entry)) {
      queueMicrotask(onExpire);
      return { element: line, stop };
    }
    this.running.add(entry);
    this.timer ??= setInterval(() => this.tick(), TICK_MS);
    return { element: line, stop };
  }

  /** Rewrite one countdown; false once its deadline has passed. */
  update(entry) {
    const left = entry.deadline.getTime() - Date.now();
    entry.time.textContent = remainingText(left);
    return left > 0;
  }

  tick() {
    for (const entry of [...this.running]) {
      if (!this.update(entry)) {
        this.running.delete(entry);
        entry.onExpire();
      }
    }
    if (this.running.size === 0) {
      clearInterval(this.timer);
      this.timer = null;
    }
  }
}
