/**
 * One chat's socket as a small API (`ZettClient`); pages import it from `client.js`, with
 * the whole chat UI (`mount`). docs/client.md documents both.
 *
 * The client keeps the protocol's promises for whoever builds on it: it reconnects by
 * itself (`connection.js`) and resumes with `?after_seq=` (the last `seq` it applied), it
 * drops frames it has applied already (a replay that overlaps what it saw), and it tells
 * its listeners when the replay after a `session` frame is over (the `pong` answering the
 * `ping` it sends right after `session`). Host-page tools: a `browser_tool` event (live,
 * replayed, or listed as pending after a reload) runs the handler registered with
 * `onTool(name, fn)`, once per call, and its result goes back as a `browser_tool_result`
 * reply; a page with no handler for a tool leaves the call to another page, or to its
 * deadline.
 */
import { ChatConnection, socketUrl } from "./connection.js";

/** The custom event that asks the page to run one of the assistant's browser tools. */
export const BROWSER_TOOL_EVENT = "browser_tool";
/** The reply that carries a browser tool's result. */
export const BROWSER_TOOL_RESULT = "browser_tool_result";
const TOOL_ENDS = new Set(["tool_completed", "tool_failed", "tool_skipped"]);

/** The socket path of chat `chatId` under the app's socket prefix. */
export function chatSocketPath(chatId, prefix = "/ws/sessions/") {
  return `${prefix.endsWith("/") ? prefix : `${prefix}/`}${chatId}/`;
}

