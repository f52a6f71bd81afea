/**
 * The reply widgets (`widgets.js`: questions and approvals, with their countdowns), loaded
 * when the first one is about to be shown. Most chats never ask anything, so their pages
 * never fetch that code.
 *
 * `LaterReplyWidgets` stands in for `ReplyWidgets` with the same methods. Until the module
 * is loaded there is no widget, so the questions it is asked have plain answers (none is
 * open, none is known) and the outcomes it is told of concern nobody. What makes a widget
 * must not run before the load: `mount.js` holds back the frames that make one
 * (`asksSomeone`), and every frame after them, until `load()` resolves, then applies them
 * in order.
 */
import { lazyModule } from "./lazy.js";

const widgetsModule = lazyModule("widgets.js");

/** What a custom event asks of a person: these open a widget. */
const WAITS = new Set(["ask_user", "approval_requested"]);

/** Whether applying `frame` can show a reply widget (live, pending, or from history). */
export function asksSomeone(frame) {
  const event = frame.event;
  if (event?.type === "custom" && WAITS.has(event.name)) {
    return true;
  }
  if (Array.isArray(frame.pending) && frame.pending.length > 0) {
    return true;
  }
  const items = [frame.history, frame.messages].flatMap((list) => (Array.isArray(list) ? list : []));
  return items.some((item) => isObject(item?.attributes?.reply) || isObject(item?.attributes?.mcp_question));
}

function isObject(value) {
  return typeof value === "object" && value !== null;
}

export class LaterReplyWidgets {
  /** The arguments of `ReplyWidgets`, kept until it is made. */
  constructor(sendExternalEvent, hooks = {}) {
    this.args = [sendExternalEvent, hooks];
    this.real = null;
  }

  get loaded() {
    return this.real !== null;
  }

  /** Load `widgets.js` (once) and make the real `ReplyWidgets`. */
  async load() {
    const { ReplyWidgets } = await widgetsModule.get();
    this.real ??= new ReplyWidgets(...this.args);
    return this.real;
  }

  has(toolCallId) {
    return this.real?.has(toolCallId) ?? false;
  }

  isOpen(toolCallId) {
    return this.real?.isOpen(toolCallId) ?? false;
  }

  anyOpen(requestId = null) {
    return this.real?.anyOpen(requestId) ?? false;
  }

  askUser(payload, options) {
    return this.make("askUser", payload, options);
  }

  approval(payload, options) {
    return this.make("approval", payload, options);
  }

  elicitation(payload, options) {
    return this.make("elicitation", payload, options);
  }

  settledFromHistory(call, reply, requestId = null) {
    return this.make("settledFromHistory", call, reply, requestId);
  }

  settle(...args) {
    this.real?.settle(...args);
  }

  accepted(...args) {
    this.real?.accepted(...args);
  }

  resolve(...args) {
    this.real?.resolve(...args);
  }

  closeOpen(...args) {
    this.real?.closeOpen(...args);
  }

  forgetDetached() {
    this.real?.forgetDetached();
  }

  reset() {
    this.real?.reset();
  }

  /** A widget from the real module; if it could not be loaded, a line that says so. */
  make(kind, ...args) {
    if (this.real !== null) {
      return this.real[kind](...args);
    }
    const note = document.createElement("p");
    note.className = "widget widget--missing notice";
    note.textContent = "A question for you could not be shown (the page's code did not load). Reload the page to answer it.";
    return note;
  }
}
