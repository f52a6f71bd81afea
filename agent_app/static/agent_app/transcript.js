/**
 * The conversation as the user sees it: the history from the `session` frame, then the
 * live `agent_event`s of each request, appended in the order they arrive.
 *
 * One request is one turn. Inside it blocks appear in event order: reasoning (collapsed),
 * text segments (Markdown, re-rendered at most once per animation frame while they stream),
 * tool cards keyed by tool call id, reply widgets and notes. Deltas are display data only:
 * when a model call completes, its final message replaces whatever the deltas built.
 * The transcript stays scrolled to the end while the user is reading the end, and leaves
 * the scroll position alone once they have scrolled up.
 *
 * Each user message shows when it was sent; each finished answer ends in a footer with a
 * "Copy answer" button, when it was written and the tokens it cost. History items carry
 * `created_at` and `usage` when the server stores them; messages seen live use the time
 * the page saw them and the `usage` of each `model_completed` event.
 */
import { decorateCodeBlocks } from "./code.js";
import { copyButton } from "./copy.js";
import { renderMarkdown } from "./markdown.js";
import { parseTime, timeElement } from "./time.js";
import { addUsage, usageDetail, usageText } from "./usage.js";

const STOP_REASONS = {
  max_tokens: "it reached the length limit",
  content_filter: "a content filter stopped it",
  refusal: "the model refused to go on",
  other: "the model stopped early",
};

const TOOL_STATUS = {
  running: "running…",
  waiting: "waiting for you",
  done: "done",
  failed: "failed",
  skipped: "skipped",
  unanswered: "no result",
};

const PINNED_SLACK_PX = 48;
const PREVIEW_CHARS = 60;

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) {
    node.className = className;
  }
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

/** The text of message content: a string, or a list of text and image parts. */
export function contentText(content) {
  if (typeof content === "string") {
    return content;
  }
  if (content === null || content === undefined) {
    return "";
  }
  if (Array.isArray(content)) {
    return content
      .map((part) => (typeof part === "string" ? part : typeof part?.text === "string" ? part.text : "[image]"))
      .join("\n");
  }
  return JSON.stringify(content, null, 2);
}

function argumentPreview(args) {
  if (!args || typeof args !== "object") {
    return "";
  }
  const text = Object.entries(args)
    .map(([key, value]) => `${key}=${JSON.stringify(value)}`)
    .join(", ");
  return text.length > PREVIEW_CHARS ? `${text.slice(0, PREVIEW_CHARS - 1)}…` : text;
}

function askUserArguments(payload) {
  const args = { question: payload.question };
  if (payload.options) {
    args.options = payload.options;
  }
  if (payload.allow_multiple) {
    args.allow_multiple = true;
  }
  return args;
}

/**
 * A Markdown block that can grow delta by delta. While it streams, and once it was
 * stopped part way, it renders as unfinished text (open emphasis and code closed); once
 * its model call completed (`final`), exactly as written.
 */
class TextSegment {
  constructor(transcript) {
    this.transcript = transcript;
    this.source = "";
    this.frame = null;
    this.streaming = false;
    this.stopped = false;
    this.final = false;
    this.el = element("div", "msg msg--assistant markdown");
  }

  append(delta) {
    this.source += delta;
    this.streaming = true;
    this.el.classList.add("is-streaming");
    this.schedule();
  }

  set(source) {
    if (source !== this.source) {
      this.source = source;
      this.schedule();
    }
  }

  finish({ stopped = false } = {}) {
    this.streaming = false;
    this.stopped ||= stopped && !this.final;
    this.el.classList.remove("is-streaming");
    this.el.classList.toggle("is-stopped", this.stopped);
    this.render();
  }

  schedule() {
    if (this.frame === null) {
      this.frame = requestAnimationFrame(() => this.render());
    }
  }

  render() {
    if (this.frame !== null) {
      cancelAnimationFrame(this.frame);
      this.frame = null;
    }
    this.transcript.keepPinned(() => {
      this.el.innerHTML = renderMarkdown(this.source, { unfinished: this.streaming || this.stopped });
      decorateCodeBlocks(this.el);
    });
  }
}

/** Collapsed reasoning, shown as plain text. */
class ReasoningSegment {
  constructor(transcript) {
    this.transcript = transcript;
    this.el = element("details", "reasoning");
    this.el.append(element("summary", "", "Reasoning"));
    this.body = element("div", "reasoning__body");
    this.el.append(this.body);
  }

  append(delta) {
    this.transcript.keepPinned(() => this.body.append(delta));
  }

  set(text) {
    if (text !== this.body.textContent) {
      this.body.textContent = text;
    }
  }

  finish() {}
}

