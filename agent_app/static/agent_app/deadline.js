/**
 * Deadlines on questions and approvals: the payload's `expires_at` (ISO 8601, UTC) shown as
 * "Answer within an hour" (whole minutes while more than `TICKING_FROM_MS` are left), then
 * as a countdown ("Answer within 4:59") that runs out into "expired".
 *
 * One timer for all countdowns on the page, ticking once a second while at least one runs;
 * a text is only rewritten when it changes, so far deadlines change once a minute. The
 * text is not a live region: a screen reader would otherwise read a number every second.
 * The exact deadline is the element's tooltip and `datetime`.
 */
import { parseTime } from "./time.js";

const TICK_MS = 1000;
const exact = new Intl.DateTimeFormat(document.documentElement.lang || "en", {
  dateStyle: "medium",
  timeStyle: "medium",
});

/** The last minutes count down by the second; before them, whole minutes do. */
const TICKING_FROM_MS = 5 * 60 * 1000;

function count(number, one, many) {
  return number === 1 ? one : `${number} ${many}`;
}

/**
 * "an hour", "2 hours and 5 minutes", "12 minutes" (whole minutes, rounded up) while more
 * than the last minutes are left; then "4:59" (whole seconds, rounded up, never below 0).
 */
export function remainingText(milliseconds) {
  if (milliseconds > TICKING_FROM_MS) {
    const minutes = Math.ceil(milliseconds / 60_000);
    const hours = Math.floor(minutes / 60);
    const rest = minutes % 60;
    const restText = count(rest, "a minute", "minutes");
    if (hours === 0) {
      return restText;
    }
    const hoursText = count(hours, "an hour", "hours");
    return rest === 0 ? hoursText : `${hoursText} and ${restText}`;
  }
  const total = Math.max(0, Math.ceil(milliseconds / 1000));
  return `${Math.floor(total / 60)}:${String(total % 60).padStart(2, "0")}`;
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
    const text = remainingText(left);
    if (entry.time.textContent !== text) {
      entry.time.textContent = text;
    }
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
