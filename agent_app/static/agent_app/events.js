/**
 * Live `agent_event`s (the runtime's event dicts, docs/protocol.md) applied to the turn of
 * their request: text and reasoning streamed delta by delta, then replaced by each model
 * call's final message; tool cards that run and finish; the widgets of questions and
 * approvals; steers the agent took; cut-off and compaction notes.
 */
import { contentText } from "./blocks.js";
import { addUsage } from "./usage.js";

const STOP_REASONS = {
  max_tokens: "it reached the length limit",
  content_filter: "a content filter stopped it",
  refusal: "the model refused to go on",
  other: "the model stopped early",
};

const TOOL_ENDS = { tool_completed: "done", tool_failed: "failed", tool_skipped: "skipped" };

/** "The answer was cut off (it reached the length limit: …)." */
export function cutOffText(stop) {
  const reason = STOP_REASONS[stop?.reason] ?? STOP_REASONS.other;
  const detail = stop?.detail ? `: ${stop.detail}` : "";
  return `The answer was cut off (${reason}${detail}).`;
}

function askUserArguments(payload) {
  const args = { question: payload.question };
  if (payload.options) {
    args.options = payload.options;
  }
  if (payload.allow_multiple) {
    args.allow_multiple = true;
  }
  return args;
}

/**
 * Apply one event of request `requestId` to `transcript`. `onUsage` gets the token usage
 * of each model call that completes.
 */
export function applyEvent(transcript, requestId, event, onUsage) {
  let turn = transcript.turnFor(requestId) ?? transcript.startRun(requestId);
  if (event.parent_tool_call_id) {
    // A delegate's work (a sub-run): shown inside the card of the call that runs it.
    turn = transcript.subTurnFor(turn, event.parent_tool_call_id, event.agent ?? "");
  }
  switch (event.type) {
    case "model_started":
      turn.text = turn.reasoning = turn.callText = turn.callReasoning = null;
      break;
    case "reasoning_started":
      turn.reasoning = transcript.openReasoning(turn);
      break;
    case "reasoning_delta":
      if (event.delta) {
        (turn.reasoning ??= transcript.openReasoning(turn)).append(event.delta);
      }
      break;
    case "reasoning_completed":
      turn.reasoning = null;
      break;
    case "content_started":
      turn.text = transcript.openText(turn);
      break;
    case "text_delta":
      if (event.delta) {
        (turn.text ??= transcript.openText(turn)).append(event.delta);
      }
      break;
    case "content_completed":
      turn.text?.finish();
      turn.text = null;
      break;
    case "model_completed":
      settleModelCall(transcript, turn, event.response?.message, event.content_omitted);
      countUsage(turn, event.response?.usage, onUsage);
      break;
    case "model_stopped":
      settleModelCall(transcript, turn, event.message ?? event.response?.message, event.content_omitted);
      countUsage(turn, event.response?.usage, onUsage);
      transcript.addNote(cutOffText(event.stop), "warning", turn);
      break;
    case "tool_started":
      for (const call of event.tool_calls ?? []) {
        const card = transcript.cardFor(turn, call);
        if (!transcript.widgets.isOpen(call.id)) {
          card.setState("running");
        }
      }
      break;
    case "tool_completed":
    case "tool_failed":
    case "tool_skipped":
      finishTool(transcript, turn, event);
      break;
    case "server_tool_started": {
      const call = event.server_tool_call ?? {};
      transcript.cardFor(turn, { id: call.id, name: call.name, arguments: call.input }, "Server tool");
      break;
    }
    case "server_tool_completed":
    case "server_tool_failed": {
      const result = event.server_tool_result ?? {};
      const card = transcript.cardFor(turn, { id: result.call_id, name: result.name }, "Server tool");
      const state = event.type === "server_tool_failed" ? "failed" : "done";
      card.finish(state, contentText(result.output ?? ""), { errorText: result.error ?? "" });
      break;
    }
    case "steering_started":
      turn.text?.finish();
      turn.text = null;
      transcript.applySteer(turn, event.steering_message?.content ?? "");
      break;
    case "compaction_completed":
      if (event.applied) {
        transcript.addNote("Earlier messages were summarised to fit the model's context.", "muted", turn);
      }
      break;
    case "custom":
      showWait(transcript, turn, requestId, event);
      break;
    case "run_completed":
      turn.text?.finish();
      break;
    default:
      break;
  }
}

