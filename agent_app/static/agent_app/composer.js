/**
 * What the composer checks before it sends, said as the text is typed (Send stays disabled
 * meanwhile), not after: the server's limit on a message (32 KiB of UTF-8) and a text of
 * only spaces. And its keys and buttons in a mounted chat (`bindComposer`).
 */
import { enterSends } from "./phone.js";

const MAX_CONTENT_BYTES = 32 * 1024;
const BLANK_HINT = "Only spaces: type a message to send.";

/**
 * Why the composer's text cannot be sent, for people ("" when it can; null when nothing
 * is typed, which needs no words): said as it is typed, with Send disabled, not after.
 * `withFiles`: uploaded files wait to be sent, and a message needs text to carry them.
 */
export function composerProblem(content, { withFiles = false } = {}) {
  if (content === "") {
    return withFiles ? "Type a message to send with the files." : null;
  }
  if (!content.trim()) {
    return BLANK_HINT;
  }
  // A UTF-16 unit is at most three UTF-8 bytes: a text under a third of the limit fits.
  if (content.length * 3 > MAX_CONTENT_BYTES) {
    const bytes = new TextEncoder().encode(content).length;
    if (bytes > MAX_CONTENT_BYTES) {
      return `This is ${Math.ceil(bytes / 1024)} KiB; the limit is 32 KiB. Shorten it to send.`;
    }
  }
  return "";
}

/**
 * The composer's keys and buttons in a mounted chat (`mount.js`): Send (a steer while a
 * run is live), Enter, the hint as the text changes, Stop, Reconnect, the starter prompts,
 * and Escape, which stops a live run. The third argument holds what they do (the mount's).
 */
export function bindComposer(
  root,
  ui,
  { problem, isRunning, sendMessage, steer, uploading, updateMode, stopRun, reconnect, keyboardTarget },
) {
  ui.composer.addEventListener("submit", (event) => {
    event.preventDefault();
    const content = ui.input.value;
    const why = problem();
    if (why !== "") {
      ui.hint.textContent = why ?? "";
      ui.input.focus();
      return;
    }
    if (uploading() && !isRunning()) {
      ui.hint.textContent = "Wait until the files are uploaded, then send.";
      return;
    }
    if (isRunning()) {
      if (steer(content)) {
        ui.input.value = "";
        updateMode();
      }
      return;
    }
    if (sendMessage(content)) {
      ui.input.value = "";
      ui.hint.textContent = "";
      updateMode();
    }
  });

  ui.input.addEventListener("keydown", (event) => {
    // On a touch screen Enter makes a new line: Send (or Steer) is the button (phone.js).
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing && enterSends()) {
      event.preventDefault();
      ui.composer.requestSubmit();
    }
  });

  ui.input.addEventListener("input", () => {
    ui.hint.textContent = problem() ?? "";
    updateMode();
  });

  ui.stop.addEventListener("click", stopRun);
  ui.retry.addEventListener("click", reconnect);

  // A new chat's starter prompts: each is sent as if typed, through the composer's checks.
  for (const starter of root.querySelectorAll("[data-prompt]")) {
    starter.addEventListener("click", () => {
      ui.input.value = starter.dataset.prompt;
      updateMode();
      ui.composer.requestSubmit();
      ui.input.focus({ preventScroll: true });
    });
  }

  /**
   * While an answer runs, Escape stops it, unless focus is in a reply widget, an editor or
   * a dialog (where Escape belongs to them), or a page's own handler took the key first.
   */
  keyboardTarget.addEventListener("keydown", (event) => {
    if (event.key !== "Escape" || event.isComposing || event.defaultPrevented) {
      return;
    }
    const target = event.composedPath()[0];
    const inWidget = target instanceof Element && target.closest(".widget, .rename, .msg__editor, dialog");
    if (isRunning() && !inWidget && !ui.stop.disabled) {
      event.preventDefault();
      stopRun();
    }
  });
}