/** A collapsible card for one tool call: arguments, then status and result. */
class ToolCard {
  constructor(call, { label = "Tool" } = {}) {
    this.el = element("details", "tool-card");
    if (call.id) {
      this.el.dataset.toolCallId = call.id;
    }
    const summary = element("summary", "tool-card__summary");
    summary.append(element("span", "visually-hidden", `${label}: `));
    summary.append(element("span", "tool-card__name", call.name || "tool"));
    this.preview = element("span", "tool-card__preview");
    this.status = element("span", "tool-card__status");
    summary.append(this.preview, this.status);
    const body = element("div", "tool-card__body");
    this.argsCode = element("code");
    const argsBlock = element("pre", "tool-card__code");
    argsBlock.append(this.argsCode);
    this.resultLabel = element("p", "tool-card__label", "Result");
    this.result = element("pre", "tool-card__code tool-card__result", "(none yet)");
    body.append(element("p", "tool-card__label", "Arguments"), argsBlock, this.resultLabel, this.result);
    this.el.append(summary, body);
    this.setArguments(call.arguments);
    this.setState("running");
  }

  setArguments(args) {
    if (args === undefined) {
      this.argsCode.textContent = "(not recorded)";
      return;
    }
    this.argsCode.textContent = JSON.stringify(args, null, 2);
    this.preview.textContent = argumentPreview(args);
  }

  setState(state) {
    this.el.dataset.state = state;
    this.status.textContent = TOOL_STATUS[state] ?? state;
  }

  finish(state, resultText, errorText = "") {
    this.setState(state);
    this.result.textContent = resultText || "(empty)";
    if (errorText && !this.result.textContent.includes(errorText)) {
      this.result.textContent += `\n${errorText}`;
    }
  }
}

/** The blocks of one request and where its next delta goes. */
class Turn {
  constructor(requestId) {
    this.requestId = requestId;
    this.el = element("div", "turn");
    this.text = null;
    this.reasoning = null;
    this.callText = null;
    this.callReasoning = null;
    this.cards = new Map();
    /** The user message this request answers, when known (for Retry). */
    this.prompt = null;
    this.segments = [];
    this.usage = null;
    this.meta = null;
    /** When the answer was written, for a turn rebuilt from history. */
    this.endedAt = null;
  }

  /** The answer's Markdown: every text block of the request, in order. */
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
   */
  /**
   * @param {HTMLElement} root The scrolling log element.
   * @param {import("./widgets.js").ReplyWidgets} widgets
   * @param {HTMLElement} emptyHint Shown while there is nothing to show.
   * @param {{onUsage?: (usage: object) => void}} hooks `onUsage` gets each live model
   *   call's token usage.
   */
  constructor(root, widgets, emptyHint, { onUsage = () => {} } = {}) {
    this.root = root;
    this.widgets = widgets;
    this.emptyHint = emptyHint;
    this.onUsage = onUsage;
    this.current = null;
  }

  clear() {
    this.root.replaceChildren();
    this.widgets.reset();
    this.current = null;
    this.updateEmptyHint();
  }

  /**
   * Render the persisted messages of the `session` frame; returns the token usage they
   * carry, summed (null when none does).
   */
  renderHistory(messages) {
    let turn = null;
    let prompt = null;
    let total = null;
    const finished = [];
    for (const message of messages ?? []) {
      const at = parseTime(message.created_at);
      switch (message.role) {
        case "user":
          if (message.steering && turn !== null) {
            this.addUserMessage(message.content, { steer: true, turn, at });
            break;
          }
          turn = null;
          prompt = contentText(message.content);
          this.addUserMessage(message.content, { at });
          break;
        case "assistant":
          if (turn === null) {
            turn = this.appendTurn(null);
            turn.prompt = prompt;
            finished.push(turn);
          }
          this.renderAssistantMessage(turn, message);
          turn.usage = addUsage(turn.usage, message.usage);
          total = addUsage(total, message.usage);
          turn.endedAt = at ?? turn.endedAt;
          break;
        case "tool": {
          if (turn === null) {
            turn = this.appendTurn(null);
            turn.prompt = prompt;
            finished.push(turn);
          }
          const card = this.cardFor(turn, { id: message.tool_call_id, name: message.name });
          card.finish(message.success === false ? "failed" : "done", contentText(message.content));
          break;
        }
        case "agent":
          this.addNote(`Instruction to the agent: ${contentText(message.content)}`, "muted", turn);
          break;
        default:
          break;
      }
    }
    for (const done of finished) {
      this.showAnswerMeta(done, done.endedAt ?? null);
    }
    this.scrollToEnd();
    return total;
  }

