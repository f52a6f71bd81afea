/**
 * Model text to safe HTML: marked parses the Markdown, DOMPurify sanitises the result.
 *
 * Two fences, because model output is untrusted. First, the renderer turns any HTML the
 * model wrote into escaped text, so it is shown, never parsed. Second, every string that
 * reaches `innerHTML` has been through DOMPurify. Images become plain links: an <img> would
 * make the browser fetch a URL the model chose, as soon as the text is shown.
 *
 * The two libraries are loaded when the first message needs them (`lazy.js`), so a page
 * that shows no message never fetches them. Until they are here, `renderMarkdown` answers
 * null and the caller shows the text plain (`plainHtml`), then renders again once
 * `markdownReady()` resolves: a few milliseconds on the first message, and the text stays
 * readable if the load fails.
 *
 * Text that is still streaming, or that was stopped part way, usually ends inside an open
 * construct: `*what is 12`, `**Saved`, a code fence or a code span without its end. Such
 * text is rendered as if the construct were closed (`closeUnfinished`), so the reader sees
 * emphasis and code, never the raw markers. Finished answers are rendered exactly as sent.
 */
import { Lazy, lazyModule, staticUrl } from "./lazy.js";

const ENTITIES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

export function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (ch) => ENTITIES[ch]);
}

/**
 * DOMPurify, from its minified build. That build is a UMD script, which run as a module
 * leaves the library on `globalThis.DOMPurify`: it is taken from there and the global is
 * put back as it was, so a host page's own DOMPurify (or none) is left alone.
 */
export const sanitizer = new Lazy(async () => {
  const before = Object.getOwnPropertyDescriptor(globalThis, "DOMPurify");
  await import(staticUrl("vendor/dompurify/purify.min.js"));
  const purify = globalThis.DOMPurify;
  if (before) {
    Object.defineProperty(globalThis, "DOMPurify", before);
  } else {
    delete globalThis.DOMPurify;
  }
  if (typeof purify?.sanitize !== "function") {
    throw new Error("DOMPurify did not load");
  }
  return purify;
});

const parser = lazyModule("vendor/marked/marked.esm.js");
const maths = lazyModule("maths.js"); // formulas: fetched for the first text with a `$`

const SANITIZE_OPTIONS = {
  USE_PROFILE: { html: true },
  FORBID_TAGS: ["style", "form", "img", "video", "audio", "iframe"],
};

/** marked set up to escape HTML and turn images into links; DOMPurify with its link hook. */
const renderer = new Lazy(async () => {
  const [{ Marked }, purify] = await Promise.all([parser.get(), sanitizer.get()]);
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
  purify.addHook("afterSanitizeAttributes", (node) => {
    if (node.tagName === "A" && node.hasAttribute("href")) {
      node.setAttribute("target", "_blank");
      node.setAttribute("rel", "noopener noreferrer nofollow");
    }
  });
  const render = (source) => purify.sanitize(markdown.parse(source, { async: false }), SANITIZE_OPTIONS);
  render.markdown = markdown;
  return render;
});

/** The renderer reading formulas too (placeholders for `typesetMaths`). */
const withMaths = new Lazy(async () => {
  const [render, { mathExtensions }] = await Promise.all([renderer.get(), maths.get()]);
  render.markdown.use(mathExtensions);
  return render;
});
const rendererFor = (text) => (text.includes("$") ? withMaths : renderer);

/** Resolves once `renderMarkdown` can render `text` (the libraries are loaded). */
export function markdownReady(text = "") {
  return rendererFor(text).get();
}

/**
 * Sanitised HTML for a Markdown string, or null while the libraries are still loading
 * (the load starts on the first call); `unfinished` for text that was cut off (streaming,
 * or stopped), whose open emphasis, code span or code fence is then closed first.
 */
export function renderMarkdown(text, { unfinished = false } = {}) {
  const render = rendererFor(text).now();
  if (render === undefined) {
    return null;
  }
  return render(unfinished ? closeUnfinished(text) : text);
}

