/**
 * The conversation as the user sees it: user messages, and after each the turn that
 * answers it, in the order the session stored or streamed them.
 *
 * A turn holds the blocks of one request — or of a paused request and the continuation
 * that took it over — in event order: reasoning (collapsed), text segments (Markdown,
 * re-rendered at most once per animation frame while they stream), tool cards keyed by
 * tool call id, reply widgets, steers and notes. Deltas are display data only: when a model
 * call completes, its final message replaces whatever the deltas built (unless the server
 * left the text out to keep the frame small, `content_omitted`: then the streamed text
 * stays).
 *
 * History (`history.js`) and live frames build the same elements, so a page reloaded after
 * any outcome reads as it did live. The transcript stays scrolled to the end while the user
 * is reading the end, and leaves the scroll position alone once they have scrolled up.
 */
import { renderAttachments } from "./attachments.js";
import { contentText, element, ReasoningSegment, TextSegment, ToolCard } from "./blocks.js";
import { copyButton } from "./copy.js";
import { applyEvent } from "./events.js";
import { markdownReady } from "./markdown.js";
import { timeElement } from "./time.js";
import { addUsage, usageDetail, usageText } from "./usage.js";

const STOPPED_WIDGET_TEXT = "Stopped before anyone answered.";
const ENDED_WIDGET_TEXT = "The agent stopped waiting for this answer.";
const PINNED_SLACK_PX = 48;

/** The blocks of one request (and its continuations) and where its next delta goes. */
export class Turn {
  constructor(requestId) {
    this.requestIds = new Set(requestId ? [requestId] : []);
    this.el = element("div", "turn");
    // Its author, for screen readers (a user's message shows "You"; an answer shows none).
    this.el.setAttribute("role", "article");
    this.el.setAttribute("aria-label", "Assistant");
    if (requestId) {
      this.el.dataset.requestId = requestId;
    }
    this.text = null;
    this.reasoning = null;
    this.callText = null;
    this.callReasoning = null;
    /** The user message this turn answers, when known (for Retry). */
    this.prompt = null;
    this.segments = [];
    this.usage = null;
    this.meta = null;
    /** Steers shown as queued, not yet used by the agent. */
    this.queuedSteers = [];
    /** When its answer was written (the footer's time). */
    this.endedAt = null;
  }

  /** The answer's Markdown: every text block of the turn, in order. */
  answerText() {
    return this.segments
      .map((segment) => segment.source.trim())
      .filter(Boolean)
      .join("\n\n");
  }
}

export class Transcript {
  /**
   * @param {HTMLElement} root The scrolling log element.
   * @param {import("./widgets.js").ReplyWidgets} widgets
   * @param {HTMLElement} emptyHint Shown while there is nothing to show.
   * @param {{onUsage?: (usage: object) => void, onRetry?: (prompt: string, button: HTMLElement) => void}} hooks
   *   `onUsage` gets each live model call's token usage; `onRetry` a Retry button's press.
   */
  constructor(root, widgets, emptyHint, { onUsage = () => {}, onRetry = () => {} } = {}) {
    this.root = root;
    this.widgets = widgets;
    this.emptyHint = emptyHint;
    this.onUsage = onUsage;
    this.onRetry = onRetry;
    /** Always the first child of `root`: where older history is inserted (`paging.js`). */
    this.head = element("div", "transcript__head");
    this.current = null;
    this.turns = new Map();
    /** The turn of each turn element. */
    this.turnOfElement = new WeakMap();
    this.cards = new Map();
    /** Runs whose outcome is shown already (history pages come newest first). */
    this.outcomes = new Set();
    /** While true, appends do not keep the end in view (a whole page is being built). */
    this.bulk = false;
    this.root.replaceChildren(this.head);
  }

  clear() {
    this.root.replaceChildren(this.head);
    this.widgets.reset();
    this.current = null;
    this.turns.clear();
    this.cards.clear();
    this.outcomes.clear();
    this.updateEmptyHint();
  }

