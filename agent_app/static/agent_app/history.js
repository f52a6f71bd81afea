/**
 * Stored history rendered into the transcript: the `session` frame's newest page, and the
 * older pages `history_before` brings (docs/protocol.md, *History items* and *Runs*).
 *
 * Each item becomes what the page showed when it happened live: a user message (or a
 * steer) with its time, an answer (a stopped one as finished Markdown), its tool cards, and
 * for a question or approval the widget as it was settled (`attributes.reply`: "You
 * approved this", "You answered: …", "Nobody answered in time"). After the last item of a
 * run comes how the run ended, from the `runs` list: stopped, failed (with Retry), or
 * interrupted. Waits of a paused run (`pending`) come back as open widgets.
 *
 * Pages are rendered newest first, so a run whose items span two pages gets its outcome
 * once, from the newer page; a turn cut by a page boundary shows as two adjacent turns.
 */
import { contentText } from "./blocks.js";
import { cutOffText } from "./events.js";
import { staffMessage } from "./people.js";
import { parseTime } from "./time.js";
import { addUsage } from "./usage.js";
import { showVersions } from "./versions.js";

const TRUNCATED_TEXT = "This message is too long to show here in full; it is stored whole.";
/** Run states after which a turn is over and gets its footer. */
const UNFINISHED = new Set(["running", "paused"]);

/**
 * Render `items` (oldest first) into `sink` (the transcript, or a fragment inserted above
 * it). `runs` maps request ids to run items. `continues`: the content after `sink` goes on
 * with the last turn of these items (an older page), so that turn gets no footer.
 * Returns the token usage the items carry, summed (null when none does), and the last
 * turn rendered.
 */
export function renderHistory(transcript, items, runs, { sink, continues = false, pending = [] }) {
  const renderer = new HistoryRenderer(transcript, runs, sink);
  transcript.bulk = true;
  try {
    items.forEach((item, index) => {
      renderer.item(item);
      const next = items[index + 1];
      if (item.request_id && next?.request_id !== item.request_id) {
        renderer.outcome(item.request_id);
      }
    });
    for (const wait of pending) {
      renderer.pending(wait);
    }
    renderer.finish({ continues });
  } finally {
    transcript.bulk = false;
  }
  return { usage: renderer.usage, lastTurn: renderer.turns.at(-1) ?? null };
}

class HistoryRenderer {
  constructor(transcript, runs, sink) {
    this.transcript = transcript;
    this.runs = runs;
    this.sink = sink;
    this.turn = null;
    this.prompt = null;
    this.turns = [];
    this.usage = null;
  }

  item(item) {
    const at = parseTime(item.created_at);
    switch (item.role) {
      case "user":
        if (item.steering) {
          this.steer(item, at);
        } else {
          this.userMessage(item, at);
        }
        break;
      case "assistant":
        this.answer(this.turnOf(item), item, at);
        break;
      case "tool":
        this.toolResult(this.turnOf(item), item);
        break;
      case "staff":
        this.turn = null;
        this.transcript.append(staffMessage(item, { at }), this.sink);
        break;
      case "agent":
        this.transcript.addNote(`Instruction to the agent: ${contentText(item.content)}`, "muted", this.turnOf(item));
        break;
      default:
        break;
    }
  }

  userMessage(item, at) {
    this.turn = null;
    this.prompt = contentText(item.content);
    const bubble = this.transcript.addUserMessage(item.content, {
      at,
      position: item.position,
      requestId: item.request_id,
      parent: this.sink,
      attachments: item.attachments,
    });
    if (item.content_truncated) {
      bubble.append(this.truncatedNote());
    }
    if (item.versions) {
      showVersions(bubble, item.versions);
    }
  }

  steer(item, at) {
    const turn = this.turnOf(item);
    const bubble = this.transcript.addUserMessage(item.content, {
      steer: true,
      at,
      position: item.position,
      requestId: item.request_id,
      parent: turn.el,
    });
    this.transcript.setSteerState(bubble, "applied", "");
  }

  /** The current turn, for `item`'s request (a new one when none is open). */
  turnOf(item) {
    if (this.turn === null) {
      this.turn = this.transcript.appendTurn(item.request_id ?? null, { parent: this.sink });
      this.turn.prompt = this.prompt;
      this.turns.push(this.turn);
    }
    this.transcript.addRequest(this.turn, item.request_id);
    return this.turn;
  }

  /** A stored answer: reasoning, text (stopped: `partial`), its calls, a cut-off note. */
  answer(turn, item, at) {
    const transcript = this.transcript;
    if (item.reasoning) {
      transcript.openReasoning(turn).set(item.reasoning);
    }
    const text = contentText(item.content);
    if (text && item.id) {
      turn.answerId = item.id; // what a rating names (people.js)
    }
    if (text) {
      const segment = transcript.openText(turn);
      segment.set(text);
      segment.final = !item.partial;
      segment.finish({ stopped: Boolean(item.partial) });
    }
    if (item.content_truncated) {
      turn.el.append(this.truncatedNote());
    }
    const calls = item.tool_calls ?? [];
    for (const call of calls) {
      const known = transcript.cards.has(call.id);
      const card = transcript.cardFor(turn, call);
      if (!known) {
        card.setState("unanswered");
      }
    }
    if (calls.length) {
      turn.lastCalls = calls.map((call) => call.id);
    }
    if (item.stop_reason) {
      transcript.addNote(cutOffText({ reason: item.stop_reason }), "warning", turn);
    }
    turn.callText = turn.callReasoning = null;
    turn.usage = addUsage(turn.usage, item.usage);
    this.usage = addUsage(this.usage, item.usage);
    turn.endedAt = at ?? turn.endedAt ?? null;
  }

