/**
 * The chat page: wires the socket, the transcript, the composer and the reply widgets.
 *
 * Frames follow SPEC B3. The page is "running" from the moment it sends a `user_message`
 * (or learns of an active request from the `session` frame) until `run_completed`,
 * `run_failed` or `run_cancelled`. While running, the composer steers the answer instead of
 * starting a new one, and Stop sends `cancel`. Every (re)connect starts from the `session`
 * frame: the transcript is rebuilt from the persisted history, so nothing depends on events
 * a dropped connection may have missed.
 */
import { ChatConnection, LinkState, socketUrl } from "./connection.js";
import { Notices } from "./notices.js";
import { Transcript } from "./transcript.js";
import { ReplyWidgets } from "./widgets.js";

const MAX_CONTENT_BYTES = 32 * 1024;
const TITLE_LENGTH = 80;

const ERROR_TEXT = {
  bad_json: "The server could not read a message from this page.",
  bad_frame: "The server rejected a message from this page.",
  unknown_type: "The server did not understand a message from this page.",
  too_large: "That was too large for the server.",
  busy: "The agent is still answering. Wait for it, or press Stop.",
  not_running: "Nothing is running right now.",
  forbidden: "You may not use this chat.",
  rate_limited: "You are sending messages too quickly. Try again in a moment.",
};

const config = JSON.parse(document.getElementById("chat-config").textContent);
const byId = (id) => document.getElementById(id);

const ui = {
  composer: byId("composer"),
  input: byId("composer-input"),
  label: byId("composer-label"),
  hint: byId("composer-hint"),
  send: byId("send-button"),
  stop: byId("stop-button"),
  link: byId("connection"),
  linkLabel: byId("connection-label"),
  retry: byId("reconnect-now"),
  sidebar: byId("sidebar"),
  sidebarToggle: byId("sidebar-toggle"),
};

const notices = new Notices(byId("notices"));
const widgets = new ReplyWidgets((name, payload) => send({ type: "external_event", name, payload }));
const transcript = new Transcript(byId("transcript"), widgets, byId("transcript-empty"));
const connection = new ChatConnection(socketUrl(config.socketPath), {
  onFrame: handleFrame,
  onStatus: showLinkStatus,
});

let running = false;
let lastSeq = null;
let title = config.title || "";

function send(frame) {
  if (connection.send(frame)) {
    return true;
  }
  notices.show("Not connected, so nothing was sent. Your text is still here.", { key: "offline" });
  return false;
}

function setRunning(active) {
  running = active;
  ui.composer.dataset.mode = active ? "steer" : "send";
  ui.label.textContent = active ? "Steer the answer" : "Message";
  ui.input.placeholder = active
    ? "Add guidance while the agent works… (Enter sends)"
    : "Ask something… (Enter sends, Shift+Enter adds a line)";
  ui.send.textContent = active ? "Steer" : "Send";
  ui.stop.hidden = !active;
  ui.stop.disabled = false;
  ui.stop.textContent = "Stop";
  updateSendButton();
}

function updateSendButton() {
  ui.send.disabled = !connection.isOpen;
}

/**
 * Name an untitled chat after its first message, as the server does when it saves it
 * (whitespace collapsed, at most 80 characters), so the page need not reload to show it.
 */
function nameChatAfter(content) {
  if (title) {
    return;
  }
  const text = content.split(/\s+/).filter(Boolean).join(" ");
  title = text.length <= TITLE_LENGTH ? text : `${text.slice(0, TITLE_LENGTH - 1)}…`;
  byId("chat-title").textContent = title;
  document.title = `${title} · zett`;
  const entry = ui.sidebar.querySelector("a[aria-current=page] .session-links__title");
  if (entry) {
    entry.textContent = title;
  }
}

function finishRun() {
  ui.hint.textContent = "";
  transcript.endRequest();
  setRunning(false);
}

// --- frames from the server -----------------------------------------------------------