  /** A user's message (or, with `steer`, a steer inside `turn`), sent at `at`. */
  addUserMessage(content, { steer = false, turn = null, at = null } = {}) {
    const bubble = element("div", steer ? "msg msg--user msg--steer" : "msg msg--user");
    const head = element("p", "msg__head");
    head.append(element("span", "msg__label", steer ? "You steered" : "You"));
    if (at !== null) {
      head.append(timeElement(at, "msg__time"));
    }
    bubble.append(head, element("div", "msg__body", contentText(content)));
    this.append(bubble, turn?.el ?? this.root);
    return bubble;
  }

  /** Remove a message shown before the server took it (it refused it). */
  retractUserMessage(bubble) {
    bubble.remove();
    const turn = this.current;
    if (turn !== null && turn.el.childElementCount === 0 && turn.requestId === null) {
      turn.el.remove();
      this.current = null;
    }
    this.updateEmptyHint();
  }

  addNote(text, tone = "info", turn = this.current) {
    const note = element("p", `note note--${tone}`, text);
    this.append(note, turn?.el ?? this.root);
    return note;
  }

  /**
   * Show that a request is under way before its first event arrives. `prompt` is the
   * message it answers, when this page knows it.
   */
  beginRequest(requestId = null, { prompt = null } = {}) {
    if (this.current === null || (this.current.requestId !== null && this.current.requestId !== requestId)) {
      this.current = this.appendTurn(requestId);
    }
    this.current.requestId ??= requestId;
    this.current.prompt ??= prompt;
    this.current.el.classList.add("is-running");
    this.current.el.setAttribute("aria-busy", "true");
    return this.current;
  }

  /**
   * Close the current request: streaming stops, open widgets expire, the answer gets its
   * footer. With `stopped`, text cut off mid-stream is rendered as finished Markdown.
   * Returns the turn that was closed (or null).
   */
  endRequest({ stopped = false } = {}) {
    const turn = this.current;
    this.current = null;
    this.widgets.expireOpen();
    if (turn === null) {
      return null;
    }
    for (const segment of turn.segments) {
      if (segment.streaming || (stopped && !segment.final)) {
        segment.finish({ stopped });
      }
    }
    turn.el.classList.remove("is-running");
    turn.el.removeAttribute("aria-busy");
    this.showAnswerMeta(turn, new Date());
    return turn;
  }

  /** The footer of a finished answer: copy it, when it was written, what it cost. */
  showAnswerMeta(turn, at) {
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
    turn.meta?.remove();
    turn.meta = meta;
    this.append(meta, turn.el);
  }

  /** Apply one `agent_event` (SPEC A10 event dict) of request `requestId`. */
  handleEvent(requestId, event) {
    const turn = this.beginRequest(requestId);
    switch (event.type) {
      case "model_started":
        turn.text = turn.reasoning = turn.callText = turn.callReasoning = null;
        break;
      case "reasoning_started":
        turn.reasoning = this.openReasoning(turn);
        break;
      case "reasoning_delta":
        if (event.delta) {
          (turn.reasoning ??= this.openReasoning(turn)).append(event.delta);
        }
        break;
      case "reasoning_completed":
        turn.reasoning = null;
        break;
      case "content_started":
        turn.text = this.openText(turn);
        break;
      case "text_delta":
        if (event.delta) {
          (turn.text ??= this.openText(turn)).append(event.delta);
        }
        break;
      case "content_completed":
        turn.text?.finish();
        turn.text = null;
        break;
      case "model_completed":
        this.settleModelCall(turn, event.response?.message);
        this.countUsage(turn, event.response?.usage);
        break;
      case "model_stopped":
        this.settleModelCall(turn, event.message ?? event.response?.message);
        this.countUsage(turn, event.response?.usage);
        this.addNote(this.cutOffText(event.stop), "warning", turn);
        break;
      case "tool_started":
        for (const call of event.tool_calls ?? []) {
          this.cardFor(turn, call).setState("running");
          this.widgets.answeredElsewhere(call.id);
        }
        break;
      case "tool_completed":
      case "tool_failed":
      case "tool_skipped":
        this.finishTool(turn, event);
        break;
      case "server_tool_started": {
        const call = event.server_tool_call ?? {};
        this.cardFor(turn, { id: call.id, name: call.name, arguments: call.input }, "Server tool");
        break;
      }
      case "server_tool_completed":
      case "server_tool_failed": {
        const result = event.server_tool_result ?? {};
        const card = this.cardFor(turn, { id: result.call_id, name: result.name }, "Server tool");
        const failed = event.type === "server_tool_failed";
        card.finish(failed ? "failed" : "done", contentText(result.output ?? ""), result.error ?? "");
        break;
      }
      case "steering_started":
        turn.text?.finish();
        turn.text = null;
        this.addUserMessage(event.steering_message?.content ?? "", { steer: true, turn });
        break;
      case "compaction_completed":
        if (event.applied) {
          this.addNote("Earlier messages were summarised to fit the model's context.", "muted", turn);
        }
        break;
      case "custom":
        this.handleCustom(turn, event);
        break;
      case "run_completed":
        turn.text?.finish();
        break;
      default:
        break;
    }
  }

