/**
 * The page's WebSocket to one chat session: JSON frames in and out, automatic reconnect.
 *
 * The URL is asked for at every attempt (`url()`), so a reconnect can say which `seq` the
 * page saw last (`?after_seq=`) and the server replays only what it missed.
 *
 * How waiting works: `start()` opens a socket. The server greets every connection with a
 * `session` frame, so the link counts as up only when that frame arrives, and only then is
 * the backoff reset; a server that accepts and drops at once therefore does not get hammered.
 * Every close schedules the next attempt after min(BASE * 2^attempt, MAX) ms with ±20 %
 * jitter. `retryNow()` and the browser's `online` event skip the wait. A close code in
 * 4000–4999 is the application deliberately refusing this chat: retrying cannot help, so the
 * connection stops and reports it instead — except `FELL_BEHIND` (4408): the server dropped
 * a socket that left too much unread (a tab in the background), and reconnecting at once
 * resumes it with `after_seq`, missing nothing.
 */

const BASE_DELAY_MS = 500;
const MAX_DELAY_MS = 15_000;
/** The server dropped this socket for reading too slowly: reconnect and resume. */
export const FELL_BEHIND_CLOSE_CODE = 4408;

/** Status values passed to `onStatus`. */
export const LinkState = Object.freeze({
  CONNECTING: "connecting",
  OPEN: "open",
  WAITING: "waiting",
  REFUSED: "refused",
});

export class ChatConnection {
  /**
   * @param {() => string} url The ws:// or wss:// URL of the session socket, for the next attempt.
   * @param {{onFrame: (frame: object) => void, onStatus: (status: object) => void}} handlers
   */
  constructor(url, { onFrame, onStatus }) {
    this.url = url;
    this.onFrame = onFrame;
    this.onStatus = onStatus;
    this.socket = null;
    this.attempt = 0;
    this.retryTimer = null;
    this.greeted = false;
    this.stopped = false;
    window.addEventListener("online", () => this.retryNow());
  }

  get isOpen() {
    return this.greeted && this.socket?.readyState === WebSocket.OPEN;
  }

  start() {
    clearTimeout(this.retryTimer);
    this.retryTimer = null;
    this.greeted = false;
    this.onStatus({ state: LinkState.CONNECTING });
    const socket = new WebSocket(this.url());
    this.socket = socket;
    socket.addEventListener("message", (message) => this.receive(socket, message));
    socket.addEventListener("close", (close) => this.closed(socket, close));
  }

  /** Send one frame; false when the link is down (the caller keeps what the user typed). */
  send(frame) {
    if (!this.isOpen) {
      return false;
    }
    this.socket.send(JSON.stringify(frame));
    return true;
  }

  /** Skip the backoff wait, e.g. when the user presses "Retry now". */
  retryNow() {
    if (this.retryTimer !== null && !this.stopped) {
      this.start();
    }
  }

  receive(socket, message) {
    if (socket !== this.socket) {
      return;
    }
    let frame;
    try {
      frame = JSON.parse(message.data);
    } catch {
      console.warn("Ignoring a frame that is not JSON", message.data);
      return;
    }
    if (frame === null || typeof frame !== "object" || typeof frame.type !== "string") {
      console.warn("Ignoring a frame without a type", frame);
      return;
    }
    if (frame.type === "session" && !this.greeted) {
      this.greeted = true;
      this.attempt = 0;
      this.onStatus({ state: LinkState.OPEN });
    }
    this.onFrame(frame);
  }

  closed(socket, close) {
    if (socket !== this.socket) {
      return;
    }
    this.socket = null;
    this.greeted = false;
    if (close.code === FELL_BEHIND_CLOSE_CODE && this.attempt === 0) {
      this.attempt += 1; // at once, this first time; a socket that keeps falling behind backs off
      this.retryTimer = setTimeout(() => this.start(), 0);
      this.onStatus({ state: LinkState.WAITING, delayMs: 0, code: close.code });
      return;
    }
    if (close.code >= 4000 && close.code <= 4999 && close.code !== FELL_BEHIND_CLOSE_CODE) {
      this.stopped = true;
      this.onStatus({ state: LinkState.REFUSED, code: close.code, reason: close.reason });
      return;
    }
    const ceiling = Math.min(BASE_DELAY_MS * 2 ** this.attempt, MAX_DELAY_MS);
    const delayMs = Math.round(ceiling * (0.8 + Math.random() * 0.4));
    this.attempt += 1;
    this.retryTimer = setTimeout(() => this.start(), delayMs);
    this.onStatus({ state: LinkState.WAITING, delayMs, code: close.code });
  }
}

/**
 * The socket URL for a server path, on the page's own host and matching its scheme; with
 * `afterSeq`, asking the server to replay the active run's frames after it.
 */
export function socketUrl(path, afterSeq = null) {
  const scheme = window.location.protocol === "https:" ? "wss:" : "ws:";
  const query = afterSeq === null ? "" : `?after_seq=${encodeURIComponent(afterSeq)}`;
  return `${scheme}//${window.location.host}${path}${query}`;
}
