/**
 * When each message was written: `<time datetime>` elements that read "just now",
 * "5 minutes ago", "yesterday", with the exact date and time as their tooltip (`title`).
 *
 * One timer for the whole page (`keepTimesFresh`) rewrites every such element every
 * REFRESH_MS and whenever the page becomes visible again, so "just now" does not stay
 * "just now" for an hour.
 */

const REFRESH_MS = 30_000;
const MINUTE = 60;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

const locale = document.documentElement.lang || "en";
const relative = new Intl.RelativeTimeFormat(locale, { numeric: "auto" });
const exact = new Intl.DateTimeFormat(locale, { dateStyle: "full", timeStyle: "medium" });
const sameYear = new Intl.DateTimeFormat(locale, { day: "numeric", month: "short" });
const otherYear = new Intl.DateTimeFormat(locale, { day: "numeric", month: "short", year: "numeric" });

/** A Date for an ISO 8601 string, or null when it is missing or not a date. */
export function parseTime(value) {
  if (typeof value !== "string" || !value) {
    return null;
  }
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? null : date;
}

/** "just now", "5 minutes ago", "3 hours ago", "yesterday", "4 days ago", "12 Mar". */
export function relativeText(date, now = new Date()) {
  const seconds = Math.round((now.getTime() - date.getTime()) / 1000);
  const age = Math.abs(seconds);
  const sign = seconds >= 0 ? -1 : 1;
  if (age < 45) {
    return "just now";
  }
  if (age < 45 * MINUTE) {
    return relative.format(sign * Math.max(1, Math.round(age / MINUTE)), "minute");
  }
  if (age < 22 * HOUR) {
    return relative.format(sign * Math.max(1, Math.round(age / HOUR)), "hour");
  }
  if (age < 6 * DAY) {
    return relative.format(sign * Math.max(1, Math.round(age / DAY)), "day");
  }
  return (date.getFullYear() === now.getFullYear() ? sameYear : otherYear).format(date);
}

/** A `<time>` for `date` that `keepTimesFresh` keeps up to date. */
export function timeElement(date, className) {
  const node = document.createElement("time");
  node.className = className;
  node.dateTime = date.toISOString();
  node.title = exact.format(date);
  node.dataset.relative = "";
  node.textContent = relativeText(date);
  return node;
}

function refreshTimes(root) {
  const now = new Date();
  for (const node of root.querySelectorAll("time[data-relative]")) {
    const text = relativeText(new Date(node.dateTime), now);
    if (node.textContent !== text) {
      node.textContent = text;
    }
  }
}

/** Rewrite the relative times under `root` every REFRESH_MS and when the page is shown. */
export function keepTimesFresh(root) {
  setInterval(() => refreshTimes(root), REFRESH_MS);
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "visible") {
      refreshTimes(root);
    }
  });
}
