/**
 * The person's token budget of today, in the composer: "12,300 of 50,000 tokens left today".
 *
 * The server sends a `budget` frame on connect when a budget applies (docs/protocol.md);
 * each live model call's usage then takes its tokens off here, so the count follows the
 * answer without asking the server. An `error` `budget_exceeded` (a message refused) or a
 * `run_failed` with `status: "budget_exceeded"` (an answer stopped) says the budget is used
 * up and when it resets (`resets_at`, shown in local time). With no `budget` frame the
 * meter stays hidden. Calls of other tabs are counted at the next connect.
 */
import { normaliseUsage } from "./usage.js";

const locale = document.documentElement.lang || "en";
const number = new Intl.NumberFormat(locale);
const clock = new Intl.DateTimeFormat(locale, { timeStyle: "short" });
const full = new Intl.DateTimeFormat(locale, { dateStyle: "full", timeStyle: "short" });

function count(value) {
  return Number.isFinite(value) && value >= 0 ? value : null;
}

/** "at 00:00" today or tomorrow, "on <date>" further away. */
function whenText(date) {
  const hours = (date.getTime() - Date.now()) / 3_600_000;
  return hours < 24 ? `at ${clock.format(date)}` : `on ${full.format(date)}`;
}

export class BudgetMeter {
  /** @param {HTMLElement} element where the meter is shown (hidden until a budget is known) */
  constructor(element) {
    this.el = element;
    this.limit = null;
    this.used = 0;
    this.resetsAt = null;
  }

  /** A `budget` frame: the server's numbers replace this page's. */
  received(frame) {
    this.limit = count(frame.limit);
    this.used = count(frame.used) ?? 0;
    this.resetsAt = typeof frame.resets_at === "string" ? new Date(frame.resets_at) : null;
    this.render();
  }

  /** One live model call's usage. */
  spent(usage) {
    const total = normaliseUsage(usage)?.total_tokens ?? 0;
    if (this.limit !== null && total > 0) {
      this.used += total;
      this.render();
    }
  }

  /** A refusal or a stopped run: the budget is used up (until `resets_at`). */
  exceeded(frame) {
    this.limit = count(frame.limit) ?? this.limit;
    this.used = Math.max(count(frame.used) ?? 0, this.used, this.limit ?? 0);
    if (typeof frame.resets_at === "string") {
      this.resetsAt = new Date(frame.resets_at);
    }
    this.render();
  }

  /** What a refusal notice says. */
  refusalText() {
    const when = this.resetsText();
    return `You have used your token budget for today.${when ? ` It resets ${when}.` : ""}`;
  }

  /** "at 00:00" (or "on <date>"), or "" when the reset time is not known. */
  resetsText() {
    return this.resetsAt && !Number.isNaN(this.resetsAt.getTime()) ? whenText(this.resetsAt) : "";
  }

  render() {
    if (this.limit === null) {
      this.el.hidden = true;
      return;
    }
    const remaining = Math.max(this.limit - this.used, 0);
    const resets = this.resetsText();
    this.el.hidden = false;
    this.el.dataset.state = remaining > 0 ? "ok" : "exceeded";
    this.el.textContent =
      remaining > 0
        ? `${number.format(remaining)} of ${number.format(this.limit)} tokens left today`
        : `No tokens left today${resets ? `; resets ${resets}` : ""}`;
    this.el.title = `Used ${number.format(this.used)} of ${number.format(this.limit)} tokens today${
      resets ? `; the budget resets ${resets}` : ""
    }`;
  }
}