  handleCustom(turn, event) {
    const payload = event.payload ?? {};
    let widget = null;
    if (event.name === "ask_user") {
      widget = this.widgets.askUser(payload);
    } else if (event.name === "approval_requested") {
      widget = this.widgets.approval(payload);
    }
    if (widget === null) {
      return;
    }
    // The question comes from the tool's before_tool hook, ahead of TOOL_STARTED: open the
    // call's card now so the widget sits under the card it belongs to.
    const call =
      event.name === "ask_user"
        ? { id: payload.tool_call_id, name: "ask_user", arguments: askUserArguments(payload) }
        : { id: payload.tool_call_id, name: payload.tool, arguments: payload.arguments };
    this.cardFor(turn, call).setState("waiting");
    this.append(widget, turn.el);
    widget.scrollIntoView({ block: "nearest" });
    // The agent is blocked on this answer: take the keyboard there, unless the user is in
    // the middle of typing something else. An approval gets focus on the widget itself, not
    // on its Approve button, so a stray Enter cannot consent to anything.
    const active = document.activeElement;
    const idle = active === document.body || (active?.id === "composer-input" && !active.value);
    if (idle) {
      const target =
        event.name === "approval_requested" ? widget : widget.querySelector("textarea, input, button");
      target?.focus({ preventScroll: true });
    }
  }

  finishTool(turn, event) {
    const message = event.message ?? {};
    const state = { tool_completed: "done", tool_failed: "failed", tool_skipped: "skipped" }[event.type];
    const calls = event.tool_calls?.length ? event.tool_calls : [{ id: message.tool_call_id, name: message.name }];
    const errorText = event.error ? `${event.error.type}: ${event.error.message}` : "";
    for (const call of calls) {
      this.cardFor(turn, call).finish(state, contentText(message.content), errorText);
    }
  }

  /** Make the finished model call's text match its final message (deltas are display only). */
  settleModelCall(turn, message) {
    if (!message) {
      return;
    }
    if (message.reasoning) {
      (turn.callReasoning ?? this.openReasoning(turn)).set(message.reasoning);
    }
    if (message.content) {
      (turn.callText ?? this.openText(turn)).set(contentText(message.content));
    }
    if (turn.callText) {
      turn.callText.final = true;
      turn.callText.finish();
    }
    turn.text = turn.reasoning = null;
  }

  countUsage(turn, usage) {
    if (usage) {
      turn.usage = addUsage(turn.usage, usage);
      this.onUsage(usage);
    }
  }

  cutOffText(stop) {
    const reason = STOP_REASONS[stop?.reason] ?? STOP_REASONS.other;
    const detail = stop?.detail ? `: ${stop.detail}` : "";
    return `The answer was cut off (${reason}${detail}).`;
  }

  /** A stored answer; `partial` (stopped by the user) and `stop_reason` when present. */
  renderAssistantMessage(turn, message) {
    if (message.reasoning) {
      this.openReasoning(turn).set(message.reasoning);
    }
    const text = contentText(message.content);
    if (text) {
      const segment = this.openText(turn);
      segment.set(text);
      segment.final = !message.partial;
      segment.finish({ stopped: Boolean(message.partial) });
    }
    for (const call of message.tool_calls ?? []) {
      this.cardFor(turn, call).setState("unanswered");
    }
    if (message.stop_reason) {
      this.addNote(this.cutOffText({ reason: message.stop_reason }), "warning", turn);
    } else if (message.partial) {
      this.addNote("Stopped.", "muted", turn);
    }
    turn.callText = turn.callReasoning = null;
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

  cardFor(turn, call, label = "Tool") {
    let card = call.id ? turn.cards.get(call.id) : undefined;
    if (card === undefined) {
      card = new ToolCard(call, { label });
      if (call.id) {
        turn.cards.set(call.id, card);
      }
      this.append(card.el, turn.el);
    } else if (call.arguments !== undefined) {
      card.setArguments(call.arguments);
    }
    return card;
  }

  appendTurn(requestId) {
    const turn = new Turn(requestId);
    this.append(turn.el, this.root);
    return turn;
  }

  append(node, parent) {
    this.keepPinned(() => parent.append(node));
    this.updateEmptyHint();
  }

  /** Run `change`; if the user was reading the end before, keep the end in view after. */
  keepPinned(change) {
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
    this.emptyHint.hidden = this.root.childElementCount > 0;
  }
}
