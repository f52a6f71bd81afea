/**
 * The blocks a turn is made of: Markdown text, collapsed reasoning and tool cards.
 *
 * Every string from the server reaches the page as text (`textContent`), except Markdown,
 * which goes through `renderMarkdown` (marked, then DOMPurify) before it is inserted, or
 * is shown escaped (`plainHtml`) for the moment those two take to load.
 */
import { element } from "./dom.js";
import { lazyModule } from "./lazy.js";
import { markdownReady, plainHtml, renderMarkdown, typesetMaths } from "./markdown.js";

/** Code blocks' frames, highlighting and copy buttons (`code.js`): loaded for the first one. */
const code = lazyModule("code.js");

const PREVIEW_CHARS = 60;

const TOOL_STATUS = {
  running: "running…",
  waiting: "waiting for you",
  done: "done",
  failed: "failed",
  denied: "denied",
  expired: "not answered in time",
  skipped: "skipped",
  stopped: "stopped",
  unanswered: "no result",
};

export { element };

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

/**
 * A Markdown block that can grow delta by delta. While it streams, and once it was
 * stopped part way, it renders as unfinished text (open emphasis and code closed); once
 * its model call completed (`final`), exactly as written.
 */
export class TextSegment {
  /** @param {{keepPinned: (change: () => void) => void}} view */
  constructor(view) {
    this.view = view;
    this.source = "";
    this.frame = null;
    this.streaming = false;
    this.stopped = false;
    this.final = false;
    this.waiting = false;
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
    const html = renderMarkdown(this.source, { unfinished: this.streaming || this.stopped });
    if (html === null) {
      this.renderWhenReady();
    }
    this.view.keepPinned(() => {
      this.el.innerHTML = html ?? plainHtml(this.source);
      this.decorateCode();
      typesetMaths(this.el);
    });
  }

  /** Frame the code blocks (now if `code.js` is here, else once it is). */
  decorateCode() {
    if (this.el.querySelector("pre > code") === null) {
      return;
    }
    const loaded = code.now();
    if (loaded !== undefined) {
      loaded.decorateCodeBlocks(this.el);
      return;
    }
    code.get().then(
      ({ decorateCodeBlocks }) => this.view.keepPinned(() => decorateCodeBlocks(this.el)),
      () => {}, // plain blocks; the next render tries again
    );
  }

  /** Render again once Markdown can be rendered (the first message loads its libraries). */
  renderWhenReady() {
    if (!this.waiting) {
      this.waiting = true;
      markdownReady(this.source).then(
        () => {
          this.waiting = false;
          this.render();
        },
        () => {
          this.waiting = false; // stays plain; the next change tries the load again
        },
      );
    }
  }
}

/** Collapsed reasoning, shown as plain text. */
export class ReasoningSegment {
  constructor(view) {
    this.view = view;
    this.el = element("details", "reasoning");
    this.el.append(element("summary", "", "Reasoning"));
    this.body = element("div", "reasoning__body");
    this.el.append(this.body);
  }

  append(delta) {
    this.view.keepPinned(() => this.body.append(delta));
  }

  set(text) {
    if (text !== this.body.textContent) {
      this.body.textContent = text;
    }
  }

  finish() {}
}

/**
 * How a call that did not succeed ended when a person declined it: `denied` (the reply
 * said no), `expired` (no reply in time), else null (it failed). Read from the tool
 * result's `attributes.reply`, live and in history alike.
 */
export function declinedState(attributes) {
  const reply = attributes?.reply;
  if (!reply || typeof reply !== "object") {
    return null;
  }
  if (reply.expired === true) {
    return "expired";
  }
  return reply.approved === false ? "denied" : null;
}

/** A collapsible card for one tool call: arguments, then status and result. */
export class ToolCard {
  constructor(call, { label = "Tool" } = {}) {
    this.id = call.id ?? null;
    this.name = call.name || "tool";
    this.el = element("details", "tool-card");
    if (call.id) {
      this.el.dataset.toolCallId = call.id;
    }
    const summary = element("summary", "tool-card__summary");
    summary.append(element("span", "visually-hidden", `${label}: `));
    summary.append(element("span", "tool-card__name", this.name));
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
    this.arguments = undefined;
    this.setArguments(call.arguments);
    this.setState("running");
  }

  get state() {
    return this.el.dataset.state;
  }

  /** Whether the call has an outcome (a result, or it was stopped). */
  get settled() {
    return !["running", "waiting", "unanswered"].includes(this.state);
  }

  setArguments(args) {
    if (args === undefined || args === null) {
      if (this.arguments === undefined) {
        this.argsCode.textContent = "(not recorded)";
      }
      return;
    }
    this.arguments = args;
    this.argsCode.textContent = JSON.stringify(args, null, 2);
    this.preview.textContent = argumentPreview(args);
  }

  setState(state) {
    this.el.dataset.state = state;
    this.status.textContent = TOOL_STATUS[state] ?? state;
  }

  /** A running call's progress (a `tool_progress` event): a bar, and the newest line. */
  showProgress({ progress, total, message }) {
    if (this.settled) {
      return;
    }
    if (this.progress === undefined) {
      this.progress = element("progress", "tool-card__progress");
      this.progressText = element("span", "tool-card__progress-text");
      this.status.after(this.progress, this.progressText);
    }
    if (typeof progress === "number") {
      if (typeof total === "number" && total > 0) {
        this.progress.max = total;
        this.progress.value = Math.min(progress, total);
      } else {
        this.progress.removeAttribute("value"); // a total nobody knows: indeterminate
      }
      this.progress.setAttribute("aria-label", typeof total === "number" ? `${progress} of ${total}` : `${progress}`);
    }
    if (typeof message === "string") {
      this.progressText.textContent = message;
    }
  }

  finish(state, resultText, { errorText = "", truncated = false } = {}) {
    this.progress?.remove();
    this.progressText?.remove();
    this.setState(state);
    this.result.textContent = resultText || "(empty)";
    if (errorText && !this.result.textContent.includes(errorText)) {
      this.result.textContent += `\n${errorText}`;
    }
    this.resultLabel.textContent = truncated ? "Result (cut short here; the whole result is stored)" : "Result";
  }

  /** The run was stopped before this call had a result. */
  stop() {
    if (!this.settled) {
      this.setState("stopped");
      this.result.textContent = "Stopped before it finished.";
    }
  }
}
