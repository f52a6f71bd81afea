/**
 * The chat page: wires the socket, the transcript, the composer and the reply widgets.
 *
 * Frames follow docs/protocol.md. A run belongs to the session, not to this page: every
 * tab sees every run (`run_started`, even for a message another tab sent), closing or
 * reloading the page never stops it, and only Stop (or Escape) sends `cancel`. While a run
 * is live the composer steers it instead of starting a new one.
 *
 * Resuming: the page keeps the last `seq` it applied and reconnects with `?after_seq=`.
 * If the run it was showing is still going, or nothing happened meanwhile, the transcript
 * stays as it is and the replayed frames continue it. Otherwise (and on a fresh load) the
 * transcript is rebuilt from the `session` frame — history, run outcomes, pending waits —
 * and the replay that follows rebuilds the active run from its `run_started`. A `ping` sent
 * right after `session` is answered after the replay, which tells the page it has caught
 * up. Frames with a `seq` it has applied already are ignored.
 *
 * Text the user typed is never lost to a refusal: a message or steer stays "unconfirmed"
 * until the server shows it took it (the message's `run_started`; the steer's
 * `external_event_result`). If instead it is refused (`busy`, `rate_limited`, `too_large`,
 * a steer that came too late), or a dropped link lost it, its text returns to the composer.
 * Regenerate, Edit and Retry replace the last turn (`edit.js`); the page changes when their
 * run starts.
 */
import { AttachmentTray } from "./attachments.js";
import { BudgetMeter } from "./budget.js";
import { confirmDelete, renameInline } from "./chats.js";
import { ChatConnection, socketUrl } from "./connection.js";
import { LastTurnActions } from "./edit.js";
import { renderHistory } from "./history.js";
import { LinkIndicator } from "./link.js";
import { Notices } from "./notices.js";
import { Outbox } from "./outbox.js";
import { HistoryPaging } from "./paging.js";
import { keepTimesFresh, parseTime } from "./time.js";
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
  budget_exceeded: "You have used your token budget for today.",
  internal: "The server failed to handle a message from this page.",
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
  topbar: document.querySelector(".topbar"),
  sidebar: byId("sidebar"),
  sidebarToggle: byId("sidebar-toggle"),
  title: byId("chat-title"),
  chatActions: byId("chat-actions"),
  renameChat: byId("rename-chat"),
  deleteChat: byId("delete-chat"),
};

/** Refusals that give back what this page sent (`outbox.js`). */
const GIVE_BACK_CODES = new Set([
  "busy",
  "rate_limited",
  "too_large",
  "not_running",
  "bad_frame",
  "budget_exceeded",
]);

const notices = new Notices(byId("notices"));
const budget = new BudgetMeter(byId("token-budget"));
const widgets = new ReplyWidgets((name, payload) => send({ type: "external_event", name, payload }), {
  onAnswered: () => ui.input.focus({ preventScroll: true }),
});
const transcript = new Transcript(byId("transcript"), widgets, byId("transcript-empty"), {
  onUsage: (usage) => {
    showSessionUsage(addUsage(sessionUsage, usage));
    budget.spent(usage);
  },
  onRetry: retry,
});
const paging = new HistoryPaging(transcript, send, {
  // Older pages count only when the server gave no session total.
  onUsage: (usage) => sessionTotalKnown || showSessionUsage(addUsage(sessionUsage, usage)),
});
const lastTurn = new LastTurnActions(transcript, {
  regenerate: () => replaceLastTurn(null),
  edit: (content) => replaceLastTurn(content),
});
const tray = new AttachmentTray(ui.composer, {
  uploadUrl: config.attachmentsUrl,
  assistant: config.assistant,
  onChange: () => {
    ui.hint.textContent = composerProblem() ?? "";
    updateMode();
  },
});
const outbox = new Outbox({
  // A new chat is bound to the assistant its first message names (a stored one ignores it).
  send: (frame) =>
    send(frame.type === "user_message" && config.assistant ? { ...frame, assistant: config.assistant } : frame),
  transcript,
  input: ui.input,
  hint: ui.hint,
  onReplaceRefused: () => {
    lastTurn.refused();
    if (retrying !== null) {
      retrying.disabled = false;
      retrying.textContent = "Retry";
      retrying = null;
    }
    updateMode();
  },
  onAttachmentsBack: (refs) => tray.restore(refs),
});
const link = new LinkIndicator(
  { link: ui.link, label: ui.linkLabel, status: ui.linkStatus, retry: ui.retry },
  notices,
);
const connection = new ChatConnection(() => socketUrl(config.socketPath, lastSeq), {
  onFrame: handleFrame,
  onStatus: (status) => {
    link.show(status);
    updateMode();
  },
});