function handleFrame(frame) {
  switch (frame.type) {
    case "session":
      lastSeq = null;
      transcript.clear();
      transcript.renderHistory(frame.history);
      if (frame.active_request_id) {
        transcript.beginRequest(frame.active_request_id);
      }
      setRunning(Boolean(frame.active_request_id));
      break;
    case "agent_event":
      if (lastSeq !== null && frame.seq <= lastSeq) {
        return;
      }
      lastSeq = frame.seq;
      if (!running) {
        setRunning(true);
      }
      transcript.handleEvent(frame.request_id, frame.event ?? {});
      if (frame.event?.type === "run_completed") {
        finishRun();
      }
      break;
    case "run_failed": {
      const error = frame.error ?? {};
      transcript.addNote(`The answer failed: ${error.message || "unknown error"} (${error.type || "Error"}).`, "error");
      finishRun();
      break;
    }
    case "run_cancelled":
      transcript.addNote("Stopped.", "muted");
      finishRun();
      break;
    case "external_event_result":
      handleExternalEventResult(frame);
      break;
    case "error":
      handleError(frame);
      break;
    default:
      break;
  }
}

function handleExternalEventResult(frame) {
  const accepted = Array.isArray(frame.accepted_by) && frame.accepted_by.length > 0;
  if (frame.correlation_id) {
    widgets.settle(frame.correlation_id, frame.accepted_by);
  } else if (frame.name === "steering_message" && !accepted) {
    notices.show("The steer arrived after the answer had finished, so it was not used.", { tone: "info" });
  }
}

function handleError(frame) {
  const text = ERROR_TEXT[frame.code] ?? "Something went wrong.";
  notices.show(text, { detail: frame.message || "", key: `error-${frame.code}` });
  if (frame.code === "not_running" && running) {
    finishRun();
  }
}

// --- connection status ----------------------------------------------------------------

function showLinkStatus(status) {
  ui.link.dataset.state = status.state;
  ui.retry.hidden = status.state !== LinkState.WAITING;
  switch (status.state) {
    case LinkState.CONNECTING:
      ui.linkLabel.textContent = "Connecting…";
      break;
    case LinkState.OPEN:
      ui.linkLabel.textContent = "Connected";
      notices.dismiss("link");
      notices.dismiss("offline");
      break;
    case LinkState.WAITING:
      ui.linkLabel.textContent = `Offline, retrying in ${Math.ceil(status.delayMs / 1000)} s`;
      break;
    case LinkState.REFUSED:
      ui.linkLabel.textContent = "Disconnected";
      notices.show("The server closed this chat and will not reopen it.", {
        key: "link",
        detail: status.reason || `(code ${status.code})`,
      });
      break;
    default:
      break;
  }
  updateSendButton();
}

// --- the composer ---------------------------------------------------------------------

ui.composer.addEventListener("submit", (event) => {
  event.preventDefault();
  const content = ui.input.value;
  if (!content.trim()) {
    ui.input.focus();
    return;
  }
  const bytes = new TextEncoder().encode(content).length;
  if (bytes > MAX_CONTENT_BYTES) {
    ui.hint.textContent = `This is ${Math.ceil(bytes / 1024)} KiB; the limit is 32 KiB. Shorten it to send.`;
    return;
  }
  const frame = running ? { type: "steer", content } : { type: "user_message", content };
  if (!send(frame)) {
    return;
  }
  ui.input.value = "";
  if (running) {
    ui.hint.textContent = "Steer sent.";
    return;
  }
  ui.hint.textContent = "";
  transcript.addUserMessage(content);
  nameChatAfter(content);
  transcript.beginRequest(null);
  setRunning(true);
});

ui.input.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    ui.composer.requestSubmit();
  }
});

ui.input.addEventListener("input", () => {
  ui.hint.textContent = "";
});

ui.stop.addEventListener("click", () => {
  if (send({ type: "cancel" })) {
    ui.stop.disabled = true;
    ui.stop.textContent = "Stopping…";
  }
});

ui.retry.addEventListener("click", () => connection.retryNow());

// --- the sidebar on narrow screens ----------------------------------------------------

function setSidebarOpen(open) {
  ui.sidebar.dataset.open = String(open);
  ui.sidebarToggle.setAttribute("aria-expanded", String(open));
}

ui.sidebarToggle.addEventListener("click", () => {
  setSidebarOpen(ui.sidebar.dataset.open !== "true");
});

document.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && ui.sidebar.dataset.open === "true") {
    setSidebarOpen(false);
    ui.sidebarToggle.focus();
  }
});

setRunning(false);
connection.start();
ui.input.focus();
