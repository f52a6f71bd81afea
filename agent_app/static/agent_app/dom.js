/**
 * The one DOM helper every module shares. It lives alone so a page that only needs it
 * (the chat list) loads no Markdown, sanitiser or highlighter with it.
 */

/** A new `tag` element with `className` and, when given, `text` as its text. */
export function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) {
    node.className = className;
  }
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}