/** The highest `seq` applied (null before the first). */
let lastSeq = null;
/** The `session` frame's `last_seq`, applied once the replay after it is done. */
let sessionLastSeq = 0;
/** Whether this page has had a `session` frame (so a new one means it reconnected). */
let greeted = false;
/** The run this page shows live, or null. */
let liveRunId = null;
/** The highest message position shown. */
let maxPosition = -1;
/** Run items (`runs` of the session frame and history pages), by request id. */
const runs = new Map();
/** Paused runs a continuation took over: their turn goes on, whatever is said of them. */
const resumed = new Set();
let title = config.title || "";
let sessionUsage = null;
/** Whether the `session` frame gave the chat's token total (`usage`). */
let sessionTotalKnown = false;
/** The Retry button whose `regenerate` is on its way. */
let retrying = null;

function send(frame) {
  if (connection.send(frame)) {
    return true;
  }
  notices.show("Not connected, so nothing was sent. Your text is still here.", { key: "offline" });
  return false;
}

/** Whether a run is live (or a message this page sent is about to start one). */
function isRunning() {
  return liveRunId !== null || outbox.startsRun;
}

/** Switch the composer between sending and steering, and show Stop while a run is live. */
function updateMode() {
  const active = isRunning();
  const mode = active ? "steer" : "send";
  if (ui.composer.dataset.mode !== mode) {
    ui.composer.dataset.mode = mode;
    ui.label.textContent = active ? "Steer the answer" : "Message";
    ui.input.placeholder = active
      ? "Add guidance while the agent works… (Enter sends)"
      : "Ask something… (Enter sends, Shift+Enter adds a line)";
    ui.send.textContent = active ? "Steer" : "Send";
    ui.stop.disabled = false;
    ui.stop.textContent = "Stop";
  }
  ui.stop.hidden = !active;
  ui.send.disabled = !connection.isOpen || composerProblem() !== "";
  // Offline they stay: pressed then, they say nothing was sent, and keep the keyboard.
  lastTurn.refresh(!active);
}

function showTitle(text) {
  title = text;
  ui.title.textContent = title || "New chat";
  document.title = `${title || "New chat"} · zett`;
  const entry = ui.sidebar.querySelector("a[aria-current=page] .session-links__title");
  if (entry && title) {
    entry.textContent = title;
    entry.title = title;
  }
}

/**
 * Name an untitled chat after its first message, as the server does when it saves it
 * (whitespace collapsed, at most 80 characters), so the page need not reload to show it.
 */
function nameChatAfter(content) {
  if (title || typeof content !== "string") {
    return;
  }
  const text = content.split(/\s+/).filter(Boolean).join(" ");
  showTitle(text.length <= TITLE_LENGTH ? text : `${text.slice(0, TITLE_LENGTH - 1)}…`);
}

function showSessionUsage(usage) {
  sessionUsage = usage;
  const text = usageText(usage);
  ui.sessionUsage.hidden = !text;
  ui.sessionUsage.textContent = text ? `This chat: ${text}` : "";
  ui.sessionUsage.title = text ? usageDetail(usage) : "";
}

function rememberRuns(items) {
  for (const run of items ?? []) {
    if (run?.request_id) {
      runs.set(run.request_id, run);
    }
    if (run?.resumed_from) {
      resumed.add(run.resumed_from);
    }
  }
}

// --- sending --------------------------------------------------------------------------

