/**
 * Answering a turn again: Regenerate under every answer, Edit on every message you sent.
 *
 * Both make a new version of that turn (docs/protocol.md: `regenerate`, `edit`, with the
 * `position` of the turn's message): the server keeps the old version (`switcher.js`
 * goes back to it) and starts a run whose `run_started` says from which position the page
 * drops what it shows (`superseded_from`). So nothing changes on the page until that frame
 * arrives; if the server refuses (busy, too large), the editor opens again with the text
 * in it.
 *
 * The buttons are offered only while nothing runs (`refresh`): on each message the server
 * has stored, and on the footer of the turn that answers it; the last ones are named so.
 */
import { element } from "./blocks.js";

const MAX_CONTENT_BYTES = 32 * 1024;

/** The position of a stored message's bubble (null: not known). */
function positionOf(bubble) {
  const position = Number(bubble.dataset.position);
  return Number.isInteger(position) ? position : null;
}

function actionButton(label, accessibleName, action, last) {
  const button = element("button", "button button--quiet button--small last-action", label);
  button.type = "button";
  button.dataset.action = action;
  button.dataset.last = String(last);
  button.setAttribute("aria-label", accessibleName);
  return button;
}

export class LastTurnActions {
  /**
   * @param {import("./transcript.js").Transcript} transcript
   * @param {{regenerate: (position: number | null) => boolean,
   *   edit: (content: string, position: number | null) => boolean}} send Each sends its
   *   frame for the turn at `position`; false when it could not be sent.
   */
  constructor(transcript, { regenerate, edit }) {
    this.transcript = transcript;
    this.regenerate = regenerate;
    this.edit = edit;
    /** The open editor: `{bubble, form, input, hint, sending}`, or null. */
    this.editor = null;
    /** The Regenerate button whose frame is on its way. */
    this.pending = null;
    this.enabled = false;
  }

  /**
   * Offer the actions (when `enabled`) on every stored message and the answer to it.
   * Buttons already in their place stay (so one that has the keyboard keeps it).
   */
  refresh(enabled) {
    this.enabled = enabled;
    if (this.editor !== null && !this.editor.sending && (!enabled || !this.editor.bubble.isConnected)) {
      this.closeEditor({ focus: false });
    }
    const targets = enabled && this.editor === null ? this.targets() : [];
    const wanted = new Map();
    for (const target of targets) {
      wanted.set(target.bubble, { action: "edit", ...target });
      if (target.meta) {
        wanted.set(target.meta, { action: "regenerate", ...target });
      }
    }
    for (const button of this.transcript.root.querySelectorAll(".last-action")) {
      const host = button.closest(".msg--user, .turn__meta");
      const want = wanted.get(host);
      if (!button.disabled && (!want || want.action !== button.dataset.action || String(want.last) !== button.dataset.last)) {
        button.remove();
      }
    }
    for (const { bubble, meta, last } of targets) {
      if (!bubble.querySelector('.last-action[data-action="edit"]')) {
        const name = last ? "Edit your last message" : "Edit this message";
        const edit = actionButton("Edit", name, "edit", last);
        edit.addEventListener("click", () => this.openEditor(bubble));
        bubble.querySelector(".msg__head").append(edit);
      }
      if (meta && !meta.querySelector('.last-action[data-action="regenerate"]')) {
        const name = last ? "Regenerate the last answer" : "Regenerate this answer";
        const again = actionButton("Regenerate", name, "regenerate", last);
        again.title = "Answer the same message again";
        again.addEventListener("click", () => {
          if (this.regenerate(positionOf(bubble))) {
            again.disabled = true;
            again.textContent = "Regenerating…";
            this.pending = again;
          }
        });
        meta.append(again);
      }
    }
  }

  /**
   * Each message this page may edit (`bubble`: stored, so it has its position), the
   * footer of the answer after it (`meta`, when it has one), and whether it is the last.
   */
  targets() {
    const targets = [];
    for (const node of this.transcript.items) {
      if (node.matches(".msg--user")) {
        if (!node.dataset.pending && node.dataset.position !== undefined) {
          targets.push({ bubble: node, meta: null, last: false });
        }
      } else if (node.matches(".turn") && targets.length) {
        targets.at(-1).meta = node.querySelector(".turn__meta") ?? targets.at(-1).meta;
      }
    }
    if (targets.length) {
      targets.at(-1).last = true;
    }
    return targets;
  }

  openEditor(bubble) {
    const body = bubble.querySelector(".msg__body");
    const form = element("form", "msg__editor");
    const input = element("textarea", "msg__editor-input");
    input.id = `edit-${Date.now()}`;
    input.rows = 3;
    input.value = body.textContent;
    const label = element("label", "visually-hidden", "Edit your message");
    label.htmlFor = input.id;
    const hint = element("p", "msg__editor-hint muted");
    hint.setAttribute("aria-live", "polite");
    const cancel = element("button", "button button--quiet button--small", "Cancel");
    cancel.type = "button";
    const save = element("button", "button button--primary button--small", "Send");
    save.type = "submit";
    const actions = element("div", "msg__editor-actions");
    actions.append(hint, cancel, save);
    form.append(label, input, actions);
    bubble.dataset.editing = "true";
    body.after(form);
    this.editor = { bubble, form, input, hint, sending: false };
    for (const button of this.transcript.root.querySelectorAll(".last-action")) {
      button.remove();
    }

    input.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        form.requestSubmit();
      } else if (event.key === "Escape" && !event.isComposing) {
        event.preventDefault();
        this.closeEditor();
      }
    });
    cancel.addEventListener("click", () => this.closeEditor());
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.submit();
    });
    input.focus();
    input.setSelectionRange(input.value.length, input.value.length);
  }

  submit() {
    const editor = this.editor;
    if (editor === null || editor.sending) {
      return;
    }
    const content = editor.input.value;
    if (!content.trim()) {
      editor.hint.textContent = "Type a message first.";
      return;
    }
    const bytes = new TextEncoder().encode(content).length;
    if (bytes > MAX_CONTENT_BYTES) {
      editor.hint.textContent = `This is ${Math.ceil(bytes / 1024)} KiB; the limit is 32 KiB.`;
      return;
    }
    if (!this.edit(content, positionOf(editor.bubble))) {
      editor.hint.textContent = "Not connected; try again when the connection is back.";
      return;
    }
    editor.sending = true;
    editor.hint.textContent = "Sending…";
    for (const control of editor.form.querySelectorAll("textarea, button")) {
      control.disabled = true;
    }
  }

  /**
   * The server refused the regenerate or the edit: the button works again; the editor
   * takes input again, with the text in it.
   */
  refused() {
    if (this.pending) {
      this.pending.disabled = false;
      this.pending.textContent = "Regenerate";
      this.pending = null;
    }
    const editor = this.editor;
    if (editor === null) {
      return;
    }
    editor.sending = false;
    for (const control of editor.form.querySelectorAll("textarea, button")) {
      control.disabled = false;
    }
    editor.hint.textContent = "Not sent; your text is still here.";
    editor.input.focus();
  }

  /** The replacing run started: the edited message is gone from the page with its editor. */
  replaced() {
    this.editor = null;
    this.pending = null;
  }

  closeEditor({ focus = true } = {}) {
    const editor = this.editor;
    if (editor === null) {
      return;
    }
    this.editor = null;
    editor.form.remove();
    delete editor.bubble.dataset.editing;
    this.refresh(this.enabled);
    if (focus) {
      editor.bubble.querySelector(".last-action")?.focus();
    }
  }
}
