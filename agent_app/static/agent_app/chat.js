/**
 * The chat page: wires the socket, the transcript, the composer and the reply widgets.
 *
 * Frames follow docs/protocol.md. The page is "running" from the moment it sends a
 * `user_message` (or learns of an active request from the `session` frame) until
 * `run_completed`, `run_failed` or `run_cancelled`. While running, the composer steers the
 * answer instead of starting a new one, and Stop (or Escape) sends `cancel`. Every
 * (re)connect starts from the `session` frame: the transcript is rebuilt from the persisted
 * history, so nothing depends on events a dropped connection may have missed.
 *
 * Text the user typed is never lost to a refusal: a message or steer stays "unconfirmed"
 * until the server shows it took it (the run's first frame; the steer's
 * `external_event_result`). If instead the server refuses it (`busy`, `rate_limited`,
 * `too_large`, a steer that came too late), its bubble is taken back and the text returns
 * to the composer. A failed answer offers Retry, which sends the same message again.
 */
import { ChatConnection, LinkState, socketUrl } from "./connection.js";
import { Notices } from "./notices.js";
import { keepTimesFresh } from "./time.js";
import { Transcript } from "./transcript.js";
import { addUsage, usageDetail, usageText } from "./usage.js";
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
  linkStatus: byId("connection-status"),
  sessionUsage: byId("session-usage"),
  sidebar: byId("sidebar"),
  sidebarToggle: byId("sidebar-toggle"),
};

/** Refusals after which the text that was refused goes back into the composer. */
const KEEP_TEXT_CODES = new Set(["busy", "rate_limited", "too_large", "not_running"]);

const notices = new Notices(byId("notices"));
const widgets = new ReplyWidgets((name, payload) => send({ type: "external_event", name, payload }), {
  onAnswered: () => ui.input.focus({ preventScroll: true }),
});
const transcript = new Transcript(byId("transcript"), widgets, byId("transcript-empty"), {
  onUsage: (usage) => showSessionUsage(addUsage(sessionUsage, usage)),
});
const connection = new ChatConnection(socketUrl(config.socketPath), {
  onFrame: handleFrame,
  onStatus: showLinkStatus,
});

let running = false;
let lastSeq = null;
let title = config.title || "";
let sessionUsage = null;
/** Messages and steers sent but not yet taken by the server, oldest first. */
let unconfirmed = [];
let countdownTimer = null;

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
    entry.title = title;
  }
}

function finishRun({ stopped = false } = {}) {
  ui.hint.textContent = "";
  transcript.endRequest({ stopped });
  setRunning(false);
}

function showSessionUsage(usage) {
  sessionUsage = usage;
  const text = usageText(usage);
  ui.sessionUsage.hidden = !text;
  ui.sessionUsage.textContent = text ? `This chat: ${text}` : "";
  ui.sessionUsage.title = text ? usageDetail(usage) : "";
}

// --- sending --------------------------------------------------------------------------

/**
 * Send `content` as a new message: show it, start the answer. False (and nothing shown)
 * when it could not be sent.
 */
function sendMessage(content) {
  if (!send({ type: "user_message", content })) {
    return false;
  }
  const bubble = transcript.addUserMessage(content, { at: new Date() });
  unconfirmed.push({ kind: "message", content, bubble });
  nameChatAfter(content);
  transcript.beginRequest(null, { prompt: content });
  setRunning(true);
  return true;
}

function sendSteer(content) {
  if (!send({ type: "steer", content })) {
    return false;
  }
  unconfirmed.push({ kind: "steer", content });
  ui.hint.textContent = "Steer sent.";
  return true;
}

/** The server took the oldest unconfirmed entry of `kind`: forget it. */
function confirmSent(kind) {
  const index = unconfirmed.findIndex((entry) => entry.kind === kind);
  if (index >= 0) {
    unconfirmed.splice(index, 1);
  }
  return index >= 0;
}

/**
 * The server refused something this page sent, with `code`: take back what it refused
 * and return its text to the composer. `busy` can only answer a message and `not_running`
 * only a steer (or a cancel); the others answer the oldest frame still unconfirmed.
 */
function restoreRefused(code) {
  const kinds = { busy: ["message"], not_running: ["steer"] }[code] ?? ["message", "steer"];
  const index = unconfirmed.findIndex((entry) => kinds.includes(entry.kind));
  if (index < 0) {
    return;
  }
  const [entry] = unconfirmed.splice(index, 1);
  if (entry.kind === "message") {
    transcript.retractUserMessage(entry.bubble);
    if (transcript.current === null) {
      setRunning(false);
    }
  }
  restoreText(entry.content, entry.kind === "message" ? "Your message was not sent" : "Your steer was not used");
}

function restoreText(content, what) {
  if (!ui.input.value.trim()) {
    ui.input.value = content;
    ui.hint.textContent = `${what}; it is back in the box.`;
  } else {
    ui.input.value = `${content}\n\n${ui.input.value}`;
    ui.hint.textContent = `${what}; it is back in the box, above what you typed since.`;
  }
  ui.input.focus({ preventScroll: true });
}

function retry(prompt, button) {
  if (running) {
    notices.show("The agent is answering. Wait for it, or press Stop, then retry.", {
      tone: "info",
      key: "retry",
    });
    return;
  }
  if (sendMessage(prompt)) {
    button.closest(".note")?.classList.add("note--retried");
    button.remove();
    ui.input.focus({ preventScroll: true });
  }
}

function stopRun() {
  if (send({ type: "cancel" })) {
    ui.stop.disabled = true;
    ui.stop.textContent = "Stopping…";
  }
}