/** Send `content` as a new message and show it. False (nothing shown) if it was not sent. */
function sendMessage(content) {
  const attachments = tray.take();
  if (!outbox.message(content, attachments)) {
    tray.restore(attachments);
    return false;
  }
  nameChatAfter(content);
  updateMode();
  return true;
}

/** Answer the last message again (`content` null), or an edited version of it. */
function replaceLastTurn(content) {
  if (!outbox.replace(content)) {
    return false;
  }
  updateMode();
  return true;
}

/** Retry after a failed or interrupted answer: the same message, answered again. */
function retry(prompt, button) {
  if (isRunning()) {
    notices.show("The agent is answering. Wait for it, or press Stop, then retry.", {
      tone: "info",
      key: "retry",
    });
    return;
  }
  if (replaceLastTurn(null)) {
    button.disabled = true;
    button.textContent = "Retrying…";
    retrying = button;
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
  if (typeof frame.seq === "number") {
    if (lastSeq !== null && frame.seq <= lastSeq) {
      return; // applied already (a replay that overlaps what this page saw)
    }
    lastSeq = frame.seq;
  }
  switch (frame.type) {
    case "session":
      showSession(frame);
      break;
    case "pong":
      caughtUp();
      break;
    case "run_started":
      startRun(frame);
      break;
    case "agent_event":
      transcript.handleEvent(frame.request_id, frame.event ?? {});
      if (frame.event?.type === "run_completed") {
        endRun(frame.request_id, "completed");
      }
      break;
    case "reply_accepted":
      replyAccepted(frame);
      break;
    case "run_failed":
      if (frame.status === "budget_exceeded") {
        budget.exceeded(frame);
      }
      endRun(frame.request_id, "failed", { error: frame.error ?? {} });
      break;
    case "run_cancelled":
      endRun(frame.request_id, "cancelled");
      break;
    case "run_interrupted":
      endRun(frame.request_id, frame.status === "expired" ? "expired" : "interrupted", {
        message: frame.message ?? "",
      });
      break;
    case "run_paused":
      endRun(frame.request_id, "paused");
      showPending(frame.pending);
      break;
    case "external_event_result":
      handleExternalEventResult(frame);
      break;
    case "history_page":
      rememberRuns(frame.runs);
      paging.received(frame, runs);
      break;
    case "error":
      handleError(frame);
      break;
    case "budget":
      budget.received(frame);
      break;
    default:
      break;
  }
}

/**
 * The first frame of every connection. Keeps the transcript when the page was showing the
 * run that is still active, or when nothing happened since the last frame it saw;
 * otherwise rebuilds it from the frame.
 */
function showSession(frame) {
  const reconnected = greeted;
  greeted = true;
  sessionLastSeq = Number.isInteger(frame.last_seq) ? frame.last_seq : 0;
  connection.send({ type: "ping" });
  if (frame.title) {
    showTitle(frame.title);
  }
  const active = frame.active_request_id ?? null;
  const sameRun = reconnected && active !== null && active === liveRunId;
  const nothingNew = reconnected && active === null && liveRunId === null && lastSeq !== null && sessionLastSeq <= lastSeq;
  if (reconnected) {
    outbox.reconnected(!(sameRun || nothingNew));
    paging.linkDropped();
  }
  if (sameRun || nothingNew) {
    updateMode();
    return;
  }
  const seenPosition = maxPosition;
  transcript.clear();
  runs.clear();
  rememberRuns(frame.runs);
  const history = Array.isArray(frame.history) ? frame.history : [];
  const { usage } = renderHistory(transcript, history, runs, {
    sink: transcript.root,
    pending: frame.pending ?? [],
  });
  transcript.removeRetryButtons({ keepLast: true });
  transcript.scrollToEnd();
  paging.reset(Boolean(frame.has_more_history), history);
  sessionTotalKnown = frame.usage !== undefined && frame.usage !== null;
  showSessionUsage(sessionTotalKnown ? frame.usage : usage);
  for (const item of history) {
    maxPosition = Math.max(maxPosition, item.position ?? -1);
  }
  // A message that was stored while the link was down is there now: no longer unconfirmed.
  const stored = history.filter((item) => item.role === "user" && !item.steering && item.position > seenPosition);
  for (const item of stored) {
    outbox.take("message", item.content);
  }
  liveRunId = active;
  updateMode();
}

/** The replay after `session` is over: what the link lost for good goes back to the user. */
function caughtUp() {
  lastSeq = Math.max(lastSeq ?? 0, sessionLastSeq);
  if (liveRunId !== null && transcript.turnFor(liveRunId) === null) {
    transcript.startRun(liveRunId);
  }
  outbox.caughtUp();
  updateMode();
}

function startRun(frame) {
  liveRunId = frame.request_id;
  maxPosition = Math.max(maxPosition, frame.position ?? -1);
  const at = parseTime(frame.created_at);
  if (frame.kind === "resume") {
    resumed.add(frame.resumed_from);
    transcript.resumeRun(frame.request_id, frame.resumed_from);
  } else {
    const content = frame.content ?? "";
    if (frame.kind === "regenerate" || frame.kind === "edit") {
      outbox.take("replace");
      lastTurn.replaced();
      retrying = null;
      transcript.dropFrom(frame.superseded_from);
    }
    const entry = outbox.take("message", content);
    let bubble = entry?.bubble?.isConnected ? entry.bubble : null;
    const stamp = { at, position: frame.position ?? null, requestId: frame.request_id };
    if (bubble !== null) {
      transcript.stampUserMessage(bubble, stamp);
    } else {
      // Sent by another tab (or before a reload): it goes before what this page still sends.
      bubble = transcript.addUserMessage(content, { ...stamp, before: outbox.firstPendingBubble(), attachments: frame.attachments });
    }
    transcript.startRun(frame.request_id, { prompt: content, bubble });
    nameChatAfter(content);
  }
  ui.chatActions.hidden = false; // the run stored the chat, if it was new
  updateMode();
}

/** A run ended. The live one closes; another (settled by the server) shows its outcome. */
function endRun(requestId, outcome, details = {}) {
  if (resumed.has(requestId)) {
    return; // a continuation carries its turn on
  }
  if (requestId === liveRunId) {
    liveRunId = null;
    ui.hint.textContent = "";
    transcript.endRun(requestId, outcome, details);
  } else {
    const turn = transcript.turnFor(requestId);
    if (turn !== null) {
      transcript.showOutcome(turn, requestId, outcome, details);
    }
  }
  updateMode();
}

/** Waits of a paused run (`run_paused`): each gets its widget back, if it has none. */
function showPending(pending) {
  for (const wait of pending ?? []) {
    if (widgets.has(wait.tool_call_id)) {
      continue;
    }
    const turn = transcript.turnFor(wait.request_id) ?? transcript.lastTurn();
    if (turn === null) {
      continue;
    }
    const payload = { ...wait.payload, tool_call_id: wait.tool_call_id, expires_at: wait.expires_at };
    const call =
      wait.payload?.source === "mcp"
        ? { id: payload.call_id, name: payload.tool }
        : { id: wait.tool_call_id, name: payload.tool ?? "ask_user" };
    const card = transcript.cardFor(turn, call);
    card.setState("waiting");
    transcript.showWidget(card, payload, wait.name, wait.request_id);
  }
}

/** A reply was taken (from any tab): close its widget, or show the steer as queued. */
function replyAccepted(frame) {
  const payload = frame.payload ?? {};
  if (frame.name === "steering_message") {
    outbox.takeReplayedSteer(payload.content);
    transcript.queueSteer(frame.request_id, payload.content ?? "");
  } else if (frame.correlation_id) {
    widgets.accepted(frame.correlation_id, payload);
  }
}

function handleExternalEventResult(frame) {
  const accepted = Array.isArray(frame.accepted_by) && frame.accepted_by.length > 0;
  if (frame.correlation_id) {
    widgets.settle(frame.correlation_id, frame.accepted_by, frame.reason ?? null);
  } else if (frame.name === "steering_message") {
    const entry = outbox.take("steer");
    if (!accepted) {
      notices.show("The steer arrived after the answer had finished, so it was not used.", { tone: "info" });
      if (entry) {
        outbox.restoreText(entry.content, "Your steer was not used");
        updateMode();
      }
    }
  }
}

function handleError(frame) {
  if (frame.code === "budget_exceeded") {
    budget.exceeded(frame);
  }
  const text =
    frame.code === "budget_exceeded" ? budget.refusalText() : (ERROR_TEXT[frame.code] ?? "Something went wrong.");
  notices.show(text, { detail: frame.message || "", key: `error-${frame.code}` });
  if (GIVE_BACK_CODES.has(frame.code)) {
    outbox.refused(frame.code);
    updateMode();
  }
  if (frame.code === "rate_limited" && paging.loading) {
    paging.refused();
  }
  if (frame.code === "not_running") {
    ui.stop.disabled = false;
    ui.stop.textContent = "Stop";
  }
}

// --- the composer ---------------------------------------------------------------------

const BLANK_HINT = "Only spaces: type a message to send.";

/**
 * Why the composer's text cannot be sent, for people ("" when it can; null when nothing
 * is typed, which needs no words): said as it is typed, with Send disabled, not after.
 */
function composerProblem() {
  const content = ui.input.value;
  if (content === "") {
    return tray.ready ? "Type a message to send with the files." : null;
  }
  if (!content.trim()) {
    return BLANK_HINT;
  }
  // A UTF-16 unit is at most three UTF-8 bytes: a text under a third of the limit fits.
  if (content.length * 3 > MAX_CONTENT_BYTES) {
    const bytes = new TextEncoder().encode(content).length;
    if (bytes > MAX_CONTENT_BYTES) {
      return `This is ${Math.ceil(bytes / 1024)} KiB; the limit is 32 KiB. Shorten it to send.`;
    }
  }
  return "";
}

ui.composer.addEventListener("submit", (event) => {
  event.preventDefault();
  const content = ui.input.value;
  const problem = composerProblem();
  if (problem !== "") {
    ui.hint.textContent = problem ?? "";
    ui.input.focus();
    return;
  }
  if (tray.busy && !isRunning()) {
    ui.hint.textContent = "Wait until the files are uploaded, then send.";
    return;
  }
  if (isRunning()) {
    if (outbox.steer(content)) {
      ui.input.value = "";
      updateMode();
    }
    return;
  }
  if (sendMessage(content)) {
    ui.input.value = "";
    ui.hint.textContent = "";
    updateMode();
  }
});

ui.input.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    ui.composer.requestSubmit();
  }
});

