/**
 * The chat's parts for a root that has none: what `mount()` builds into an empty element
 * (`prepare`: in an open shadow root of it, with the chat's stylesheets, loaded from
 * beside this module).
 *
 * The server renders the same parts for the chat page and the widget
 * (`agent_app/_chat_main.html`); this is their shape for a page that has no template of
 * zett's, with ids unique in the document so labels and descriptions still point at their
 * own elements when several chats share a page.
 */
import { element } from "./blocks.js";

/** The heading and the composer's words; `mount(root, {texts})` overrides any of them. */
export const DEFAULT_TEXTS = Object.freeze({
  title: "Chat",
  messageLabel: "Message",
  placeholder: "Ask something… (Enter sends, Shift+Enter adds a line)",
  steerLabel: "Steer the answer",
  steerPlaceholder: "Add guidance while the agent works… (Enter sends)",
  send: "Send",
  steer: "Steer",
  stop: "Stop",
  empty: "Say hello to start the conversation.",
});

let built = 0;

function withPart(node, name, attributes = {}) {
  node.dataset.part = name;
  for (const [key, value] of Object.entries(attributes)) {
    node.setAttribute(key, value);
  }
  return node;
}

/** Build the link indicator, the transcript and the composer into `root`. */
export function buildPanel(root, texts = DEFAULT_TEXTS) {
  built += 1;
  const id = `zett-${built}`;
  const shell = element("section", "zett");
  shell.dataset.zettRoot = "";
  shell.setAttribute("aria-label", texts.title);

  const bar = element("div", "zett__bar");
  const link = withPart(element("div", "connection"), "link", { "data-state": "connecting" });
  const dot = element("span", "connection__dot");
  dot.setAttribute("aria-hidden", "true");
  const reconnect = withPart(element("button", "button button--quiet button--small", "Retry now"), "reconnect");
  reconnect.type = "button";
  reconnect.hidden = true;
  link.append(
    dot,
    withPart(element("span", "connection__label", "Connecting…"), "link-label", { "aria-hidden": "true" }),
    withPart(element("span", "visually-hidden"), "link-status", { role: "status" }),
    reconnect,
  );
  bar.append(element("p", "zett__title", texts.title), link);

  const chat = element("div", "chat");
  const empty = withPart(element("div", "transcript-empty"), "empty");
  empty.hidden = true;
  empty.append(element("p", "muted", texts.empty));

  const composer = withPart(element("form", "composer"), "composer", { "data-mode": "send", autocomplete: "off" });
  const label = withPart(element("label", "composer__label", texts.messageLabel), "label", { for: `${id}-input` });
  const input = withPart(element("textarea"), "input", {
    id: `${id}-input`,
    name: "content",
    rows: "2",
    placeholder: texts.placeholder,
    "aria-describedby": `${id}-hint`,
  });
  const actions = element("div", "composer__actions");
  const stop = withPart(element("button", "button button--danger", texts.stop), "stop");
  stop.type = "button";
  stop.hidden = true;
  const send = withPart(element("button", "button button--primary", texts.send), "send");
  send.type = "submit";
  send.disabled = true;
  const usage = withPart(element("span", "composer__usage muted"), "usage");
  usage.hidden = true;
  actions.append(
    withPart(element("p", "composer__hint muted"), "hint", { id: `${id}-hint`, "aria-live": "polite" }),
    usage,
    stop,
    send,
  );
  composer.append(label, input, actions);

  chat.append(
    withPart(element("div", "notices"), "notices", { "aria-live": "polite" }),
    withPart(element("div", "visually-hidden"), "announcer", { role: "status" }),
    withPart(element("div", "transcript"), "transcript", { role: "log", "aria-label": "Conversation", tabindex: "-1" }),
    empty,
    composer,
  );
  shell.append(bar, chat);
  root.append(shell);
  return shell;
}

/** The styles a chat mounted into an empty element loads into its shadow root. */
const SHEETS = [
  ["chat.css", null],
  ["vendor/highlight/a11y-light.min.css", "(prefers-color-scheme: light)"],
  ["vendor/highlight/a11y-dark.min.css", "(prefers-color-scheme: dark)"],
  ["widget.css", null],
];

/** Where the chat's parts go: `root` itself when it has them, else parts built for it. */
export function prepare(root, texts, { shadow = true } = {}) {
  if (root.querySelector('[data-part="transcript"]') !== null) {
    return root;
  }
  if (!(root instanceof Element) || !shadow) {
    buildPanel(root, texts);
    return root;
  }
  const tree = root.shadowRoot ?? root.attachShadow({ mode: "open" });
  for (const [sheet, media] of SHEETS) {
    const link = document.createElement("link");
    link.rel = "stylesheet";
    link.href = new URL(`./${sheet}`, import.meta.url).href;
    if (media) {
      link.media = media;
    }
    tree.append(link);
  }
  buildPanel(tree, texts);
  return tree;
}
