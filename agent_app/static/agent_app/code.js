/**
 * Fenced code blocks in rendered answers: syntax highlighting, a language label and a copy
 * button.
 *
 * Runs on HTML that `renderMarkdown` already sanitised and that is already in the page. It
 * reads each block's text (never its HTML), lets highlight.js turn that text into markup,
 * and passes the markup through DOMPurify once more, allowing only `<span class>`: so
 * DOMPurify stays the last step before anything reaches `innerHTML`, and highlighting adds
 * colour, never elements or attributes of its own choosing. A block whose language is not
 * named, or not one highlight.js knows, is shown as plain text in the same frame.
 *
 * A block wider than its frame scrolls sideways; such a block is made focusable, so the
 * keyboard can scroll it too (checked after each render and when the window is resized).
 */
import DOMPurify from "./vendor/dompurify/purify.es.mjs";
import hljs from "./vendor/highlight/highlight.min.js";
import { copyButton } from "./copy.js";

const HIGHLIGHT_SANITIZE = { ALLOWED_TAGS: ["span"], ALLOWED_ATTR: ["class"] };
const LANGUAGE_CLASS = /(?:^|\s)language-(\S+)/;
const MAX_LABEL = 24;

/** Decorate every `<pre><code>` under `root` that is not decorated yet. */
export function decorateCodeBlocks(root) {
  const tree = root.getRootNode();
  if (tree instanceof ShadowRoot) {
    shadowTrees.add(tree); // a widget's: the resize below looks there too
  }
  for (const code of root.querySelectorAll("pre > code")) {
    const pre = code.parentElement;
    if (pre.parentElement?.classList.contains("code-block")) {
      continue;
    }
    const language = LANGUAGE_CLASS.exec(code.className)?.[1] ?? "";
    highlight(code, language);
    wrap(pre, code, language);
    markScrollable(code);
  }
}

/** Let the keyboard reach (and so scroll) a code block exactly when it overflows. */
function markScrollable(code) {
  if (code.scrollWidth > code.clientWidth) {
    code.tabIndex = 0;
  } else {
    code.removeAttribute("tabindex");
  }
}

let resizeFrame = null;
/** The shadow roots (widgets) holding code blocks; the document's are found anyway. */
const shadowTrees = new Set();
window.addEventListener("resize", () => {
  if (resizeFrame === null) {
    resizeFrame = requestAnimationFrame(() => {
      resizeFrame = null;
      for (const tree of [document, ...shadowTrees]) {
        tree.querySelectorAll(".code-block pre > code").forEach(markScrollable);
      }
    });
  }
});

function highlight(code, language) {
  code.classList.add("hljs");
  if (!language || !hljs.getLanguage(language)) {
    return;
  }
  let value;
  try {
    ({ value } = hljs.highlight(code.textContent, { language, ignoreIllegals: true }));
  } catch (error) {
    console.warn("Showing a code block unhighlighted:", error);
    return;
  }
  code.innerHTML = DOMPurify.sanitize(value, HIGHLIGHT_SANITIZE);
}

/** Put `pre` in a frame under a bar with its language and a copy button. */
function wrap(pre, code, language) {
  const block = document.createElement("div");
  block.className = "code-block";
  const bar = document.createElement("div");
  bar.className = "code-block__bar";
  const label = document.createElement("span");
  label.className = "code-block__language";
  const name = language.length > MAX_LABEL ? `${language.slice(0, MAX_LABEL - 1)}…` : language;
  label.textContent = name || "text";
  const copyLabel = language ? `Copy ${name} code` : "Copy code";
  bar.append(label, copyButton(copyLabel, () => code.textContent));
  pre.before(block);
  block.append(bar, pre);
}