  /** The top-level elements of the conversation, oldest first. */
  get items() {
    return [...this.root.children].filter((node) => node !== this.head);
  }

  // --- user messages -------------------------------------------------------------------

  /**
   * A user's message, appended to `parent` (or inserted `before` a node). `steer` makes it
   * a steer inside a turn; `pending` marks one this page sent and the server has not
   * confirmed yet.
   */
  addUserMessage(
    content,
    { steer = false, at = null, position = null, requestId = null, parent = this.root, before = null, pending = false, attachments = null } = {},
  ) {
    // An answer will follow: its Markdown libraries load while the model starts.
    markdownReady().catch(() => {}); // (a failed load is tried again by the answer)
    const bubble = element("div", steer ? "msg msg--user msg--steer" : "msg msg--user");
    const head = element("p", "msg__head");
    head.append(element("span", "msg__label", steer ? "You steered" : "You"));
    bubble.append(head, element("div", "msg__body", contentText(content)));
    renderAttachments(bubble, attachments);
    this.stampUserMessage(bubble, { at, position, requestId });
    if (pending) {
      bubble.dataset.pending = "true";
    }
    if (before !== null) {
      before.before(bubble);
      this.updateEmptyHint();
    } else {
      this.append(bubble, parent);
    }
    return bubble;
  }

  /** The server stored `bubble`'s message: its time, position and request. */
  stampUserMessage(bubble, { at = null, position = null, requestId = null }) {
    delete bubble.dataset.pending;
    if (position !== null && position !== undefined) {
      bubble.dataset.position = String(position);
    }
    if (requestId) {
      bubble.dataset.requestId = requestId;
    }
    if (at !== null) {
      const time = timeElement(at, "msg__time");
      const shown = bubble.querySelector(".msg__time");
      if (shown) {
        shown.replaceWith(time);
      } else {
        bubble.querySelector(".msg__head").append(time);
      }
    }
  }

  /** Remove a message shown before the server took it (it refused it). */
  retractUserMessage(bubble) {
    bubble.remove();
    this.updateEmptyHint();
  }

  // --- runs ----------------------------------------------------------------------------

  /** The turn that holds `requestId`'s blocks, if any. */
  turnFor(requestId) {
    return this.turns.get(requestId) ?? null;
  }

  /**
   * A run started (`run_started`, or a replay's): its turn becomes the live one. `bubble`
   * is the user message it answers, already shown; the turn goes right after it.
   */
  startRun(requestId, { prompt = null, bubble = null } = {}) {
    this.removeRetryButtons();
    let turn = this.turnFor(requestId);
    if (turn === null) {
      turn = this.appendTurn(requestId, { after: bubble });
    }
    turn.prompt ??= prompt;
    this.setLive(turn);
    return turn;
  }

  /** A continuation run (`kind` `resume`) carries on the turn of the run it took over. */
  resumeRun(requestId, resumedFrom) {
    this.removeRetryButtons();
    const turn = this.turnFor(resumedFrom) ?? this.lastTurn() ?? this.appendTurn(null);
    this.addRequest(turn, requestId);
    turn.meta?.remove();
    turn.meta = null;
    this.setLive(turn);
    return turn;
  }

  setLive(turn) {
    this.current = turn;
    turn.el.classList.add("is-running");
    turn.el.setAttribute("aria-busy", "true");
  }

  /**
   * The run goes on after its worker stopped (`run_continued`): the model call that was
   * being written is made again, so its partial text (and reasoning) is dropped, and a
   * quiet line says what happened; the answer then streams on in the same turn.
   */
  continueRun(requestId) {
    const turn = this.turnFor(requestId) ?? this.current;
    if (turn === null) {
      return null;
    }
    const unfinished = turn.segments.filter((segment) => !segment.final);
    for (const segment of unfinished) {
      segment.el.remove();
    }
    turn.segments = turn.segments.filter((segment) => segment.final);
    if (turn.callReasoning && !turn.callText?.final) {
      turn.callReasoning.el?.remove();
    }
    turn.text = turn.reasoning = turn.callText = turn.callReasoning = null;
    this.addNote("Continued after a server restart.", "muted", turn);
    return turn;
  }

