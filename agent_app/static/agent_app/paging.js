/**
 * Older history, a page at a time: the `session` frame brings the newest messages and says
 * whether older ones exist (`has_more_history`); `history_before` asks for the messages
 * before the oldest one shown, and the `history_page` answer goes on top.
 *
 * A page is asked for when the top of the conversation scrolls into view, or when the
 * "Show earlier messages" button at the top is pressed (so the keyboard can get there
 * too). The part of the conversation the user is reading stays where it is on the screen
 * while a page is inserted above it.
 */
import { element } from "./blocks.js";
import { renderHistory } from "./history.js";

const PAGE_SIZE = 50;
/** Ask for the next page when the top is this close to the visible part. */
const NEAR_TOP_PX = 200;

export class HistoryPaging {
  /**
   * @param {import("./transcript.js").Transcript} transcript
   * @param {(frame: object) => boolean} send Sends a frame; false when the link is down.
   * @param {{onUsage?: (usage: object) => void}} hooks `onUsage` gets the usage of a page.
   */
  constructor(transcript, send, { onUsage = () => {} } = {}) {
    this.transcript = transcript;
    this.send = send;
    this.onUsage = onUsage;
    this.hasMore = false;
    this.loading = false;
    this.oldest = null;
    this.button = element("button", "button button--quiet button--small transcript__earlier", "Show earlier messages");
    this.button.type = "button";
    this.button.hidden = true;
    this.button.addEventListener("click", () => this.load());
    transcript.head.append(this.button);
    const root = transcript.root;
    this.observer = new IntersectionObserver(
      (entries) => {
        if (entries.some((entry) => entry.isIntersecting)) {
          this.load();
        }
      },
      { root, rootMargin: `${NEAR_TOP_PX}px 0px 0px 0px` },
    );
    this.observer.observe(transcript.head);
  }

  /** The newest page was just shown: `hasMore` older messages exist before `items`. */
  reset(hasMore, items) {
    this.loading = false;
    this.oldest = oldestPosition(items, null);
    this.setHasMore(hasMore && this.oldest !== null);
  }

  setHasMore(hasMore) {
    this.hasMore = hasMore;
    this.button.hidden = !hasMore;
    this.button.disabled = false;
    this.button.textContent = "Show earlier messages";
  }

  /** The link dropped: a page asked for on it will not come; it can be asked for again. */
  linkDropped() {
    if (this.loading) {
      this.loading = false;
      this.setHasMore(this.hasMore);
    }
  }

  /** The server refused the page (`rate_limited`: pages cost more of the frame budget). */
  refused() {
    this.linkDropped(); // the same: it will not come, and can be asked for again
  }

  /** Ask for the page before the oldest message shown. */
  load() {
    if (!this.hasMore || this.loading) {
      return;
    }
    if (!this.send({ type: "history_before", position: this.oldest, limit: PAGE_SIZE })) {
      return;
    }
    this.loading = true;
    this.button.disabled = true;
    this.button.textContent = "Loading earlier messages…";
  }

  /** A `history_page` arrived: put it on top, keeping the reader's place. */
  received(frame, runs) {
    if (!this.loading) {
      return;
    }
    this.loading = false;
    const messages = Array.isArray(frame.messages) ? frame.messages : [];
    const transcript = this.transcript;
    const root = transcript.root;
    const first = transcript.items[0] ?? null;
    const continues = first !== null && !(first.matches(".msg--user") && !first.matches(".msg--steer"));
    const page = document.createDocumentFragment();
    const { usage, lastTurn } = renderHistory(transcript, messages, runs, { sink: page, continues });
    const anchor = first?.getBoundingClientRect().top ?? 0;
    transcript.head.after(page);
    if (continues && lastTurn !== null) {
      transcript.joinTurns(lastTurn, transcript.turnOfElement.get(first));
    }
    transcript.removeRetryButtons({ keepLast: true });
    this.oldest = oldestPosition(messages, this.oldest);
    this.setHasMore(Boolean(frame.has_more) && messages.length > 0);
    if (first !== null) {
      root.scrollTop += first.getBoundingClientRect().top - anchor;
    }
    this.onUsage(usage);
    if (this.hasMore && root.scrollTop <= NEAR_TOP_PX) {
      this.load();
    }
  }
}

function oldestPosition(items, current) {
  let oldest = current;
  for (const item of items ?? []) {
    if (Number.isInteger(item.position) && (oldest === null || item.position < oldest)) {
      oldest = item.position;
    }
  }
  return oldest;
}