/** Typeset the formulas in `root` (in the page), if maths.js made any. */
export function typesetMaths(root) {
  maths.value?.typesetMaths(root);
}

/** `text` as escaped paragraphs: what a message shows until Markdown can be rendered. */
export function plainHtml(text) {
  return String(text)
    .split(/\n{2,}/)
    .filter((block) => block.trim())
    .map((block) => `<p>${escapeHtml(block).replaceAll("\n", "<br>")}</p>`)
    .join("");
}

// --- closing what a cut-off text left open --------------------------------------------

const FENCE = /^ {0,3}(`{3,}|~{3,})/;
/** A line that starts a block of its own: a list item, a heading or a quote. */
const BLOCK_START = /^ {0,3}(?:[-+*]\s|\d{1,9}[.)]\s|#{1,6}\s|>)/;
const INLINE_MARKERS = "*_~`";
const WORD_CHAR = /[\p{L}\p{N}]/u;

function isSpace(ch) {
  return ch === undefined || /\s/.test(ch);
}

function closesFence(line, fence) {
  const trimmed = line.trim();
  return trimmed.length >= fence.length && trimmed === fence[0].repeat(trimmed.length);
}

/**
 * `text` with whatever its last block left open closed: a code fence, then a code span,
 * then emphasis and strikethrough markers, innermost first.
 */
export function closeUnfinished(text) {
  const lines = text.split("\n");
  let fence = null;
  let blockStart = 0;
  lines.forEach((line, index) => {
    if (fence !== null) {
      if (closesFence(line, fence)) {
        fence = null;
        blockStart = index + 1;
      }
      return;
    }
    const opening = FENCE.exec(line);
    if (opening) {
      fence = opening[1];
    } else if (!line.trim()) {
      blockStart = index + 1;
    } else if (BLOCK_START.test(line)) {
      blockStart = index;
    }
  });
  if (fence !== null) {
    return `${text.endsWith("\n") ? text : `${text}\n`}${fence}`;
  }
  const closers = openInlineMarkers(lines.slice(blockStart).join("\n"));
  return closers ? `${text.trimEnd()}${closers}` : text;
}

/** The markers that would close what `text` (one block) leaves open, innermost first. */
function openInlineMarkers(text) {
  const open = [];
  let codeRun = 0;
  let i = 0;
  while (i < text.length) {
    const ch = text[i];
    if (ch === "\\" && codeRun === 0) {
      i += 2;
      continue;
    }
    if (!INLINE_MARKERS.includes(ch)) {
      i += 1;
      continue;
    }
    let end = i;
    while (text[end] === ch) {
      end += 1;
    }
    const run = end - i;
    if (ch === "`") {
      if (codeRun === 0) {
        codeRun = run;
      } else if (run === codeRun) {
        codeRun = 0;
      }
    } else if (codeRun === 0) {
      applyDelimiter(open, ch, run, text[i - 1], text[end]);
    }
    i = end;
  }
  const closers = open.reverse().join("");
  return codeRun ? "`".repeat(codeRun) + closers : closers;
}

/**
 * One run of `*`, `_` or `~` between the characters `before` and `after`: it closes the
 * innermost open marker of the same kind when it follows a non-space, else it opens one
 * when it starts a word. A run inside a word (`2*3`, `snake_case`) or between spaces
 * (`12 * 3`) does neither, so arithmetic and identifiers are left alone.
 */
function applyDelimiter(open, ch, run, before, after) {
  if (ch === "~" && run > 2) {
    return;
  }
  const top = open.at(-1);
  if (top?.[0] === ch && !isSpace(before)) {
    open.pop();
    return;
  }
  const startsWord = !isSpace(after) && (isSpace(before) || !WORD_CHAR.test(before));
  if (startsWord) {
    open.push(ch.repeat(Math.min(run, 3)));
  }
}