  /**
   * The live run ended with `outcome` (`completed`, `cancelled`, `failed`, `interrupted`,
   * `expired`, `paused`): streaming stops, open widgets and cards show how it ended,
   * queued steers that were never used say so, and the answer gets its footer.
   */
  endRun(requestId, outcome, { error = null, message = "", at = new Date() } = {}) {
    const turn = this.turnFor(requestId) ?? this.current;
    if (turn === null) {
      return null;
    }
    if (turn === this.current) {
      this.current = null;
    }
    const stopped = outcome === "cancelled";
    for (const segment of turn.segments) {
      if (segment.streaming || (stopped && !segment.final)) {
        segment.finish({ stopped });
      }
    }
    turn.text = turn.reasoning = null;
    turn.el.classList.remove("is-running");
    turn.el.removeAttribute("aria-busy");
    this.showOutcome(turn, requestId, outcome, { error, message });
    if (outcome !== "paused") {
      this.showAnswerMeta(turn, at);
    }
    return turn;
  }

  /**
   * How a run ended, inside its turn: the same for a live end and for history. Paused
   * runs keep their widgets open: they can still be answered.
   */
  showOutcome(turn, requestId, outcome, { error = null, message = "" } = {}) {
    this.outcomes.add(requestId);
    if (outcome === "paused" || outcome === "resumed") {
      return;
    }
    const stopped = outcome === "cancelled";
    this.widgets.closeOpen(stopped ? "stopped" : "closed", stopped ? STOPPED_WIDGET_TEXT : ENDED_WIDGET_TEXT, {
      requestIds: turn.requestIds,
    });
    this.discardSteers(turn, stopped ? "Not used: the answer was stopped first." : "Not used: the answer ended first.");
    if (outcome === "completed") {
      return;
    }
    for (const card of this.cardsOf(turn)) {
      if (stopped) {
        card.stop();
      } else if (!card.settled) {
        card.finish("failed", "Not run: the answer ended first.");
      }
    }
    if (stopped) {
      this.addNote("Stopped.", "muted", turn);
    } else if (outcome === "failed") {
      const text = `The answer failed: ${error?.message || "unknown error"} (${error?.type || "Error"}).`;
      this.addRetryNote(turn, text, "error");
    } else {
      this.addRetryNote(turn, message || error?.message || "This answer was not finished.", "warning");
    }
  }

  /** A note with a Retry button that sends the turn's message again, when it is known. */
  addRetryNote(turn, text, tone) {
    const note = this.addNote(text, tone, turn);
    if (turn.prompt) {
      const button = element("button", "button button--small note__action", "Retry");
      button.type = "button";
      button.title = "Send the same message again";
      button.addEventListener("click", () => this.onRetry(turn.prompt, button));
      note.append(" ", button);
    }
    return note;
  }

  /** Retry belongs to the last answer only: a new run, or older history, removes it. */
  removeRetryButtons({ keepLast = false } = {}) {
    const buttons = [...this.root.querySelectorAll(".note__action")];
    const last = this.items.at(-1);
    for (const button of buttons) {
      if (!(keepLast && last?.contains(button))) {
        button.remove();
      }
    }
  }

  cardsOf(turn) {
    return [...this.cards.values()].filter((card) => turn.el.contains(card.el));
  }

  /**
   * `older` is the first part of `newer`, which a page boundary cut off: the footer of
   * `newer` now copies and counts both parts.
   */
  joinTurns(older, newer) {
    if (!newer || older === newer) {
      return;
    }
    newer.segments = [...older.segments, ...newer.segments];
    newer.usage = addUsage(older.usage, newer.usage);
    for (const requestId of older.requestIds) {
      this.addRequest(newer, requestId);
    }
    if (newer.meta) {
      this.showAnswerMeta(newer, newer.endedAt);
    }
  }

