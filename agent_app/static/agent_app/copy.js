/**
 * Copy buttons: for a code block and for a whole answer.
 *
 * The text is read when the button is pressed, so a button made while an answer streams
 * copies what is there by then. Copying uses the Clipboard API; where the page is not in a
 * secure context (plain HTTP on another host), the older `execCommand("copy")` on a hidden
 * text area does the job instead. The outcome is shown on the button for a moment
 * ("Copied" or "Copy failed") and announced through the page's status region.
 */

const CONFIRM_MS = 2000;
const READY_TEXT = "Copy";

/**
 * A button that copies `getText()`.
 * @param {string} label Its accessible name, e.g. "Copy code".
 * @param {() => string} getText
 */
export function copyButton(label, getText) {
  const button = document.createElement("button");
  button.type = "button";
  button.className = "button button--quiet button--small copy-button";
  button.textContent = READY_TEXT;
  button.setAttribute("aria-label", label);
  button.addEventListener("click", async () => {
    const copied = await writeClipboard(getText());
    showOutcome(button, label, copied);
  });
  return button;
}

async function writeClipboard(text) {
  if (navigator.clipboard?.writeText) {
    try {
      await navigator.clipboard.writeText(text);
      return true;
    } catch {
      // Refused (no permission, page not focused): try the fallback below.
    }
  }
  return copyWithTextArea(text);
}

/** The focused element, inside shadow roots too (a widget's button, not the widget). */
function focusedElement() {
  let active = document.activeElement;
  while (active?.shadowRoot?.activeElement) {
    active = active.shadowRoot.activeElement;
  }
  return active;
}

function copyWithTextArea(text) {
  const previous = focusedElement();
  const area = document.createElement("textarea");
  area.value = text;
  area.readOnly = true;
  area.className = "visually-hidden";
  // Inside zett's root, where .visually-hidden is styled (chat.css is scoped there).
  (document.querySelector("[data-zett-root]") ?? document.body).append(area);
  area.select();
  let copied = false;
  try {
    copied = document.execCommand("copy");
  } catch {
    copied = false;
  }
  area.remove();
  previous?.focus?.({ preventScroll: true });
  return copied;
}

function showOutcome(button, label, copied) {
  const text = copied ? "Copied" : "Copy failed";
  clearTimeout(Number(button.dataset.resetTimer));
  button.textContent = text;
  button.dataset.outcome = copied ? "copied" : "failed";
  button.setAttribute("aria-label", text);
  announce(copied ? "Copied to the clipboard." : "Could not copy to the clipboard.", button);
  const timer = setTimeout(() => {
    button.textContent = READY_TEXT;
    button.setAttribute("aria-label", label);
    delete button.dataset.outcome;
  }, CONFIRM_MS);
  button.dataset.resetTimer = String(timer);
}

/**
 * Say `text` through the polite status region of the chat `from` is in (its
 * `[data-part=announcer]`), else the page's `#announcer`, if it has one.
 */
export function announce(text, from = null) {
  const chat = from?.closest?.("[data-zett-root]") ?? null;
  const region = chat?.querySelector('[data-part="announcer"]') ?? document.getElementById("announcer");
  if (!region) {
    return;
  }
  // Clearing first makes a screen reader repeat a message that is the same as the last.
  region.textContent = "";
  requestAnimationFrame(() => {
    region.textContent = text;
  });
}