/** A fresh chat id (a chat is stored by its first message, so an unused id costs nothing). */
export function newChatId() {
  if (globalThis.crypto?.randomUUID) {
    return crypto.randomUUID();
  }
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  bytes[6] = (bytes[6] & 0x0f) | 0x40;
  bytes[8] = (bytes[8] & 0x3f) | 0x80;
  const hex = [...bytes].map((byte) => byte.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

export class ZettClient {
  /**
   * @param {{chatId?: string, socketPath?: string, socketPrefix?: string, url?: string,
   *          assistant?: string}} options
   *   Where the socket is: a whole `url`, a `socketPath` on this page's host, or a
   *   `chatId` (a new one when omitted) under `socketPrefix`. `assistant` names the
   *   assistant a new chat is bound to by its first message.
   */
  constructor({ chatId = null, socketPath = null, socketPrefix = "/ws/sessions/", url = null, assistant = null } = {}) {
    this.chatId = chatId ?? (socketPath || url ? null : newChatId());
    this.path = socketPath ?? (this.chatId ? chatSocketPath(this.chatId, socketPrefix) : null);
    this.fixedUrl = url;
    this.assistant = assistant;
    /** The highest `seq` applied (null before the first): the resume point. */
    this.lastSeq = null;
    this.sessionLastSeq = 0;
    this.listeners = new Map();
    this.tools = new Map();
    /** Browser tool calls this client ran (or is running), by tool call id. */
    this.toolCalls = new Set();
    this.unsentResults = new Map();
    /** Browser tool calls seen that no handler of this client has taken yet. */
    this.waitingCalls = new Map();
    this.connection = new ChatConnection(() => this.socketUrl(), {
      onFrame: (frame) => this.receive(frame),
      onStatus: (status) => this.emit("status", status),
    });
  }

  /** The URL of the next attempt: with `after_seq` once a frame was applied. */
  socketUrl() {
    if (this.fixedUrl) {
      const url = new URL(this.fixedUrl);
      if (this.lastSeq !== null) {
        url.searchParams.set("after_seq", String(this.lastSeq));
      }
      return url.toString();
    }
    return socketUrl(this.path, this.lastSeq);
  }

  /** Whether the link is up (the server greeted this socket). */
  get isOpen() {
    return this.connection.isOpen;
  }

  /** Open the socket (it reconnects and resumes by itself from then on). */
  connect() {
    this.connection.start();
    return this;
  }

  /** Skip the wait before the next reconnect attempt. */
  reconnectNow() {
    this.connection.retryNow();
  }

  /** Close the socket for good. */
  close() {
    this.connection.stopped = true;
    clearTimeout(this.connection.retryTimer);
    this.connection.socket?.close(1000);
  }

  // --- events ------------------------------------------------------------------------

  /**
   * Call `fn(frame)` for every frame of `type` (`"*"`: every frame; `"status"`: the link's
   * state, `{state, delayMs?, code?}`). Returns a function that removes it.
   */
  on(type, fn) {
    if (!this.listeners.has(type)) {
      this.listeners.set(type, new Set());
    }
    this.listeners.get(type).add(fn);
    return () => this.listeners.get(type)?.delete(fn);
  }

  emit(type, value) {
    for (const fn of [...(this.listeners.get(type) ?? [])]) {
      fn(value);
    }
    if (type !== "status") {
      for (const fn of [...(this.listeners.get("*") ?? [])]) {
        fn(value);
      }
    }
  }

  receive(frame) {
    if (typeof frame.seq === "number") {
      if (this.lastSeq !== null && frame.seq <= this.lastSeq) {
        return; // applied already
      }
      this.lastSeq = frame.seq;
    }
    if (frame.type === "session") {
      this.sessionLastSeq = Number.isInteger(frame.last_seq) ? frame.last_seq : 0;
      this.connection.send({ type: "ping" });
    } else if (frame.type === "pong") {
      this.lastSeq = Math.max(this.lastSeq ?? 0, this.sessionLastSeq);
    }
    this.emit(frame.type, frame);
    this.runToolsOf(frame);
    if (frame.type === "session") {
      this.flushResults();
    }
  }

  // --- sending -----------------------------------------------------------------------

  /** Send one raw frame (docs/protocol.md); false when the link is down. */
  sendFrame(frame) {
    return this.connection.send(frame);
  }

  /** Send a user message (a new chat is bound to the client's assistant by it). */
  send(content, extra = {}) {
    const frame = { type: "user_message", content, ...extra };
    if (this.assistant && frame.assistant === undefined) {
      frame.assistant = this.assistant;
    }
    return this.sendFrame(frame);
  }

  /** Reply to a wait: `name` is its `response_event`, `payload` has its `tool_call_id`. */
  reply(name, payload) {
    return this.sendFrame({ type: "external_event", name, payload });
  }

  /** Answer an `ask_user` question. */
  answer(toolCallId, answer) {
    return this.reply("ask_user_response", { tool_call_id: toolCallId, answer });
  }

  /** Approve or deny an `approval_requested` call (`digest` from its payload). */
  approve(toolCallId, approved, digest = undefined) {
    const payload = { tool_call_id: toolCallId, approved: Boolean(approved) };
    if (digest !== undefined) {
      payload.digest = digest;
    }
    return this.reply("approval_response", payload);
  }

  /** Steer the running answer. */
  steer(content) {
    return this.sendFrame({ type: "steer", content });
  }

  /** Stop the running answer. */
  cancel() {
    return this.sendFrame({ type: "cancel" });
  }

  /** Answer a message again: the one at `position` (a history item's), else the last. */
  regenerate(position = null) {
    return this.sendFrame(position === null ? { type: "regenerate" } : { type: "regenerate", position });
  }

  /** Replace the last message with `content` and answer that. */
  editLast(content) {
    return this.sendFrame({ type: "edit_last", content });
  }

  /** A new version of the message at `position`, with `content`, answered. */
  edit(position, content) {
    return this.sendFrame({ type: "edit", position, content });
  }

  /** Show version `index` (1-based) of the turn whose message is at `position`. */
  switchVersion(position, index) {
    return this.sendFrame({ type: "switch_version", position, index });
  }

  // --- host-page tools ---------------------------------------------------------------

  /**
   * Run `fn(args, call)` when the assistant calls its browser tool `name`; what it returns
   * (or resolves to) is the tool's result; a throw is the tool's error. `call` is
   * `{toolCallId, tool, client}`. Returns a function that removes the handler.
   */
  onTool(name, fn) {
    this.tools.set(name, fn);
    for (const payload of [...this.waitingCalls.values()]) {
      if (payload.tool === name) {
        this.runTool(payload); // asked before this handler existed
      }
    }
    return () => {
      if (this.tools.get(name) === fn) {
        this.tools.delete(name);
      }
    };
  }

  runToolsOf(frame) {
    if (frame.type === "agent_event" && frame.event?.type === "custom" && frame.event.name === BROWSER_TOOL_EVENT) {
      this.runTool(frame.event.payload ?? {});
    } else if (frame.type === "session" || frame.type === "run_paused") {
      for (const wait of frame.pending ?? []) {
        if (wait.name === BROWSER_TOOL_EVENT) {
          this.runTool({ ...wait.payload, tool_call_id: wait.tool_call_id });
        }
      }
    } else if (frame.type === "agent_event" && TOOL_ENDS.has(frame.event?.type)) {
      for (const call of frame.event.tool_calls ?? []) {
        this.waitingCalls.delete(call.id); // over: answered elsewhere, or past its deadline
      }
    } else if (frame.type === "reply_accepted" && frame.name === BROWSER_TOOL_RESULT && frame.correlation_id) {
      this.toolCalls.add(frame.correlation_id); // answered (by this page or another)
      this.unsentResults.delete(frame.correlation_id);
      this.waitingCalls.delete(frame.correlation_id);
    }
  }

  async runTool(payload) {
    const id = payload.tool_call_id;
    if (typeof id !== "string" || this.toolCalls.has(id)) {
      return;
    }
    const fn = this.tools.get(payload.tool);
    if (!fn) {
      this.waitingCalls.set(id, payload);
      return;
    }
    this.waitingCalls.delete(id);
    this.toolCalls.add(id);
    let reply;
    try {
      const result = await fn(payload.arguments ?? {}, { toolCallId: id, tool: payload.tool, client: this });
      reply = { tool_call_id: id, result: result === undefined ? null : result };
    } catch (error) {
      reply = { tool_call_id: id, error: String(error?.message ?? error) };
    }
    if (!this.reply(BROWSER_TOOL_RESULT, reply)) {
      this.unsentResults.set(id, reply); // the link is down: sent when it is up again
    }
  }

  /** Results that could not be sent while the link was down (after a `session` frame). */
  flushResults() {
    for (const [id, reply] of [...this.unsentResults]) {
      if (this.reply(BROWSER_TOOL_RESULT, reply)) {
        this.unsentResults.delete(id);
      }
    }
  }
}
