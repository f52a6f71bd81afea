/**
 * Code a page needs only sometimes, loaded the first time it is needed: the Markdown
 * parser and the sanitiser when the first message is shown, a highlight.js grammar when
 * the first code block in its language is, a reply widget's code when the first question
 * comes. A page that never shows any of it never fetches it.
 *
 * `new Lazy(load)` wraps a function that returns a promise (usually a dynamic `import()`;
 * plain `import()` of a script URL is allowed under `script-src 'self'`, no `eval`).
 * `get()` starts the load once and resolves to its value; `now()` is the value when it
 * is already here, else undefined (and starts the load), for code that can draw something
 * plain now and draw again when it arrives. A load that failed (the network dropped) is
 * tried again on the next need.
 */

export class Lazy {
  /** @param {() => Promise<any>} load */
  constructor(load) {
    this.load = load;
    this.value = undefined;
    this.promise = null;
  }

  /** The value, loading it on the first call. */
  get() {
    this.promise ??= this.load().then(
      (value) => {
        this.value = value;
        return value;
      },
      (error) => {
        this.promise = null;
        throw error;
      },
    );
    return this.promise;
  }

  /** The value if it is loaded, else undefined; the load starts (once) either way. */
  now() {
    if (this.value === undefined) {
      this.get().catch((error) => console.warn("Could not load a part of the page:", error));
    }
    return this.value;
  }
}

/** The URL of `path` under this folder (`vendor/…`), wherever the static files are served. */
export function staticUrl(path) {
  return new URL(`./${path}`, import.meta.url).href;
}

/** A module under this folder, on first need: `lazyModule("vendor/katex/katex.mjs")`. */
export function lazyModule(path) {
  return new Lazy(() => import(staticUrl(path)));
}
