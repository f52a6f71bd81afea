/**
 * The widget's script (`{% zett_chat %}`): mounts every `[data-zett-chat]` element of the
 * page that is not mounted yet, each with its own client and socket.
 *
 * The server renders each widget's parts into an open shadow root (a declarative
 * `<template shadowrootmode="open">`, attached here when the markup was inserted by a
 * script rather than parsed). The shadow root keeps the two pages apart both ways: the
 * widget's CSS and ids stay inside, and the host's CSS (a framework's `button` or `h2`
 * rules) never restyles the chat. Custom properties still inherit into it: that is the
 * theming interface.
 *
 * A widget with no chat id remembers the one it started (localStorage, per assistant and
 * person), so a reload resumes the same chat, and forgets it when the server says the chat
 * is gone (deleted, or no longer this person's: the next visit starts a new one); `window.zett.widgets` lists the mounted
 * widgets, and `zett.onTool(name, fn)` registers a host-page tool on all of them.
 */
import { mount, newChatId, chatSocketPath } from "./client.js";

const registry = (globalThis.zett ??= { widgets: [], tools: new Map() });
registry.widgets ??= [];
registry.tools ??= new Map();
registry.onTool ??= (name, fn) => {
  registry.tools.set(name, fn);
  for (const widget of registry.widgets) {
    widget.client.onTool(name, fn);
  }
};

function shadowOf(host) {
  if (host.shadowRoot) {
    return host.shadowRoot;
  }
  const template = host.querySelector(":scope > template[shadowrootmode]");
  const shadow = host.attachShadow({ mode: "open" });
  if (template) {
    shadow.append(template.content.cloneNode(true));
    template.remove();
  }
  return shadow;
}

/** Close codes after which a remembered chat is no use: deleted, or not this person's. */
const GONE_CODES = new Set([4403, 4410]);

function storageKey(config) {
  return `zett-chat:${config.storageKey}`;
}

function rememberedChat(config) {
  if (config.chatId) {
    return config.chatId;
  }
  const key = storageKey(config);
  let chatId = null;
  try {
    chatId = localStorage.getItem(key);
    if (!chatId) {
      chatId = newChatId();
      localStorage.setItem(key, chatId);
    }
  } catch {
    chatId ??= newChatId(); // storage refused (private mode): a chat for this visit only
  }
  return chatId;
}

function setUpLauncher(shadow, panel, mounted) {
  const launcher = shadow.querySelector('[data-part="launcher"]');
  if (!launcher) {
    return;
  }
  const setOpen = (open) => {
    panel.hidden = !open;
    launcher.setAttribute("aria-expanded", String(open));
    if (open) {
      mounted.focus();
    }
  };
  launcher.addEventListener("click", () => setOpen(panel.hidden));
  shadow.querySelector('[data-part="close"]')?.addEventListener("click", () => {
    setOpen(false);
    launcher.focus();
  });
  panel.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && !mounted.isRunning() && !event.defaultPrevented) {
      setOpen(false);
      launcher.focus();
    }
  });
}

/**
 * A widget whose theme is `auto` follows the page's light/dark choice (`data-zett-theme`
 * on <html>: theme.js on zett's pages, or the host's own switch), else the system's; its
 * code highlighter's light and dark sheets follow too.
 */
function followPageTheme(host, shadow) {
  if (host.dataset.theme) {
    return;
  }
  const page = document.documentElement;
  const fit = () => {
    const choice = page.dataset.zettTheme;
    const forced = choice === "light" || choice === "dark" ? choice : null;
    if (forced) {
      host.dataset.pageTheme = forced;
    } else {
      delete host.dataset.pageTheme;
    }
    for (const link of shadow.querySelectorAll('link[media*="prefers-color-scheme"], link[data-zett-scheme-media]')) {
      link.dataset.zettSchemeMedia ??= link.media;
      const media = link.dataset.zettSchemeMedia;
      const scheme = media.includes("dark") ? "dark" : "light";
      link.media = forced === null ? media : forced === scheme ? "all" : "not all";
    }
  };
  fit();
  new MutationObserver(fit).observe(page, { attributes: true, attributeFilter: ["data-zett-theme"] });
}

/** Mount one widget element; returns its `mount()` result (or the earlier one). */
export function mountWidget(host) {
  if (host.zettWidget) {
    return host.zettWidget;
  }
  const shadow = shadowOf(host);
  const config = JSON.parse(shadow.querySelector('script[type="application/json"]').textContent);
  const chatId = rememberedChat(config);
  const panel = shadow.querySelector("[data-zett-root]");
  const mounted = mount(shadow, {
    socketPath: chatSocketPath(chatId, config.socketPrefix),
    assistant: config.assistant,
    handoff: Boolean(config.handoff),
    attachmentsUrl: config.attachmentsUrl?.replace("{chat}", chatId) ?? "",
    attachmentLimits: config.attachmentLimits,
    csrfToken: config.csrfToken ?? "",
    texts: config.texts ?? {},
    height: config.height,
    theme: config.theme,
  });
  mounted.chatId = chatId;
  if (!config.chatId) {
    // The next visit starts a new chat rather than knock on a gone one again.
    mounted.client.on("status", (status) => {
      if (status.state === "refused" && GONE_CODES.has(status.code)) {
        try {
          localStorage.removeItem(storageKey(config));
        } catch {
          // storage refused: nothing was remembered
        }
      }
    });
  }
  for (const [name, fn] of registry.tools) {
    mounted.client.onTool(name, fn);
  }
  setUpLauncher(shadow, panel, mounted);
  followPageTheme(host, shadow);
  host.zettWidget = mounted;
  host.dataset.mounted = "";
  registry.widgets.push(mounted);
  host.dispatchEvent(new CustomEvent("zett:mounted", { detail: mounted, bubbles: true }));
  return mounted;
}

for (const host of document.querySelectorAll("[data-zett-chat]")) {
  mountWidget(host);
}
