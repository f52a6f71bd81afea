/**
 * Dismissable notices above the conversation: how errors reach the user (never alert()).
 *
 * A notice with a `key` replaces an earlier one with the same key, so a repeated problem
 * (the link dropping again, say) shows once. The container is an aria-live region, so
 * screen readers announce a notice without moving focus.
 */

const MAX_NOTICES = 4;

/** What each `error` frame's `code` means to the user (docs/protocol.md). */
export const ERROR_TEXT = {
  bad_json: "The server could not read a message from this page.",
  bad_frame: "The server rejected a message from this page.",
  unknown_type: "The server did not understand a message from this page.",
  too_large: "That was too large for the server.",
  busy: "The agent is still answering. Wait for it, or press Stop.",
  not_running: "Nothing is running right now.",
  forbidden: "You may not use this chat.",
  unknown_assistant: "This chat's assistant does not exist.",
  rate_limited: "You are sending messages too quickly. Try again in a moment.",
  budget_exceeded: "You have used your token budget for today.",
  internal: "The server failed to handle a message from this page.",
};

export class Notices {
  /** @param {HTMLElement} container */
  constructor(container) {
    this.container = container;
  }

  /**
   * Show a notice.
   * @param {string} message What happened, in plain words.
   * @param {{tone?: "error"|"info", key?: string, detail?: string}} options
   */
  show(message, { tone = "error", key = null, detail = null } = {}) {
    if (key !== null) {
      this.dismiss(key);
    }
    const notice = document.createElement("div");
    notice.className = `notice notice--${tone}`;
    if (key !== null) {
      notice.dataset.key = key;
    }
    const text = document.createElement("p");
    text.className = "notice__text";
    text.textContent = message;
    if (detail) {
      const small = document.createElement("span");
      small.className = "notice__detail";
      small.textContent = ` ${detail}`;
      text.append(small);
    }
    const close = document.createElement("button");
    close.type = "button";
    close.className = "button button--quiet button--small notice__close";
    close.textContent = "Dismiss";
    close.setAttribute("aria-label", `Dismiss notice: ${message}`);
    close.addEventListener("click", () => notice.remove());
    notice.append(text, close);
    this.container.append(notice);
    while (this.container.children.length > MAX_NOTICES) {
      this.container.firstElementChild.remove();
    }
    return notice;
  }

  /** Remove the notice shown under `key`, if any. */
  dismiss(key) {
    for (const notice of this.container.querySelectorAll(".notice")) {
      if (notice.dataset.key === key) {
        notice.remove();
      }
    }
  }
}
