/**
 * The Stop button, and a Stop pressed while the link is down. A `cancel` cannot be sent
 * then, but the person meant it: the press is kept (the button says it will stop once the
 * link is back) and, when the reconnect has caught up, sent if the answer is still running
 * (one that ended meanwhile needs no Stop). Pressing Stop again while it waits takes the
 * press back.
 */
const WAITING_TEXT = "Stop on reconnect (press to undo)";
const WAITING_NOTICE = "Not connected: the answer stops as soon as the link is back.";

export class StopButton {
  /**
   * @param {HTMLButtonElement} button
   * @param {{send: (frame: object) => boolean, isOpen: () => boolean, notices: object, text: string}} options
   */
  constructor(button, { send, isOpen, notices, text }) {
    this.button = button;
    this.send = send;
    this.isOpen = isOpen;
    this.notices = notices;
    this.text = text;
    /** Whether a Stop waits for the link to come back. */
    this.pending = false;
  }

  /** Stop pressed (or Escape): send `cancel`, or keep it for the reconnect. */
  press() {
    if (this.pending) {
      this.clear();
      return;
    }
    if (this.isOpen()) {
      if (this.send({ type: "cancel" })) {
        this.stopping();
      }
      return;
    }
    this.pending = true;
    this.button.textContent = WAITING_TEXT;
    this.button.dataset.state = "pending";
    this.notices.show(WAITING_NOTICE, { tone: "info", key: "stop" });
  }

  /** The reconnect caught up: send the kept Stop if `running`, else forget it. */
  caughtUp(running) {
    if (!this.pending) {
      return;
    }
    this.clear();
    if (running && this.send({ type: "cancel" })) {
      this.stopping();
    }
  }

  /** The button back as it was (a new run, or the press taken back). */
  clear() {
    this.pending = false;
    delete this.button.dataset.state;
    this.button.disabled = false;
    this.button.textContent = this.text;
    this.notices.dismiss("stop");
  }

  stopping() {
    this.button.disabled = true;
    this.button.textContent = "Stopping…";
  }
}