// --- frames from the server -----------------------------------------------------------

function handleFrame(frame) {
  switch (frame.type) {
    case "session": {
      lastSeq = null;
      unconfirmed = [];
      transcript.clear();
      const historyUsage = transcript.renderHistory(frame.history);
      showSessionUsage(frame.usage ?? historyUsage);
      if (frame.active_request_id) {
        transcript.beginRequest(frame.active_request_id);
      }
      setRunning(Boolean(frame.active_request_id));
      break;
    }
    case "run_started":
      confirmSent("message");
      break;
    case "agent_event":
      if (lastSeq !== null && frame.seq <= lastSeq) {
        return;
      }
      lastSeq = frame.seq;
      confirmSent("message");
      if (!running) {
        setRunning(true);
      }
      transcript.handleEvent(frame.request_id, frame.event ?? {});
      if (frame.event?.type === "run_completed") {
        finishRun();
      }
      break;
    case "run_failed":
      showFailure(frame.error ?? {});
      finishRun();
      break;
    case "run_cancelled":
      transcript.addNote("Stopped.", "muted");
      finishRun({ stopped: true });
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

/** A failed answer: what went wrong and, when the message is known, a Retry button. */
function showFailure(error) {
  const prompt = transcript.current?.prompt;
  const note = transcript.addNote(
    `The answer failed: ${error.message || "unknown error"} (${error.type || "Error"}).`,
    "error",
  );
  if (prompt) {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "button button--small note__action";
    button.textContent = "Retry";
    button.title = "Send the same message again";
    button.addEventListener("click", () => retry(prompt, button));
    note.append(" ", button);
  }
}

function handleExternalEventResult(frame) {
  const accepted = Array.isArray(frame.accepted_by) && frame.accepted_by.length > 0;
  if (frame.correlation_id) {
    widgets.settle(frame.correlation_id, frame.accepted_by);
  } else if (frame.name === "steering_message") {
    const entry = unconfirmed.find((item) => item.kind === "steer");
    confirmSent("steer");
    if (!accepted) {
      notices.show("The steer arrived after the answer had finished, so it was not used.", { tone: "info" });
      if (entry) {
        restoreText(entry.content, "Your steer was not used");
      }
    }
  }
}

function handleError(frame) {
  const text = ERROR_TEXT[frame.code] ?? "Something went wrong.";
  notices.show(text, { detail: frame.message || "", key: `error-${frame.code}` });
  if (frame.code === "not_running" && running) {
    finishRun();
  }
  if (KEEP_TEXT_CODES.has(frame.code)) {
    restoreRefused(frame.code);
  }
}

// --- connection status ----------------------------------------------------------------

/**
 * The link indicator. The visible label counts down to the next attempt each second; the
 * screen-reader status (`#connection-status`) is told only when the state changes, so it
 * does not read out a number every second.
 */
function showLinkStatus(status) {
  ui.link.dataset.state = status.state;
  ui.retry.hidden = status.state !== LinkState.WAITING;
  clearTimeout(countdownTimer);
  countdownTimer = null;
  switch (status.state) {
    case LinkState.CONNECTING:
      ui.linkLabel.textContent = "Connecting…";
      break;
    case LinkState.OPEN:
      ui.linkLabel.textContent = "Connected";
      ui.linkStatus.textContent = "Connected";
      notices.dismiss("link");
      notices.dismiss("offline");
      break;
    case LinkState.WAITING:
      ui.linkStatus.textContent = "Offline. Retrying shortly.";
      countDown(Date.now() + status.delayMs);
      break;
    case LinkState.REFUSED:
      ui.linkLabel.textContent = "Disconnected";
      ui.linkStatus.textContent = "Disconnected";
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

/** "Offline, retrying in N s", rewritten each time N changes until `deadline`. */
function countDown(deadline) {
  const left = deadline - Date.now();
  const seconds = Math.ceil(left / 1000);
  ui.linkLabel.textContent = seconds > 0 ? `Offline, retrying in ${seconds} s` : "Offline, retrying…";
  if (seconds > 0) {
    countdownTimer = setTimeout(() => countDown(deadline), left - (seconds - 1) * 1000);
  }
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
  if (running) {
    if (sendSteer(content)) {
      ui.input.value = "";
    }
    return;
  }
  if (sendMessage(content)) {
    ui.input.value = "";
    ui.hint.textContent = "";
  }
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

ui.stop.addEventListener("click", stopRun);

ui.retry.addEventListener("click", () => connection.retryNow());

// --- the sidebar on narrow screens ----------------------------------------------------

function setSidebarOpen(open) {
  ui.sidebar.dataset.open = String(open);
  ui.sidebarToggle.setAttribute("aria-expanded", String(open));
}

ui.sidebarToggle.addEventListener("click", () => {
  setSidebarOpen(ui.sidebar.dataset.open !== "true");
});

/**
 * Escape closes the drawer when it is open; otherwise, while an answer runs, it stops the
 * answer, unless focus is in a reply widget (where Escape belongs to the widget).
 */
document.addEventListener("keydown", (event) => {
  if (event.key !== "Escape" || event.isComposing || event.defaultPrevented) {
    return;
  }
  if (ui.sidebar.dataset.open === "true") {
    setSidebarOpen(false);
    ui.sidebarToggle.focus();
    return;
  }
  const inWidget = event.target instanceof Element && event.target.closest(".widget");
  if (running && !inWidget && !ui.stop.disabled) {
    event.preventDefault();
    stopRun();
  }
});

setRunning(false);
keepTimesFresh(byId("transcript"));
connection.start();
ui.input.focus();