/** A question (`ask_user`) or approval (`approval_requested`): its card, then its widget. */
function showWait(transcript, turn, requestId, event) {
  const payload = event.payload ?? {};
  if (event.name === "browser_tool") {
    // A host-page tool waits for the page's script (client.js), not for a person: its card
    // says it is waiting, and no widget asks anything.
    const call = { id: payload.tool_call_id, name: payload.tool, arguments: payload.arguments };
    transcript.cardFor(turn, call).setState("waiting");
    return;
  }
  if (event.name !== "ask_user" && event.name !== "approval_requested") {
    return;
  }
  // The question comes from the tool's before_tool hook, ahead of TOOL_STARTED: open the
  // call's card now so the widget sits under the card it belongs to.
  const call =
    payload.source === "mcp" // an MCP server's question: under the card of the call that asks
      ? { id: payload.call_id, name: payload.tool }
      : event.name === "ask_user"
        ? { id: payload.tool_call_id, name: "ask_user", arguments: askUserArguments(payload) }
        : { id: payload.tool_call_id, name: payload.tool, arguments: payload.arguments };
  const card = transcript.cardFor(turn, call);
  const widgets = transcript.widgets;
  if (widgets.has(payload.tool_call_id)) {
    // Asked again by a continuation that already has (or is getting) its answer.
    if (widgets.isOpen(payload.tool_call_id)) {
      card.setState("waiting");
    }
    return;
  }
  card.setState("waiting");
  const widget = transcript.showWidget(card, payload, event.name, requestId);
  // A delegate's question sits in the closed card of the call running it: open the way.
  for (let outer = card.el.parentElement?.closest("details"); outer; outer = outer.parentElement?.closest("details")) {
    outer.open = true;
  }
  widget.scrollIntoView({ block: "nearest" });
  // The agent is blocked on this answer: take the keyboard there, unless the user is in
  // the middle of typing something else: on the first control, as a question's first
  // option, so an approval's Approve (Deny is the next Tab). The key that sent the message
  // went down before the approval existed, so it cannot press Approve.
  // In a shadow root, its own activeElement (null while focus is outside it).
  const active = widget.getRootNode().activeElement ?? null;
  const pageIdle = document.activeElement === null || document.activeElement === document.body;
  const idle =
    active === null || active === document.body
      ? pageIdle
      : active.dataset?.part === "input" && !active.value;
  if (idle) {
    widget.querySelector("textarea, input, button")?.focus({ preventScroll: true });
  }
}

function finishTool(transcript, turn, event) {
  const message = event.message ?? {};
  const calls = event.tool_calls?.length ? event.tool_calls : [{ id: message.tool_call_id, name: message.name }];
  const errorText = event.error ? `${event.error.type}: ${event.error.message}` : "";
  for (const call of calls) {
    const card = transcript.cardFor(turn, call);
    card.finish(TOOL_ENDS[event.type], contentText(message.content), {
      errorText,
      truncated: Boolean(event.content_truncated),
    });
    transcript.widgets.resolve(call.id, message.attributes?.reply);
  }
  const handoff = message.attributes?.handoff;
  if (handoff?.name && !event.parent_tool_call_id) {
    // The chat was handed to another assistant, which answers from here on.
    transcript.addNote(`${handoff.name} answers from now on.`, "muted", turn);
    transcript.root.dispatchEvent(new CustomEvent("zett-handoff", { bubbles: true, composed: true, detail: handoff }));
  }
}

/**
 * Make the finished model call's text match its final message (deltas are display only),
 * unless the server left the text out to keep the frame small: then the streamed text
 * stays.
 */
function settleModelCall(transcript, turn, message, omitted = false) {
  if (!message) {
    return;
  }
  if (message.reasoning) {
    (turn.callReasoning ?? transcript.openReasoning(turn)).set(message.reasoning);
  }
  if (message.content && !omitted) {
    (turn.callText ?? transcript.openText(turn)).set(contentText(message.content));
  }
  if (turn.callText) {
    turn.callText.final = true;
    turn.callText.finish();
  }
  turn.text = turn.reasoning = null;
}

function countUsage(turn, usage, onUsage) {
  if (usage) {
    turn.usage = addUsage(turn.usage, usage);
    onUsage(usage);
  }
}
