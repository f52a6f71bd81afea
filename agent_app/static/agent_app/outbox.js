/**
 * What this page sent and the server has not taken yet, so nothing the user typed is lost.
 *
 * Each entry is a `message` (shown at once as a pending bubble, taken when its
 * `run_started` arrives), a `steer` (taken by its `external_event_result`), or a `replace`
 * (`regenerate` / `edit`, taken by the `run_started` of its run). When the server
 * refuses one (`busy`, `rate_limited`, `too_large`, `not_running`, `bad_frame`), or a
 * dropped link lost it, it is given back: a message's bubble goes and its text returns to
 * the composer, as does a steer's; an edit returns to its editor.
 */

/** Which kinds each refusal can answer (any other code answers the oldest entry). */
const REFUSED_KINDS = {
  busy: ["message", "replace"],
  not_running: ["steer"],
  bad_frame: ["replace", "message"],
  budget_exceeded: ["message", "replace"],
};

export class Outbox {
  /**
   * @param {{
   *   send: (frame: object) => boolean,
   *   transcript: import("./transcript.js").Transcript,
   *   input: HTMLTextAreaElement,
   *   hint: HTMLElement,
   *   onReplaceRefused: () => void,
   * }} parts
   */
  constructor({ send, transcript, input, hint, onReplaceRefused, onAttachmentsBack = () => {} }) {
    this.send = send;
    this.transcript = transcript;
    this.input = input;
    this.hint = hint;
    this.onReplaceRefused = onReplaceRefused;
    this.onAttachmentsBack = onAttachmentsBack;
    this.entries = [];
  }

  /** Whether an entry will start a run (a message, a regenerate or an edit). */
  get startsRun() {
    return this.entries.some((entry) => entry.kind !== "steer");
  }

  /**
   * Send `content` as a new message with the `attachments` references (`attachments.js`)
   * and show it. False (nothing shown) if not sent.
   */
  message(content, attachments = []) {
    const frame = { type: "user_message", content };
    if (attachments.length) {
      frame.attachments = attachments.map((ref) => ref.id);
    }
    if (!this.send(frame)) {
      return false;
    }
    const bubble = this.transcript.addUserMessage(content, { at: new Date(), pending: true, attachments });
    this.entries.push({ kind: "message", content, bubble, attachments });
    return true;
  }

  steer(content) {
    if (!this.send({ type: "steer", content })) {
      return false;
    }
    this.entries.push({ kind: "steer", content });
    this.hint.textContent = "Steer sent.";
    return true;
  }

  /**
   * Answer the message at `position` again (`content` null), or an edited version of it
   * (`position` null: the last message).
   */
  replace(content, position = null) {
    const at = position === null ? {} : { position };
    const frame = content === null ? { type: "regenerate", ...at } : { type: position === null ? "edit_last" : "edit", ...at, content };
    if (!this.send(frame)) {
      return false;
    }
    this.entries.push({ kind: "replace", content });
    return true;
  }

  /** Take the oldest entry of `kind` (with `content`, when given) off the list. */
  take(kind, content = null) {
    const index = this.entries.findIndex(
      (entry) => entry.kind === kind && (content === null || entry.content === content),
    );
    return index >= 0 ? this.entries.splice(index, 1)[0] : null;
  }

  /** The bubble of the oldest message still waiting for its run, if it is shown. */
  firstPendingBubble() {
    return this.entries.find((entry) => entry.bubble?.isConnected)?.bubble ?? null;
  }

  /** The server refused a frame with `code`: give back the entry it refused. */
  refused(code) {
    const kinds = REFUSED_KINDS[code] ?? ["message", "steer", "replace"];
    const index = this.entries.findIndex((entry) => kinds.includes(entry.kind));
    if (index >= 0) {
      this.giveBack(this.entries.splice(index, 1)[0]);
    }
  }

  /** A new socket: what is still waiting was sent on the old one. */
  reconnected(rebuilt) {
    for (const entry of this.entries) {
      entry.beforeReconnect = true;
      if (rebuilt) {
        entry.bubble = null; // thrown away with the old transcript
      }
    }
  }

  /** The replay is over: what the old socket sent and nobody took is given back. */
  caughtUp() {
    for (const entry of this.entries.filter((item) => item.beforeReconnect)) {
      this.entries.splice(this.entries.indexOf(entry), 1);
      this.giveBack(entry);
    }
  }

  /** A replayed steer with this text was this page's, sent before the link dropped. */
  takeReplayedSteer(content) {
    const index = this.entries.findIndex(
      (entry) => entry.kind === "steer" && entry.beforeReconnect && entry.content === content,
    );
    if (index >= 0) {
      this.entries.splice(index, 1);
    }
  }

  giveBack(entry) {
    if (entry.kind === "replace") {
      this.onReplaceRefused();
      return;
    }
    if (entry.kind === "message" && entry.bubble) {
      this.transcript.retractUserMessage(entry.bubble);
    }
    if (entry.attachments?.length) {
      this.onAttachmentsBack(entry.attachments);
    }
    this.restoreText(entry.content, entry.kind === "message" ? "Your message was not sent" : "Your steer was not used");
  }

  restoreText(content, what) {
    const input = this.input;
    if (!input.value.trim()) {
      input.value = content;
      this.hint.textContent = `${what}; it is back in the box.`;
    } else {
      input.value = `${content}\n\n${input.value}`;
      this.hint.textContent = `${what}; it is back in the box, above what you typed since.`;
    }
    input.focus({ preventScroll: true });
  }
}
