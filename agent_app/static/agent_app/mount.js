/**
 * `mount(root, options)`: the whole chat UI — transcript, composer, questions and approvals,
 * Stop, steering, resume — bound to one root (an element or a shadow root). The full chat
 * page and the widget are both this; docs/client.md documents its options.
 *
 * Every element is found inside `root` by its `data-part` (never by a page id). An element
 * without the parts gets an open shadow root with the chat's styles and parts in it
 * (`panel.js`), so the host page's CSS and the chat's never meet, as in the widget
 * (`shadow: false` builds them in the element itself). Parts a page does not want are simply
 * absent: the usage line, the link indicator, the starter prompts. What belongs to a page
 * and not to a chat (the chat's title, renaming, deleting, the sidebar, `document.title`)
 * goes through the hooks `onTitle` and `onStored`.
 *
 * Frames follow docs/protocol.md. A run belongs to the session, not to this view: every
 * view sees every run (`run_started`, even for a message another tab sent), closing or
 * reloading never stops it, and only Stop (or Escape) sends `cancel`. While a run is live
 * the composer steers it instead of starting a new one.
 *
 * Resuming: the client (`zett_client.js`) reconnects with `?after_seq=`. If the run this view
 * was showing is still going, or nothing happened meanwhile, the transcript stays as it is
 * and the replayed frames continue it. Otherwise (and on a fresh load) the transcript is
 * rebuilt from the `session` frame — history, run outcomes, pending waits — and the replay
 * that follows rebuilds the active run from its `run_started`. The `pong` that answers the
 * client's `ping` says the replay is over.
 *
 * Files (`attachmentTray`, with `attachmentsUrl`) upload as they are picked, dropped or
 * pasted, and go with the next message as references; a refused message gives them back.
 * Text the user typed is never lost to a refusal: a message or steer stays "unconfirmed"
 * until the server shows it took it (the message's `run_started`; the steer's
 * `external_event_result`). If instead it is refused (`busy`, `rate_limited`, `too_large`,
 * a steer that came too late), or a dropped link lost it, its text returns to the composer.
 * Regenerate, Edit and Retry replace the last turn (`edit.js`); the view changes when their
 * run starts.
 */
import { attachmentTray } from "./attachments.js";
import { bindComposer, composerProblem } from "./composer.js";
import { ZettClient } from "./zett_client.js";
import { LastTurnActions } from "./edit.js";
import { renderHistory, showWait } from "./history.js";
import { lazyModule } from "./lazy.js";
import { gateFor, laterBudget, laterPaging, laterSwitcher, laterWidgets } from "./later.js";
import { LinkIndicator } from "./link.js";
import { ERROR_TEXT, Notices } from "./notices.js";
import { Outbox } from "./outbox.js";
import { DEFAULT_TEXTS, prepare } from "./panel.js";
import { People } from "./people.js";
import { ComposerBox, JumpToLatest } from "./phone.js";
import { keepTimesFresh, parseTime } from "./time.js";
import { StopButton } from "./stop.js";
import { Transcript } from "./transcript.js";
import { addUsage, usageDetail, usageText } from "./usage.js";

const gone = lazyModule("gone.js"); // the "this chat is gone" panel: once in a chat's life, if ever

/** Refusals that give back what this view sent (`outbox.js`). */
const GIVE_BACK_CODES = new Set(["busy", "rate_limited", "too_large", "not_running", "bad_frame", "budget_exceeded"]);

/** A stand-in for an absent optional part: writes to it go nowhere. */
function absent() {
  return document.createElement("span");
}

/**
 * Mount the chat UI into `root`.
 *
 * @param {Element|ShadowRoot} where
 * @param {{
 *   client?: ZettClient, chatId?: string, socketPath?: string, socketPrefix?: string,
 *   assistant?: string, title?: string, chatTitle?: string, texts?: object, height?: string,
 *   theme?: "auto"|"light"|"dark", shadow?: boolean, attachmentsUrl?: string, csrfToken?: string,
 *   tools?: Record<string, Function>, keyboardTarget?: EventTarget, autofocus?: boolean, handoff?: boolean,
 *   onTitle?: (title: string) => void, onStored?: () => void,
 * }} options `onStored` is called when a run starts (the chat is stored by then).
 * @returns {{client: ZettClient, root: Element|ShadowRoot, focus: () => void, isRunning: () => boolean}}
 *   `root` is where the parts are (the shadow root mount made, if it made one).
 */
