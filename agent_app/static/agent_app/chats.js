/**
 * Renaming and deleting chats, on the list page's rows and in the chat page's top bar.
 *
 * Rename edits the title in place (Enter saves, Escape cancels); Delete asks first, in a
 * modal `<dialog>` whose default button is Cancel. Both post to `agent_app.views` (`rename`,
 * `delete`) with the page's CSRF token and read the JSON answer; a title always reaches the
 * page as text. Without this script Delete still works: its link opens a confirmation page.
 */
import { element } from "./blocks.js";

const MAX_TITLE_LENGTH = 200;

function csrfToken() {
  return document.querySelector('meta[name="csrf-token"]')?.content ?? "";
}

/** POST `fields` to `url`; the JSON answer, or an Error whose message is for people. */
export async function post(url, fields) {
  let response;
  try {
    response = await fetch(url, {
      method: "POST",
      headers: { Accept: "application/json", "X-CSRFToken": csrfToken() },
      body: new URLSearchParams(fields),
      credentials: "same-origin",
    });
  } catch {
    throw new Error("The server could not be reached. Try again in a moment.");
  }
  let data = {};
  try {
    data = await response.json();
  } catch {
    data = {};
  }
  if (!response.ok) {
    const fallback = response.status === 404 ? "This chat does not exist any more." : "The server refused that.";
    throw new Error(typeof data.error === "string" ? data.error : fallback);
  }
  return data;
}

/**
 * Edit a title in place: `shown` (the element showing the title) is hidden while a small
 * form after it takes the new title. `onRenamed(title)` gets the title the server stored;
 * `onClose()` runs when the form goes (saved or not), to put the keyboard back.
 */
export function renameInline({ shown, current, url, onRenamed, onClose = () => {} }) {
  const form = element("form", "rename");
  const inputId = `rename-${Date.now()}`;
  const label = element("label", "visually-hidden", "New title");
  label.htmlFor = inputId;
  const input = element("input", "rename__input");
  input.id = inputId;
  input.type = "text";
  input.maxLength = MAX_TITLE_LENGTH;
  input.value = current;
  input.required = true;
  const save = element("button", "button button--primary button--small", "Save");
  save.type = "submit";
  const cancel = element("button", "button button--quiet button--small", "Cancel");
  cancel.type = "button";
  const status = element("p", "rename__status");
  status.setAttribute("role", "status");
  form.append(label, input, save, cancel, status);
  shown.hidden = true;
  shown.after(form);
  input.focus();
  input.select();

  const close = () => {
    form.remove();
    shown.hidden = false;
    onClose();
  };
  cancel.addEventListener("click", close);
  input.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && !event.isComposing) {
      event.preventDefault();
      event.stopPropagation();
      close();
    }
  });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const title = input.value.split(/\s+/).filter(Boolean).join(" ");
    if (!title) {
      status.textContent = "A title needs at least one character.";
      return;
    }
    for (const control of [input, save, cancel]) {
      control.disabled = true;
    }
    status.textContent = "Saving…";
    try {
      const answer = await post(url, { title });
      onRenamed(String(answer.title ?? title));
      close();
    } catch (error) {
      status.textContent = error.message;
      for (const control of [input, save, cancel]) {
        control.disabled = false;
      }
      input.focus();
    }
  });
}

/** What deleting a chat whose answer waits for a reply does first. */
export const STOPS_WAITING_RUN =
  "Its answer is waiting for your reply: the question is cancelled and the answer stopped first.";

/**
 * Ask before deleting the chat `title`; on Delete, post to `url` and call
 * `onDeleted(answer)`. `onClose()` runs when the dialog closes without deleting.
 * `waiting`: the chat's answer waits for a reply (it is stopped first, and the dialog says so).
 */
export function confirmDelete({ title, url, onDeleted, onClose = () => {}, waiting = false }) {
  const dialog = element("dialog", "dialog");
  const headingId = `delete-heading-${Date.now()}`;
  dialog.setAttribute("aria-labelledby", headingId);
  const heading = element("h2", "dialog__title", "Delete this chat?");
  heading.id = headingId;
  const text = element(
    "p",
    "",
    `“${title}” and everything in it — your messages, the answers, and the record of your replies — ` +
      "are deleted for good. Notes the agent saved for you stay.",
  );
  const error = element("p", "dialog__error");
  error.setAttribute("role", "alert");
  const remove = element("button", "button button--danger", "Delete");
  remove.type = "button";
  const cancel = element("button", "button", "Cancel");
  cancel.type = "button";
  const actions = element("div", "dialog__actions");
  actions.append(cancel, remove);
  dialog.append(heading, text);
  if (waiting) {
    dialog.append(element("p", "dialog__note", STOPS_WAITING_RUN));
  }
  dialog.append(error, actions);
  // Inside zett's root: its styles and colours are scoped there (chat.css).
  (document.querySelector("[data-zett-root]") ?? document.body).append(dialog);

  let deleted = false;
  dialog.addEventListener("close", () => {
    dialog.remove();
    if (!deleted) {
      onClose();
    }
  });
  cancel.addEventListener("click", () => dialog.close());
  remove.addEventListener("click", async () => {
    remove.disabled = cancel.disabled = true;
    remove.textContent = "Deleting…";
    error.textContent = "";
    try {
      const answer = await post(url, {});
      deleted = true;
      dialog.close();
      onDeleted(answer);
    } catch (failure) {
      error.textContent = failure.message;
      remove.disabled = cancel.disabled = false;
      remove.textContent = "Delete";
      cancel.focus();
    }
  });
  dialog.showModal();
  cancel.focus();
}
