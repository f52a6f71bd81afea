/**
 * A chat that is gone for good: deleted (close code 4410, here or in another tab). The
 * composer goes away (nothing typed there could be sent) and a plain panel says what
 * happened, with the way on (`listUrl`: your chats). Text still in the composer is kept
 * in the panel so nothing typed is lost without a word.
 */
import { element } from "./dom.js";

/** Close codes after which this chat cannot be used again, and what the page says. */
export const GONE_TEXT = {
  4410: "This chat was deleted.",
};

/**
 * Replace the composer with the "gone" panel, once. `ui` holds the mount's parts
 * (`composer`, `input`); `notices` loses the link's and the refusal's notices, which the
 * panel says better.
 */
export function showGone(ui, notices, code, { listUrl = null } = {}) {
  const text = GONE_TEXT[code];
  if (!text || ui.composer.dataset.gone) {
    return false;
  }
  ui.composer.dataset.gone = "true";
  const panel = element("div", "chat-gone");
  panel.setAttribute("role", "status");
  panel.append(element("p", "chat-gone__title", text));
  const typed = ui.input.value.trim();
  if (typed) {
    panel.append(element("p", "chat-gone__kept muted", "What you had typed, not sent:"));
    panel.append(element("blockquote", "chat-gone__text", typed));
  }
  if (listUrl) {
    const link = element("a", "button", "Go to your chats");
    link.href = listUrl;
    panel.append(link);
  }
  ui.composer.hidden = true;
  ui.composer.after(panel);
  notices.dismiss("link");
  notices.dismiss("error-forbidden");
  return true;
}
