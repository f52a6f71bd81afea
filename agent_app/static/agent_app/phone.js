/**
 * The composer on any screen, phones first: the message box grows with its text up to a
 * cap (then scrolls), Enter does what the keyboard's Enter key says (`enterkeyhint`), and
 * a "Jump to latest" button appears while the reader is scrolled up from a conversation
 * that is still growing.
 *
 * On a touch screen (a coarse pointer and no fine one: a phone or a tablet without a
 * mouse) there is no Shift to hold, so Enter makes a new line and the Send button sends;
 * the on-screen key shows "return". With a keyboard and a mouse, Enter sends (Shift+Enter
 * makes a new line) and the key hint says "send".
 */
import { element } from "./dom.js";

/** The tallest the message box grows, as a share of the window's height. */
const GROW_CAP = 0.4;
/** Scrolled further up than this from the end: the reader is not at the latest. */
const AWAY_PX = 120;

/** Whether Enter sends (a keyboard device) rather than making a new line (touch only). */
export function enterSends() {
  const media = globalThis.matchMedia;
  if (typeof media !== "function") {
    return true;
  }
  return !(media("(pointer: coarse)").matches && !media("(any-pointer: fine)").matches);
}

/** The message box: its key hint, and its height following its text. */
export class ComposerBox {
  /** @param {HTMLTextAreaElement} input */
  constructor(input) {
    this.input = input;
    this.rows = Number(input.getAttribute("rows")) || 2;
    input.setAttribute("enterkeyhint", enterSends() ? "send" : "enter");
    input.addEventListener("input", () => this.fit());
    this.placeholder(input.placeholder);
  }

  /** Show `text`, without its "(Enter sends, …)" advice on a touch screen, where it is not so. */
  placeholder(text) {
    this.input.placeholder = enterSends() ? text : text.replace(/\s*\(Enter [^)]*\)/, "");
  }

  /** Height to fit the text (call after the value changed in code, e.g. once sent). */
  fit() {
    const input = this.input;
    input.style.height = "auto";
    if (!input.value) {
      input.style.removeProperty("height");
      return;
    }
    const cap = Math.max(window.innerHeight * GROW_CAP, input.clientHeight);
    const wanted = input.scrollHeight + (input.offsetHeight - input.clientHeight);
    input.style.height = `${Math.min(wanted, cap)}px`;
  }
}

/**
 * "Jump to latest": shown while the transcript (`scroller`) is scrolled up from its end and
 * more arrives below; pressing it scrolls to the end and puts focus back in the composer.
 */
export class JumpToLatest {
  constructor(scroller, { onJump = () => {} } = {}) {
    this.scroller = scroller;
    this.button = element("button", "button button--small jump-latest", "Jump to latest");
    this.button.type = "button";
    this.button.hidden = true;
    this.button.addEventListener("click", () => {
      scroller.scrollTop = scroller.scrollHeight;
      this.button.hidden = true;
      onJump();
    });
    scroller.after(this.button);
    scroller.addEventListener("scroll", () => this.update(), { passive: true });
    new MutationObserver(() => this.update()).observe(scroller, {
      childList: true,
      subtree: true,
      characterData: true,
    });
  }

  /** Whether the end of the conversation is out of view. */
  get away() {
    const s = this.scroller;
    return s.scrollHeight - s.scrollTop - s.clientHeight > AWAY_PX;
  }

  update() {
    this.button.hidden = !this.away;
  }
}
