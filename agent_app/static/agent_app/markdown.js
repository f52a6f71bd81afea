/**
 * Model text to safe HTML: marked parses the Markdown, DOMPurify sanitises the result.
 *
 * Two fences, because model output is untrusted. First, the renderer turns any HTML the
 * model wrote into escaped text, so it is shown, never parsed. Second, every string that
 * reaches `innerHTML` has been through DOMPurify. Images become plain links: an <img> would
 * make the browser fetch a URL the model chose, as soon as the text is shown.
 */
import { Marked } from "./vendor/marked/marked.esm.js";
import DOMPurify from "./vendor/dompurify/purify.es.mjs";

const ENTITIES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

export function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (ch) => ENTITIES[ch]);
}

const markdown = new Marked({
  gfm: true,
  renderer: {
    html({ text }) {
      return escapeHtml(text);
    },
    image({ href, text }) {
      const label = text ? `Image: ${text}` : "Image";
      return `<a href="${escapeHtml(href)}">${escapeHtml(label)}</a>`;
    },
  },
});

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A" && node.hasAttribute("href")) {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer nofollow");
  }
});

const SANITIZE_OPTIONS = {
  USE_PROFILE: { html: true },
  FORBID_TAGS: ["style", "form", "img", "video", "audio", "iframe"],
};

/** Sanitised HTML for a Markdown string. */
export function renderMarkdown(text) {
  return DOMPurify.sanitize(markdown.parse(text, { async: false }), SANITIZE_OPTIONS);
}