  /** The footer of a finished answer: copy it, when it was written, what it cost. */
  showAnswerMeta(turn, at) {
    turn.endedAt = at;
    const text = turn.answerText();
    const tokens = usageText(turn.usage);
    if (!text && !tokens) {
      return;
    }
    const meta = element("div", "turn__meta");
    if (text) {
      meta.append(copyButton("Copy answer", () => turn.answerText()));
    }
    if (at !== null) {
      meta.append(timeElement(at, "turn__time"));
    }
    if (tokens) {
      const usage = element("span", "turn__usage", tokens);
      usage.title = usageDetail(turn.usage);
      meta.append(usage);
    }
    this.onAnswerMeta?.(turn, meta); // 👍/👎 (people.js)
    turn.meta?.remove();
    turn.meta = meta;
    this.append(meta, turn.el);
  }

  // --- steers --------------------------------------------------------------------------

  /**
   * A steer was accepted (`reply_accepted`): shown at once, marked as waiting until the
   * agent uses it (`steering_started`), which moves it to where the answer then is: right
   * under the text it cut short, with the rest of the answer below it.
   */
  queueSteer(requestId, content) {
    const turn = this.turnFor(requestId) ?? this.current;
    if (turn === null) {
      return null;
    }
    const bubble = this.addUserMessage(content, { steer: true, parent: turn.el });
    // Text being written is cut short by the steer at once (the next frame applies it). A
    // tool that runs is never cut short: the steer is read once it is done, and an open
    // question or approval first needs its answer.
    const waiting = this.widgets.anyOpen() ? "Will be read after your answer above" : "Will be read after this step";
    this.setSteerState(bubble, "queued", waiting);
    turn.queuedSteers.push({ content: contentText(content), bubble });
    this.keepMetaLast(turn);
    return bubble;
  }

  /** The agent took a steer: the queued one becomes applied, where the answer now is. */
  applySteer(turn, content) {
    const text = contentText(content);
    const index = turn.queuedSteers.findIndex((steer) => steer.content === text);
    const [steer] = turn.queuedSteers.splice(index >= 0 ? index : 0, 1);
    if (steer === undefined) {
      this.addUserMessage(content, { steer: true, parent: turn.el });
      return;
    }
    this.setSteerState(steer.bubble, "applied", "");
    this.append(steer.bubble, turn.el);
  }

  discardSteers(turn, text) {
    for (const steer of turn.queuedSteers.splice(0)) {
      this.setSteerState(steer.bubble, "discarded", text);
    }
  }

  setSteerState(bubble, state, text) {
    bubble.dataset.steer = state;
    let tag = bubble.querySelector(".msg__tag");
    if (!text) {
      tag?.remove();
      return;
    }
    if (tag === null) {
      tag = element("span", "msg__tag");
      bubble.querySelector(".msg__label").after(tag);
    }
    tag.textContent = text;
  }

  // --- live events ---------------------------------------------------------------------

  /** Apply one `agent_event` of request `requestId` (`events.js`). */
  handleEvent(requestId, event) {
    applyEvent(this, requestId, event, this.onUsage);
  }

  /** An open widget for a wait (`ask_user` or `approval_requested`), right under its card. */
  showWidget(card, payload, name, requestId) {
    const widget =
      name === "approval_requested"
        ? this.widgets.approval(payload, { requestId })
        : payload.source === "mcp"
          ? this.widgets.elicitation(payload, { requestId })
          : this.widgets.askUser(payload, { requestId });
    this.keepPinned(() => card.el.after(widget));
    return widget;
  }

  /**
   * A `regenerate` or `edit` run superseded the messages from `position` on: they leave
   * the page (the user message there, and everything after it).
   */
  dropFrom(position) {
    if (!Number.isInteger(position)) {
      return;
    }
    const items = this.items;
    const index = items.findIndex((node) => node.dataset.position !== undefined && Number(node.dataset.position) >= position);
    if (index < 0) {
      return;
    }
    for (const node of items.slice(index)) {
      node.remove();
    }
    for (const [id, card] of this.cards) {
      if (!card.el.isConnected) {
        this.cards.delete(id);
      }
    }
    for (const [id, turn] of this.turns) {
      if (!turn.el.isConnected) {
        this.turns.delete(id);
      }
    }
    if (this.current !== null && !this.current.el.isConnected) {
      this.current = null;
    }
    this.widgets.forgetDetached();
    this.updateEmptyHint();
  }

