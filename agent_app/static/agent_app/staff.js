/**
 * One chat as staff see it: the conversation live (read-only), and once taken over a
 * composer that writes to the customer as the staff member. The socket is the chat's own
 * (staff may open any chat's); the server decides who may do what.
 */
import { markdownReady, plainHtml, renderMarkdown, typesetMaths } from "./markdown.js";

const config = JSON.parse(document.getElementById("staff-config").textContent);
const root = document.querySelector(".staff-chat");
const log = root.querySelector('[data-part="log"]');
const state = root.querySelector('[data-part="state"]');
const composer = root.querySelector('[data-part="composer"]');
const text = composer.querySelector("textarea");
const takeoverButton = root.querySelector('[data-action="takeover"]');
const handBackButton = root.querySelector('[data-action="hand-back"]');

let socket = null;
let live = null; // the entry of the answer being streamed
let liveSource = ""; // its Markdown so far
let unsent = null; // what was sent and not shown yet: back into the box if refused

const WHO = { user: "Customer", assistant: "Assistant", staff: "Staff" };

function contentText(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((part) => part.text || "").join(" ");
  return "";
}

/** Sanitised Markdown (markdown.js); plain text until the libraries are loaded, then again. */
function showMarkdown(words, source, options = {}) {
  const html = renderMarkdown(source, options);
  words.innerHTML = html ?? plainHtml(source);
  typesetMaths(words);
  if (html === null) {
    markdownReady(source).then(() => words.isConnected && showMarkdown(words, words.dataset.source, options), () => {});
  }
  words.dataset.source = source;
}

function entry(role, body, who) {
  const item = document.createElement("li");
  item.className = `staff-chat__entry staff-chat__entry--${role}`;
  item.dataset.role = role;
  const label = document.createElement("span");
  label.className = "staff-chat__who";
  label.textContent = who || WHO[role] || role;
  const words = document.createElement("div");
  words.className = "staff-chat__text";
  if (role === "assistant") {
    showMarkdown(words, body);
    words.classList.add("staff-chat__text--markdown");
  } else {
    words.textContent = body;
  }
  item.append(label, words);
  log.append(item);
  item.scrollIntoView({ block: "end" });
  return words;
}

function note(words) {
  const item = document.createElement("li");
  item.className = "staff-chat__note muted";
  item.textContent = words;
  log.append(item);
}

function showTaken(staff) {
  const mine = staff && staff.name === config.me;
  state.textContent = staff ? `${staff.name} answers` : "Read-only";
  root.dataset.takenOver = staff ? "true" : "false";
  composer.hidden = !mine;
  handBackButton.hidden = !staff;
  takeoverButton.hidden = Boolean(mine);
  if (mine) text.focus();
}

/** The buttons act on the socket: usable only while it is open. */
function connected(open) {
  takeoverButton.disabled = !open;
  handBackButton.disabled = !open;
}

function showHistory(frame) {
  connected(true);
  log.replaceChildren();
  for (const item of frame.history || []) {
    if (item.role === "tool") continue;
    const body = contentText(item.content);
    if (item.role === "assistant" && !body) continue;
    entry(item.role, body, item.role === "staff" ? item.staff?.name : null);
  }
  const support = frame.support || {};
  showTaken(support.taken_over ? support.staff : null);
  if (support.needs_human) note(`Asked for a person${support.reason ? `: ${support.reason}` : ""}`);
}

const handlers = {
  session: showHistory,
  run_started: (frame) => {
    if (frame.content) entry("user", frame.content);
    live = null;
  },
  agent_event: (frame) => {
    if (frame.event.type === "text_delta") {
      if (live === null) {
        live = entry("assistant", "");
        liveSource = "";
      }
      liveSource += frame.event.delta;
      showMarkdown(live, liveSource, { unfinished: true });
    }
  },
  run_completed: () => { live = null; },
  run_cancelled: () => { live = null; note("The assistant's answer was stopped."); },
  customer_message: (frame) => entry("user", frame.content),
  staff_message: (frame) => {
    if (frame.content === unsent) unsent = null;
    entry("staff", frame.content, frame.staff.name);
  },
  handoff_requested: (frame) => note(`Asked for a person${frame.reason ? `: ${frame.reason}` : ""}`),
  taken_over: (frame) => { live = null; showTaken(frame.staff); note(`${frame.staff.name} took the chat over.`); },
  handed_back: () => { showTaken(null); note("Handed back to the assistant."); },
  error: (frame) => {
    note(`Refused: ${frame.message}`);
    if (unsent !== null && !text.value) {
      text.value = unsent; // nothing typed is lost
    }
    unsent = null;
  },
};

function connect() {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  socket = new WebSocket(`${scheme}://${location.host}${config.socketPath}`);
  socket.addEventListener("message", (message) => {
    const frame = JSON.parse(message.data);
    handlers[frame.type]?.(frame);
  });
  socket.addEventListener("close", () => {
    connected(false);
    setTimeout(connect, 2000);
  });
}

takeoverButton.addEventListener("click", () => socket?.send(JSON.stringify({ type: "takeover" })));
handBackButton.addEventListener("click", () => socket?.send(JSON.stringify({ type: "hand_back" })));
composer.addEventListener("submit", (event) => {
  event.preventDefault();
  const content = text.value.trim();
  if (!content || !socket) return;
  if (socket.readyState !== WebSocket.OPEN) {
    note("Not connected: nothing was sent. Your text is still here.");
    return;
  }
  socket.send(JSON.stringify({ type: "staff_message", content }));
  unsent = content;
  text.value = "";
});
text.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey) {
    event.preventDefault();
    composer.requestSubmit();
  }
});

connected(false);
connect();
