/**
 * Fenced code blocks in rendered answers: syntax highlighting, a language label and a copy
 * button.
 *
 * Runs on HTML that `renderMarkdown` already sanitised and that is already in the page. It
 * reads each block's text (never its HTML), lets highlight.js turn that text into markup,
 * and passes the markup through DOMPurify once more, allowing only `<span class>`: so
 * DOMPurify stays the last step before anything reaches `innerHTML`, and highlighting adds
 * colour, never elements or attributes of its own choosing. A block whose language is not
 * named, or not one of the grammars below, is shown as plain text in the same frame.
 *
 * highlight.js comes in parts (`lazy.js`): its core and each language's grammar are loaded
 * when the first block in that language is shown, so a chat with Python code fetches the
 * core and the Python grammar only. A block is framed at once and coloured when its
 * grammar arrives.
 *
 * A block wider than its frame scrolls sideways; such a block is made focusable, so the
 * keyboard can scroll it too (checked after each render and when the window is resized).
 */
import { copyButton } from "./copy.js";
import { Lazy, staticUrl } from "./lazy.js";
import { sanitizer } from "./markdown.js";

const HIGHLIGHT_SANITIZE = { ALLOWED_TAGS: ["span"], ALLOWED_ATTR: ["class"] };
const LANGUAGE_CLASS = /(?:^|\s)language-(\S+)/;
const MAX_LABEL = 24;

/** The grammars in `vendor/highlight/languages/` (highlight.js's common set), with their other names. */
const GRAMMARS = {
  bash: "sh zsh",
  c: "h",
  cpp: "cc c++ h++ hpp hh hxx cxx",
  csharp: "cs c#",
  css: "",
  diff: "patch",
  go: "golang",
  graphql: "gql",
  ini: "toml",
  java: "jsp",
  javascript: "js jsx mjs cjs",
  json: "jsonc json5",
  kotlin: "kt kts ktm ktx",
  less: "",
  lua: "pluto",
  makefile: "mk mak make",
  markdown: "md mkdown mkd",
  objectivec: "mm objc obj-c obj-c++ objective-c++",
  perl: "pl pm",
  php: "",
  "php-template": "",
  python: "py gyp ipython",
  "python-repl": "pycon",
  r: "",
  ruby: "rb gemspec podspec thor irb",
  rust: "rs",
  scss: "",
  shell: "console shellsession",
  sql: "",
  swift: "",
  typescript: "ts tsx mts cts",
  vbnet: "vb",
  wasm: "",
  xml: "html xhtml rss atom xjb xsd xsl plist wsf svg",
  yaml: "yml",
};
/** Grammars a grammar hands parts of its text to (HTML's `<style>` and `<script>`, …). */
const EMBEDDED = { xml: ["css", "javascript"], "php-template": ["php", "xml"], "python-repl": ["python"], shell: ["bash"] };
const GRAMMAR_OF = new Map(
  Object.entries(GRAMMARS).flatMap(([name, aliases]) => [name, ...aliases.split(" ").filter(Boolean)].map((alias) => [alias, name])),
);

const core = new Lazy(async () => (await import(staticUrl("vendor/highlight/core.min.js"))).default);
const grammars = new Map();

/** highlight.js with grammar `name` (and those it embeds) registered, on first need. */
function grammar(name) {
  let lazy = grammars.get(name);
  if (lazy === undefined) {
    lazy = new Lazy(async () => {
      const [hljs, module] = await Promise.all([
        core.get(),
        import(staticUrl(`vendor/highlight/languages/${name}.min.js`)),
        sanitizer.get(),
        ...(EMBEDDED[name] ?? []).map((other) => grammar(other).get()),
      ]);
      hljs.registerLanguage(name, module.default);
      return hljs;
    });
    grammars.set(name, lazy);
  }
  return lazy;
}

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
  const name = GRAMMAR_OF.get(language.toLowerCase());
  if (name === undefined) {
    return;
  }
  const lazy = grammar(name);
  const hljs = lazy.now();
  if (hljs !== undefined) {
    colour(hljs, code, name);
    return;
  }
  lazy.get().then(
    (loaded) => code.isConnected && colour(loaded, code, name),
    () => {}, // stays plain; the next block in this language tries again
  );
}

function colour(hljs, code, name) {
  let value;
  try {
    ({ value } = hljs.highlight(code.textContent, { language: name, ignoreIllegals: true }));
  } catch (error) {
    console.warn("Showing a code block unhighlighted:", error);
    return;
  }
  code.innerHTML = sanitizer.value.sanitize(value, HIGHLIGHT_SANITIZE);
  markScrollable(code);
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