  // --- blocks --------------------------------------------------------------------------

  addNote(text, tone = "info", turn = this.current) {
    const note = element("p", `note note--${tone}`, text);
    this.append(note, turn?.el ?? this.root);
    if (turn) {
      this.keepMetaLast(turn);
    }
    return note;
  }

  keepMetaLast(turn) {
    if (turn.meta && turn.el.lastElementChild !== turn.meta) {
      turn.el.append(turn.meta);
    }
  }

  openText(turn) {
    const segment = new TextSegment(this);
    turn.callText ??= segment;
    turn.segments.push(segment);
    this.append(segment.el, turn.el);
    return segment;
  }

  openReasoning(turn) {
    const segment = new ReasoningSegment(this);
    turn.callReasoning ??= segment;
    this.append(segment.el, turn.el);
    return segment;
  }

  /** The card of a tool call: the one already shown (anywhere), or a new one in `turn`. */
  cardFor(turn, call, label = "Tool") {
    let card = call.id ? this.cards.get(call.id) : undefined;
    if (card === undefined) {
      card = new ToolCard(call, { label });
      if (call.id) {
        this.cards.set(call.id, card);
      }
      this.append(card.el, turn.el);
    } else if (call.arguments !== undefined) {
      card.setArguments(call.arguments);
    }
    return card;
  }

  /**
   * The blocks of a sub-run (an assistant's delegate at work): a turn of their own inside
   * the card of the call that runs it, under the delegate's name. The card stays closed
   * unless the delegate asks something.
   */
  subTurnFor(turn, parentCallId, agent) {
    this.subTurns ??= new Map();
    let sub = this.subTurns.get(parentCallId);
    if (sub === undefined) {
      sub = new Turn(null);
      sub.el.className = "subrun";
      sub.el.dataset.agent = agent;
      sub.el.append(element("p", "subrun__head", agent));
      const card = this.cardFor(turn, { id: parentCallId });
      this.append(sub.el, card.el.querySelector(".tool-card__body") ?? card.el);
      this.subTurns.set(parentCallId, sub);
    }
    return sub;
  }

  /** A new turn, appended to `parent` (or right `after` a node). */
  appendTurn(requestId, { parent = this.root, after = null } = {}) {
    const turn = new Turn(requestId);
    this.turnOfElement.set(turn.el, turn);
    if (requestId) {
      this.turns.set(requestId, turn);
    }
    if (after !== null && after.isConnected) {
      after.after(turn.el);
      this.updateEmptyHint();
    } else {
      this.append(turn.el, parent);
    }
    return turn;
  }

  /** `requestId`'s blocks go to `turn` too (a continuation, or a run's later messages). */
  addRequest(turn, requestId) {
    if (requestId && this.turns.get(requestId) !== turn) {
      turn.requestIds.add(requestId);
      this.turns.set(requestId, turn);
    }
  }

  lastTurn() {
    const node = this.items.findLast((item) => item.classList.contains("turn"));
    return node ? (this.turnOfElement.get(node) ?? null) : null;
  }

  append(node, parent) {
    if (this.bulk) {
      parent.append(node);
    } else {
      this.keepPinned(() => parent.append(node));
    }
    this.updateEmptyHint();
  }

  /** Run `change`; if the user was reading the end before, keep the end in view after. */
  keepPinned(change) {
    if (this.bulk) {
      change();
      return;
    }
    const root = this.root;
    const pinned = root.scrollHeight - root.scrollTop - root.clientHeight <= PINNED_SLACK_PX;
    change();
    if (pinned) {
      this.scrollToEnd();
    }
  }

  scrollToEnd() {
    this.root.scrollTop = this.root.scrollHeight;
  }

  updateEmptyHint() {
    this.emptyHint.hidden = this.root.childElementCount > 1;
  }
}