  toolResult(turn, item) {
    const transcript = this.transcript;
    const card = transcript.cardFor(turn, { id: item.tool_call_id, name: item.name });
    card.finish(item.success === false ? "failed" : "done", contentText(item.content), {
      truncated: Boolean(item.content_truncated),
    });
    const reply = item.attributes?.reply;
    if (reply && typeof reply === "object" && !transcript.widgets.has(item.tool_call_id)) {
      const call = { id: item.tool_call_id, name: card.name, arguments: card.arguments };
      const widget = transcript.widgets.settledFromHistory(call, reply, item.request_id);
      card.el.after(widget);
    }
    // An approved MCP call that also asked a question: the question, under the approval.
    const asked = item.attributes?.mcp_question;
    const askedId = `${item.tool_call_id}.mcp-question`;
    if (asked && typeof asked === "object" && !transcript.widgets.has(askedId)) {
      const widget = transcript.widgets.settledFromHistory({ id: askedId }, asked, item.request_id);
      (card.el.nextElementSibling ?? card.el).after(widget);
    }
  }

  /** After a run's last item: how it ended, unless a newer page said so already. */
  outcome(requestId) {
    const run = this.runs.get(requestId);
    const transcript = this.transcript;
    if (!run || transcript.outcomes.has(requestId) || this.resumed().has(requestId)) {
      return;
    }
    transcript.outcomes.add(requestId);
    if (!["cancelled", "failed", "interrupted", "expired", "budget_exceeded"].includes(run.status)) {
      return;
    }
    const turn = this.turnOf({ request_id: requestId });
    if (run.status === "cancelled") {
      // The calls the stop cut short: unsuccessful results with no answer behind them.
      for (const id of turn.lastCalls ?? []) {
        const card = transcript.cards.get(id);
        if (card?.state === "failed" && !transcript.widgets.has(id)) {
          card.setState("stopped");
        }
      }
    }
    const status = run.status === "budget_exceeded" ? "failed" : run.status; // shown as its reason says
    transcript.showOutcome(turn, requestId, status, { error: run.error, message: run.error?.message ?? "" });
  }

  /**
   * Runs a continuation took over. Their status should say `resumed`; the server may still
   * list one as `paused`, or settle it as `expired` later, although its turn went on.
   */
  resumed() {
    this.resumedIds ??= new Set([...this.runs.values()].map((run) => run.resumed_from).filter(Boolean));
    return this.resumedIds;
  }

  /** A wait of a paused run: its open widget, under its card. */
  pending(wait) {
    const transcript = this.transcript;
    if (!transcript.widgets.has(wait.tool_call_id)) {
      const turn = transcript.turnFor(wait.request_id) ?? this.turn ?? this.turnOf({ request_id: wait.request_id });
      showWait(transcript, turn, wait);
    }
  }

  /** Footers for the turns that are over. */
  finish({ continues }) {
    const last = this.turns.at(-1);
    for (const turn of this.turns) {
      if (continues && turn === last) {
        continue;
      }
      const unfinished = [...turn.requestIds].some(
        (id) => UNFINISHED.has(this.runs.get(id)?.status) && !this.resumed().has(id),
      );
      if (!unfinished) {
        this.transcript.showAnswerMeta(turn, turn.endedAt ?? null);
      }
    }
  }

  truncatedNote() {
    const note = document.createElement("p");
    note.className = "note note--muted msg__truncated";
    note.textContent = TRUNCATED_TEXT;
    return note;
  }
}

/**
 * Show one wait of a paused run (a `pending` item) under its tool card in `turn`: the card
 * waits, and its reply widget opens, unless the host page's script answers it (a browser
 * tool, `client.js`).
 */
export function showWait(transcript, turn, wait) {
  const payload = { ...wait.payload, tool_call_id: wait.tool_call_id, expires_at: wait.expires_at };
  payload.response_event ??= wait.response_event;
  const call =
    wait.kind === "approval" || wait.kind === "browser_tool"
      ? { id: wait.tool_call_id, name: payload.tool, arguments: payload.arguments }
      : payload.source === "mcp" // an MCP server's question: under the call that asks
        ? { id: payload.call_id, name: payload.tool }
        : { id: wait.tool_call_id, name: "ask_user" };
  const card = transcript.cardFor(turn, call);
  card.setState("waiting");
  if (wait.kind !== "browser_tool") {
    transcript.showWidget(card, payload, wait.name, wait.request_id);
  }
}