export function mount(where, options = {}) {
  const texts = { ...DEFAULT_TEXTS, ...(options.texts ?? {}), ...(options.title ? { title: options.title } : {}) };
  const root = prepare(where, texts, options);
  const host = root instanceof ShadowRoot ? root.host : root;
  if (options.height) {
    host.style.setProperty("--zett-height", options.height);
  }
  if (options.theme && options.theme !== "auto") {
    host.dataset.theme = options.theme;
  }
  const part = (name) => root.querySelector(`[data-part="${name}"]`);
  const optional = (name) => part(name) ?? absent();

  const ui = {
    composer: part("composer"),
    input: part("input"),
    label: part("label"),
    hint: part("hint"),
    send: part("send"),
    stop: part("stop"),
    link: optional("link"),
    linkLabel: optional("link-label"),
    retry: optional("reconnect"),
    linkStatus: optional("link-status"),
    sessionUsage: optional("usage"),
  };
  const client =
    options.client ??
    new ZettClient({
      chatId: options.chatId ?? null,
      socketPath: options.socketPath ?? null,
      socketPrefix: options.socketPrefix ?? "/ws/sessions/",
      assistant: options.assistant ?? null,
    });
  for (const [name, fn] of Object.entries(options.tools ?? {})) {
    client.onTool(name, fn);
  }
  const onTitle = options.onTitle ?? (() => {});
  const onStored = options.onStored ?? (() => {});

  const notices = new Notices(part("notices"));
  const box = new ComposerBox(ui.input);
  new JumpToLatest(part("transcript"), { onJump: () => ui.input.focus({ preventScroll: true }) });
  const stopper = new StopButton(ui.stop, { send, isOpen: () => client.isOpen, notices, text: texts.stop });
  const budget = laterBudget(optional("budget"));
  const widgets = laterWidgets((name, payload) => send({ type: "external_event", name, payload }), {
    onAnswered: () => ui.input.focus({ preventScroll: true }),
  });
  const transcript = new Transcript(part("transcript"), widgets, part("empty"), {
    onUsage: (usage) => {
      showSessionUsage(addUsage(sessionUsage, usage));
      budget.spent(usage);
    },
    onRetry: retry,
  });
  const paging = laterPaging(transcript, send, {
    // Older pages count only when the server gave no session total.
    onUsage: (usage) => sessionTotalKnown || showSessionUsage(addUsage(sessionUsage, usage)),
  });
  const lastTurn = new LastTurnActions(transcript, {
    regenerate: (position) => replaceLastTurn(null, position),
    edit: (content, position) => replaceLastTurn(content, position),
  });
  const versions = laterSwitcher(transcript, send);
  const tray = attachmentTray(ui.composer, {
    uploadUrl: options.attachmentsUrl ?? "",
    assistant: options.assistant ?? "",
    csrfToken: options.csrfToken ?? "",
    limits: options.attachmentLimits ?? null,
    onChange: () => {
      ui.hint.textContent = problem() ?? "";
      updateMode();
    },
  });
  const outbox = new Outbox({
    // A new chat is bound to the assistant its first message names (a stored one ignores it).
    send: (frame) =>
      send(frame.type === "user_message" && client.assistant ? { ...frame, assistant: client.assistant } : frame),
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
  const people = new People({ transcript, send, notices, composer: ui.composer, handoff: Boolean(options.handoff) });

  /** Whether this view has had a `session` frame (so a new one means it reconnected). */
  let greeted = false;
  /** The run this view shows live, or null. */
  let liveRunId = null;
  /** The highest message position shown. */
  let maxPosition = -1;
  /** Run items (`runs` of the session frame and history pages), by request id. */
  const runs = new Map();
  /** Paused runs a continuation took over: their turn goes on, whatever is said of them. */
  const resumed = new Set();
  /** The chat's own title (named after its first message when it has none). */
  let title = options.chatTitle || "";
  let sessionUsage = null;
  /** Whether the `session` frame gave the chat's token total (`usage`). */
  let sessionTotalKnown = false;
  /** The Retry button whose `regenerate` is on its way. */
  let retrying = null;

  function send(frame) {
    if (client.sendFrame(frame)) {
      return true;
    }
    notices.show("Not connected, so nothing was sent. Your text is still here.", { key: "offline" });
    return false;
  }

  /** What keeps the composer from sending (`composer.js`), files counted. */
  function problem() {
    return composerProblem(ui.input.value, { withFiles: tray.ready });
  }

  /** Whether a run is live (or a message this view sent is about to start one). */
  function isRunning() {
    return liveRunId !== null || outbox.startsRun;
  }

  /** Switch the composer between sending and steering, and show Stop while a run is live. */
  function updateMode() {
    const active = isRunning();
    const mode = active ? "steer" : "send";
    if (ui.composer.dataset.mode !== mode) {
      ui.composer.dataset.mode = mode;
      ui.label.textContent = active ? texts.steerLabel : texts.messageLabel;
      box.placeholder(active ? texts.steerPlaceholder : texts.placeholder);
      ui.send.textContent = active ? texts.steer : texts.send;
      stopper.clear();
    }
    ui.stop.hidden = !active;
    box.fit();
    ui.send.disabled = !client.isOpen || problem() !== "";
    // Offline they stay: pressed then, they say nothing was sent, and keep the keyboard.
    lastTurn.refresh(!active);
    versions.refresh(!active);
  }

  function showTitle(text) {
    title = text;
    onTitle(title);
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

  // --- sending ------------------------------------------------------------------------

  /** Send `content` as a new message and show it. False (nothing shown) if it was not sent. */
  function sendMessage(content) {
    const attachments = tray.take();
    if (!outbox.message(content, attachments)) {
      tray.restore(attachments);
      return false;
    }
    updateMode();
    return true;
  }

  /** Answer a message again (`content` null), or an edited version (`position` null: the last). */
  function replaceLastTurn(content, position = null) {
    if (!outbox.replace(content, position)) {
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
    stopper.press();
  }

  // --- frames from the server ---------------------------------------------------------

  // Parts some chats use load with the first frame that needs them (`later.js`, `gate.js`).
  const gate = gateFor(client, { widgets, paging, versions, budget });
  const on = (type, handler) => gate.on(type, handler);
  gate.onStatus((status) => {
    link.show(status);
    updateMode();
    if (status.state === "refused") {
      gone.get().then(({ showGone }) => showGone(ui, notices, status.code, { listUrl: options.listUrl ?? null }));
    }
  });
  on("session", showSession);
  on("pong", caughtUp);
  on("run_started", startRun);
  on("agent_event", (frame) => {
    transcript.handleEvent(frame.request_id, frame.event ?? {});
    if (frame.event?.type === "run_completed") {
      endRun(frame.request_id, "completed");
    }
  });
  on("reply_accepted", replyAccepted);
  on("run_failed", (frame) => {
    if (frame.status === "budget_exceeded") {
      budget.exceeded(frame);
    }
    endRun(frame.request_id, "failed", { error: frame.error ?? {} });
  });
  on("run_cancelled", (frame) => endRun(frame.request_id, "cancelled"));
  on("run_continued", (frame) => transcript.continueRun(frame.request_id));
  on("run_interrupted", (frame) =>
    endRun(frame.request_id, frame.status === "expired" ? "expired" : "interrupted", {
      message: frame.message ?? "",
    }),
  );
  on("run_paused", (frame) => {
    endRun(frame.request_id, "paused");
    showPending(frame.pending);
  });
  on("external_event_result", handleExternalEventResult);
  on("history_page", (frame) => {
    rememberRuns(frame.runs);
    paging.received(frame, runs);
  });
  on("branch_switched", (frame) => {
    versions.switched(frame, { runs, paging, live: liveRunId !== null });
    maxPosition = Math.max(frame.position - 1, ...(frame.messages ?? []).map((item) => item.position ?? -1));
    updateMode();
  });
  on("error", handleError);
  on("budget", (frame) => budget.received(frame));
  on("handoff_requested", (frame) => people.handoffRequested(frame));
  on("taken_over", (frame) => people.takenOver(frame));
  on("handed_back", () => people.handedBack());
  on("staff_message", (frame) => people.staffMessage(frame));
  on("customer_message", customerMessage);
  on("feedback_saved", (frame) => people.saved(frame));

  /**
   * The first frame of every connection. Keeps the transcript when the view was showing
   * the run that is still active, or when nothing happened since the last frame it saw;
   * otherwise rebuilds it from the frame.
   */
  function showSession(frame) {
    const reconnected = greeted;
    greeted = true;
    const sessionLastSeq = client.sessionLastSeq;
    if (frame.title) {
      showTitle(frame.title);
    }
    const active = frame.active_request_id ?? null;
    const sameRun = reconnected && active !== null && active === liveRunId;
    const lastSeq = client.lastSeq;
    const nothingNew =
      reconnected && active === null && liveRunId === null && lastSeq !== null && sessionLastSeq <= lastSeq;
    // The run the view was showing ended while the link was down, interrupted (its
    // workers died and it could not go on), and nothing came after it: what the person
    // read stays, marked interrupted, with Retry (the text was never stored).
    const runsNow = Array.isArray(frame.runs) ? frame.runs : [];
    const lastRun = runsNow.length ? runsNow[runsNow.length - 1] : null;
    const cutOff =
      reconnected &&
      active === null &&
      liveRunId !== null &&
      lastRun?.request_id === liveRunId &&
      lastRun.status === "interrupted";
    if (reconnected) {
      outbox.reconnected(!(sameRun || nothingNew || cutOff));
      paging.linkDropped();
    }
    if (cutOff) {
      rememberRuns(runsNow);
      endRun(liveRunId, "interrupted", { message: lastRun.error?.message ?? "" });
      updateMode();
      return;
    }
    if (sameRun || nothingNew) {
      updateMode();
      return;
    }
    const seenPosition = maxPosition;
    transcript.clear();
    people.session(frame.support);
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
    if (liveRunId !== null && transcript.turnFor(liveRunId) === null) {
      transcript.startRun(liveRunId);
    }
    outbox.caughtUp();
    updateMode();
    stopper.caughtUp(liveRunId !== null);
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
        // Sent by another tab (or before a reload): it goes before what this view still sends.
        bubble = transcript.addUserMessage(content, {
          ...stamp,
          before: outbox.firstPendingBubble(),
          attachments: frame.attachments,
        });
      }
      transcript.startRun(frame.request_id, { prompt: content, bubble });
    }
    // A new chat is named after its first message by the server (every tab hears it here).
    if (frame.title && frame.title !== title) {
      showTitle(frame.title);
    }
    onStored(); // the run stored the chat, if it was new
    updateMode();
  }

  /** A message the team reads while it answers the chat: stored, no run answers it. */
  function customerMessage(frame) {
    maxPosition = Math.max(maxPosition, frame.position ?? -1);
    const entry = outbox.take("message", frame.content);
    const stamp = { at: parseTime(frame.created_at), position: frame.position ?? null, requestId: null };
    if (entry?.bubble?.isConnected) {
      transcript.stampUserMessage(entry.bubble, stamp);
    } else {
      transcript.addUserMessage(frame.content, {
        ...stamp,
        before: outbox.firstPendingBubble(),
        attachments: frame.attachments,
      });
    }
    onStored();
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
      const turn = transcript.turnFor(wait.request_id) ?? transcript.lastTurn();
      if (!widgets.has(wait.tool_call_id) && turn !== null) {
        showWait(transcript, turn, wait);
      }
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
    if (versions.pending !== null && (frame.code === "busy" || frame.code === "bad_frame")) {
      versions.refused(); // a switch was refused: nothing of the outbox was
    } else if (GIVE_BACK_CODES.has(frame.code)) {
      outbox.refused(frame.code);
      updateMode();
    }
    if (frame.code === "rate_limited" && paging.loading) {
      paging.refused();
    }
    if (frame.code === "not_running") {
      stopper.clear();
    }
  }

  bindComposer(root, ui, {
    problem,
    isRunning,
    sendMessage,
    steer: (content) => outbox.steer(content),
    uploading: () => tray.busy,
    updateMode,
    stopRun,
    reconnect: () => client.reconnectNow(),
    keyboardTarget: options.keyboardTarget ?? root,
  });

  updateMode();
  keepTimesFresh(part("transcript"));
  if (!options.client || !client.connection.socket) {
    client.connect();
  }
  if (options.autofocus) {
    ui.input.focus();
  }
  return { client, root, focus: () => ui.input.focus(), isRunning };
}