ui.input.addEventListener("input", () => {
  ui.hint.textContent = composerProblem() ?? "";
  updateMode();
});

ui.stop.addEventListener("click", stopRun);

// A new chat's starter prompts: each is sent as if typed, through the composer's checks.
for (const starter of document.querySelectorAll(".starters__prompt")) {
  starter.addEventListener("click", () => {
    ui.input.value = starter.dataset.prompt;
    updateMode();
    ui.composer.requestSubmit();
    ui.input.focus({ preventScroll: true });
  });
}

// --- renaming and deleting the chat -------------------------------------------------------

ui.chatActions.hidden = !config.stored;

ui.renameChat.addEventListener("click", () => {
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

ui.deleteChat.addEventListener("click", () => {
  confirmDelete({
    title: title || "Untitled chat",
    url: config.deleteUrl,
    onDeleted: (answer) => window.location.assign(answer.next || config.listUrl),
    onClose: () => ui.deleteChat.focus(),
  });
});

ui.retry.addEventListener("click", () => connection.retryNow());

// --- the sidebar on narrow screens ----------------------------------------------------

// The drawer opens under the bar, however tall the bar is (it wraps when the link is down).
new ResizeObserver(() => {
  document.documentElement.style.setProperty("--topbar-height", `${ui.topbar.offsetHeight}px`);
}).observe(ui.topbar);

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
  // Escape belongs to a reply widget, an editor or a dialog when focus is there.
  const inWidget = event.target instanceof Element && event.target.closest(".widget, .rename, .msg__editor, dialog");
  if (isRunning() && !inWidget && !ui.stop.disabled) {
    event.preventDefault();
    stopRun();
  }
});

updateMode();
keepTimesFresh(byId("transcript"));
connection.start();
ui.input.focus();
