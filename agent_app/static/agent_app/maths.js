/**
 * Maths in answers: `$…$` inline, `$$…$$` on a line of its own (or inline, shown as a
 * display), typeset by KaTeX.
 *
 * In two steps, so that nothing the model wrote is ever parsed as HTML:
 * 1. While Markdown is parsed (`markdown.js`), the marked extensions below take each
 *    formula out of the Markdown (so `_` and `*` inside it are not emphasis) and leave a
 *    placeholder, `<span data-math="inline">` or `<div data-math="display">`, holding the
 *    TeX as escaped text. DOMPurify then sanitises the HTML as always.
 * 2. Once that HTML is in the page, `typesetMaths` hands each placeholder's text to
 *    `katex.render`, which builds the formula's DOM itself (no HTML string, no `eval`;
 *    its sizes are set through `element.style`, which a `style-src 'self'` policy allows)
 *    with `trust: false`, so `\href`, `\url`, `\includegraphics` and `\html…` are refused.
 *    A formula KaTeX cannot read stays its source text.
 *
 * This module is itself fetched (`markdown.js`) the first time a text holds a `$`, and
 * KaTeX (270 KB of script, its stylesheet and fonts) only when an answer holds a formula
 * (a dynamic `import()`): a page without maths fetches neither.
 *
 * Prices are not maths: as in Pandoc, an opening `$` must be followed by a non-space and a
 * closing one preceded by a non-space and not followed by a digit, so "$5 and $10" is
 * text. `\$` is a dollar sign.
 */

const KATEX_SCRIPT = "vendor/katex/katex.min.js";
const KATEX_STYLES = "vendor/katex/katex.min.css";

/** Inline `$…$` (or `$$…$$` inside a paragraph). */
const INLINE = /^\$\$(?!\$)((?:\\[\s\S]|[^\\$])+?)\$\$|^\$(?![\s$])((?:\\[\s\S]|[^\\$\n])*?[^\\\s$])\$(?!\d)/;
/** `$$…$$` as a block of its own (it may span lines). */
const BLOCK = /^ {0,3}\$\$(?!\$)((?:\\[\s\S]|[^\\$])+?)\$\$ *(?:\n+|$)/;

const ENTITIES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

function escapeText(text) {
  return String(text).replace(/[&<>"']/g, (ch) => ENTITIES[ch]);
}

/** The marked extensions that turn formulas into placeholders (`marked.use(...)`). */
export const mathExtensions = {
  extensions: [
    {
      name: "mathBlock",
      level: "block",
      start: (src) => src.match(/^ {0,3}\$\$/m)?.index,
      tokenizer(src) {
        const match = BLOCK.exec(src);
        return match ? { type: "mathBlock", raw: match[0], text: match[1].trim() } : undefined;
      },
      renderer: (token) => `<div class="math math--display" data-math="display">${escapeText(token.text)}</div>\n`,
    },
    {
      name: "math",
      level: "inline",
      start: (src) => src.indexOf("$") >= 0 ? src.indexOf("$") : undefined,
      tokenizer(src) {
        const match = INLINE.exec(src);
        if (!match) {
          return undefined;
        }
        const display = match[1] !== undefined;
        return { type: "math", raw: match[0], text: (display ? match[1] : match[2]).trim(), display };
      },
      renderer: (token) =>
        `<span class="math" data-math="${token.display ? "display" : "inline"}">${escapeText(token.text)}</span>`,
    },
  ],
};

let katexPromise = null;

/** KaTeX and its stylesheet, loaded once. Its build is a UMD script: run as a module it
 * leaves `katex` on the global object, which is taken and put back as it was. */
function loadKatex() {
  katexPromise ??= (async () => {
    const before = Object.getOwnPropertyDescriptor(globalThis, "katex");
    await import(new URL(`./${KATEX_SCRIPT}`, import.meta.url).href);
    const katex = globalThis.katex;
    if (before) {
      Object.defineProperty(globalThis, "katex", before);
    } else {
      delete globalThis.katex;
    }
    if (typeof katex?.render !== "function") {
      throw new Error("KaTeX did not load");
    }
    return katex;
  })().catch((error) => {
    katexPromise = null; // tried again by the next formula
    throw error;
  });
  return katexPromise;
}

/** KaTeX's stylesheet in the document (its fonts load only from there) and, for a widget,
 * in its shadow root too. */
function addStyles(node) {
  const href = new URL(`./${KATEX_STYLES}`, import.meta.url).href;
  const shadow = node.getRootNode();
  for (const parent of new Set([document.head, shadow instanceof ShadowRoot ? shadow : null])) {
    if (parent && !parent.querySelector("link[data-zett-katex]")) {
      const link = document.createElement("link");
      link.rel = "stylesheet";
      link.href = href;
      link.dataset.zettKatex = "";
      parent.append(link);
    }
  }
}

const OPTIONS = {
  throwOnError: true,
  trust: false,
  strict: "ignore",
  maxSize: 20,
  maxExpand: 200,
  output: "htmlAndMathml",
};

function typesetOne(katex, node) {
  const source = node.textContent;
  try {
    katex.render(source, node, { ...OPTIONS, displayMode: node.dataset.math === "display" });
    node.dataset.math += "-done";
  } catch (error) {
    // Not TeX KaTeX can read: the source stays, said to be so (no inline style: CSP).
    node.textContent = source;
    node.classList.add("math--error");
    node.title = String(error?.message ?? error);
    node.dataset.math += "-done";
  }
}

/**
 * Typeset the formula placeholders inside `root` (already sanitised and in the page).
 * Nothing is loaded when there are none; otherwise KaTeX loads first (once) and the
 * placeholders in `root` *then* are typeset, so a re-render meanwhile is not missed.
 */
export function typesetMaths(root) {
  if (!root.querySelector('[data-math="inline"], [data-math="display"]')) {
    return;
  }
  loadKatex().then(
    (katex) => {
      addStyles(root);
      for (const node of root.querySelectorAll('[data-math="inline"], [data-math="display"]')) {
        typesetOne(katex, node);
      }
    },
    (error) => console.warn("Showing maths as text: KaTeX did not load.", error),
  );
}
