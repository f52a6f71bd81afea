/**
 * The chat page: the chat UI (`mount.js`, the same as the widget's) plus what only the
 * page has — its heading and `document.title`, the sidebar of chats (a drawer on narrow
 * screens), and renaming and deleting the chat. The chat itself — transcript, composer,
 * replies, resume — is all `mount()`'s. A page template that leaves out a part (the
 * sidebar, the heading, rename or delete) simply goes without it.
 */
import { mount } from "./client.js";
import { lazyModule } from "./lazy.js";

const config = JSON.parse(document.getElementById("chat-config").textContent);
const root = document.querySelector("[data-zett-root]");
const byId = (id) => document.getElementById(id);

const ui = {
  topbar: root.querySelector(".topbar"),
  sidebar: byId("sidebar"),
  sidebarToggle: byId("sidebar-toggle"),
  title: root.querySelector('[data-part="title"]'),
  chatActions: byId("chat-actions"),
  renameChat: byId("rename-chat"),
  deleteChat: byId("delete-chat"),
};

let title = config.title || "";
/** Renaming and deleting (`chats.js`), loaded when first asked for. */
const chats = lazyModule("chats.js");

// A handoff (docs/protocol.md, "Sub-runs"): the heading names the assistant answering now.
document.addEventListener("zett-handoff", (event) => {
  const label = byId("chat-assistant");
  if (label && event.detail?.name) {
    label.textContent = `with ${event.detail.name}`;
  }
});

function showTitle(text) {
  title = text;
  if (ui.title) {
    ui.title.textContent = title || "New chat";
  }
  document.title = `${title || "New chat"} · zett`;
  const entry = ui.sidebar?.querySelector("a[aria-current=page] .session-links__title");
  if (entry && title) {
    entry.textContent = title;
    entry.title = title;
  }
}

// --- the sidebar on narrow screens ----------------------------------------------------

// The drawer opens under the bar, however tall the bar is (it wraps when the link is down).
if (ui.topbar) {
  new ResizeObserver(() => {
    document.documentElement.style.setProperty("--topbar-height", `${ui.topbar.offsetHeight}px`);
  }).observe(ui.topbar);
}

function setSidebarOpen(open) {
  ui.sidebar.dataset.open = String(open);
  ui.sidebarToggle.setAttribute("aria-expanded", String(open));
}

if (ui.sidebar && ui.sidebarToggle) {
  ui.sidebarToggle.addEventListener("click", () => {
    setSidebarOpen(ui.sidebar.dataset.open !== "true");
  });

  // Registered before the chat's own Escape (which stops a running answer): an open drawer
  // takes the key first.
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && !event.isComposing && ui.sidebar.dataset.open === "true") {
      event.preventDefault();
      setSidebarOpen(false);
      ui.sidebarToggle.focus();
    }
  });
}

// --- the chat -------------------------------------------------------------------------

mount(root, {
  socketPath: config.socketPath,
  assistant: config.assistant,
  handoff: Boolean(config.handoff),
  attachmentsUrl: config.attachmentsUrl,
  listUrl: config.listUrl,
  attachmentLimits: config.attachmentLimits,
  chatTitle: title,
  keyboardTarget: document,
  autofocus: true,
  onTitle: showTitle,
  onStored: () => {
    if (ui.chatActions) {
      ui.chatActions.hidden = false;
    }
  },
});

// --- renaming and deleting the chat ---------------------------------------------------

if (ui.chatActions) {
  ui.chatActions.hidden = !config.stored;
}

ui.renameChat?.addEventListener("click", async () => {
  const { renameInline } = await chats.get();
  ui.chatActions.hidden = true;
  renameInline({
    shown: ui.title,
    current: title || "New chat",
    url: config.renameUrl,
    onRenamed: showTitle,
    onClose: () => {
      ui.chatActions.hidden = false;
      ui.renameChat.focus();
    },
  });
});

ui.deleteChat?.addEventListener("click", async () => {
  const { confirmDelete } = await chats.get();
  confirmDelete({
    title: title || "Untitled chat",
    url: config.deleteUrl,
    onDeleted: (answer) => window.location.assign(answer.next || config.listUrl),
    onClose: () => ui.deleteChat.focus(),
  });
});
