/**
 * People in the loop, in the chat (page and widget alike): 👍/👎 with an optional comment
 * under every finished answer, "Talk to a person" (for an assistant that hands over to
 * people), and what the team does in the chat — who answers now, their messages, handing
 * the chat back to the assistant (docs/support.md, frames in docs/protocol.md).
 *
 * A rating names its answer by the history item's `id`; an answer just streamed has none
 * yet, so it is named by its run (`request_id`), and the server's `feedback_saved` gives
 * its id back.
 */
import { element } from "./blocks.js";
import { timeElement } from "./time.js";

const RATINGS = [
  ["up", "👍", "Good answer"],
  ["down", "👎", "Bad answer"],
];

/** A member of staff's message, as the customer (and a reload) sees it. */
export function staffMessage(item, { at = null } = {}) {
  const bubble = element("div", "msg msg--staff");
  bubble.dataset.role = "staff";
  if (item.position !== undefined && item.position !== null) {
    bubble.dataset.position = String(item.position);
  }
  const head = element("p", "msg__head");
  head.append(element("span", "msg__label", `${item.staff?.name || "Support"} · from the team`));
  if (at) {
    head.append(timeElement(at, "msg__time"));
  }
  bubble.append(head, element("div", "msg__body", typeof item.content === "string" ? item.content : ""));
  return bubble;
}

export class People {
  /**
   * @param {{transcript: object, send: (frame: object) => boolean, notices: object,
   *   composer: Element, handoff: boolean}} options
   */
  constructor({ transcript, send, notices, composer, handoff = false }) {
    this.transcript = transcript;
    this.send = send;
    this.notices = notices;
    this.banner = element("p", "support-banner");
    this.banner.dataset.part = "support";
    this.banner.setAttribute("role", "status");
    this.banner.hidden = true;
    composer.before(this.banner);
    this.talk = null;
    if (handoff) {
      this.talk = element("button", "button button--quiet button--small support-talk", "Talk to a person");
      this.talk.type = "button";
      this.talk.dataset.part = "talk";
      this.talk.addEventListener("click", () => this.askForPerson());
      composer.querySelector(".composer__actions")?.prepend(this.talk);
    }
    /** Rating controls by answer id and by request id. */
    this.byAnswer = new Map();
    this.byRequest = new Map();
    transcript.onAnswerMeta = (turn, meta) => this.rateable(turn, meta);
  }

  // --- the chat's state with people -----------------------------------------------------

  /** The `support` of a `session` frame. */
  session(support) {
    this.byAnswer.clear();
    this.byRequest.clear();
    if (support?.taken_over) {
      this.show(`${support.staff?.name || "Someone from the team"} from the team answers here now.`, "staff");
    } else if (support?.needs_human) {
      this.show("A person from the team has been asked to join this chat.", "waiting");
    } else {
      this.show("", "");
    }
  }

  show(text, state) {
    this.banner.textContent = text;
    this.banner.hidden = !text;
    this.banner.dataset.state = state;
    if (this.talk) {
      this.talk.hidden = state !== "";
    }
  }

  askForPerson() {
    if (this.send({ type: "request_human" })) {
      this.talk.disabled = true;
    }
  }

  handoffRequested(frame) {
    if (this.talk) this.talk.disabled = false;
    const when = frame.hours ? ` The team answers ${frame.hours}.` : "";
    this.show(`A person from the team has been asked to join this chat.${when}`, "waiting");
  }

  takenOver(frame) {
    const name = frame.staff?.name || "Someone";
    this.show(`${name} from the team answers here now.`, "staff");
    this.transcript.addNote(`${name} from the team joined the chat.`, "info", null);
  }

  handedBack() {
    this.show("", "");
    this.transcript.addNote("The assistant answers again.", "info", null);
  }

  staffMessage(frame) {
    const bubble = staffMessage(frame, { at: frame.created_at ? new Date(frame.created_at) : new Date() });
    this.transcript.append(bubble, this.transcript.root);
  }

  // --- ratings --------------------------------------------------------------------------

  /** Give a finished answer's footer its 👍/👎 (once). */
  rateable(turn, meta) {
    if (!turn.answerText()) return;
    const requestId = [...turn.requestIds].at(-1) ?? null;
    if (!turn.answerId && !requestId) return;
    const box = element("span", "rating");
    box.setAttribute("role", "group");
    box.setAttribute("aria-label", "Rate this answer");
    const buttons = RATINGS.map(([rating, face, label]) => {
      const button = element("button", "button button--quiet button--small rating__button", face);
      button.type = "button";
      button.dataset.rating = rating;
      button.setAttribute("aria-label", label);
      button.setAttribute("aria-pressed", "false");
      button.addEventListener("click", () => this.rate(control, rating));
      return button;
    });
    box.append(...buttons);
    meta.append(box);
    const control = { turn, requestId, box, buttons, form: null, rating: null };
    if (turn.answerId) this.byAnswer.set(turn.answerId, control);
    if (requestId) this.byRequest.set(requestId, control);
  }

  rate(control, rating, comment = "") {
    const target = control.turn.answerId ? { message_id: control.turn.answerId } : { request_id: control.requestId };
    if (!this.send({ type: "feedback", ...target, rating, comment })) return;
    control.rating = rating;
    this.press(control, rating);
    this.openComment(control);
  }

  press(control, rating) {
    for (const button of control.buttons) {
      button.setAttribute("aria-pressed", String(button.dataset.rating === rating));
    }
  }

  /** A comment box under the answer, for either rating. */
  openComment(control) {
    if (control.form) {
      control.form.querySelector("textarea").focus();
      return;
    }
    const form = element("form", "rating__comment");
    const label = element("label", "visually-hidden", "Tell us more (optional)");
    const box = element("textarea");
    box.rows = 2;
    box.maxLength = 4000;
    box.placeholder = "Tell us more (optional)";
    const id = `rating-${Math.random().toString(36).slice(2)}`;
    box.id = id;
    label.htmlFor = id;
    const submit = element("button", "button button--small", "Send comment");
    submit.type = "submit";
    form.append(label, box, submit);
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const comment = box.value.trim();
      if (comment && control.rating) {
        this.rate(control, control.rating, comment);
        form.remove();
        control.form = null;
        control.box.append(element("span", "rating__thanks muted", "Thanks!"));
      }
    });
    box.addEventListener("keydown", (event) => {
      if (event.key === "Escape") {
        event.preventDefault();
        form.remove();
        control.form = null;
      }
    });
    control.form = form;
    control.box.closest(".turn__meta")?.after(form);
    box.focus();
  }

  /** The server stored a rating (`feedback_saved`): the answer's id is known from now on. */
  saved(frame) {
    const control =
      this.byAnswer.get(frame.message_id) ??
      [...this.byRequest.values()].find((each) => each.rating === frame.rating && !each.turn.answerId) ??
      [...this.byRequest.values()].find((each) => each.turn.answerId === frame.message_id);
    if (!control) return;
    control.turn.answerId = frame.message_id;
    this.byAnswer.set(frame.message_id, control);
    this.press(control, frame.rating);
    // What the server stored (a test, or a style, may read it).
    control.box.dataset.saved = frame.comment ? `${frame.rating}+comment` : frame.rating;
  }
}
