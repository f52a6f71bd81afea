/**
 * The widgets through which the user answers a waiting agent: ask-user, approval, and an
 * MCP server's question during a tool call (an `ask_user` with `source: "mcp"`: the
 * requested schema's fields, then Accept, Decline or Cancel).
 *
 * Each widget is keyed by the tool call it answers and belongs to one run. Its states
 * (`data-state`):
 *
 * - `open`: waiting for the user; a countdown shows its deadline (`expires_at`);
 * - `sending`: this page sent a reply (an `external_event` frame) and waits for the
 *   server's `external_event_result`;
 * - `answered`: a reply was taken — this page's, another tab's (`reply_accepted`), or, in
 *   history, the tool result's `attributes.reply`;
 * - `expired`: nobody answered before the deadline;
 * - `rejected`: the server refused this page's reply, and says why (`reason`; after
 *   `internal` the widget is open again instead: nothing was delivered);
 * - `stopped`: the run was stopped before anyone answered; `closed`: the run ended
 *   otherwise (failed, interrupted, abandoned).
 *
 * Only an open widget takes input. If a reply cannot be sent (the link is down) the widget
 * stays open so the user can try again. When a widget closes while it has the keyboard,
 * `onAnswered` hands the keyboard back (to the composer) rather than leaving focus on a
 * disabled control, which browsers drop to `<body>`.
 */
import { element } from "./blocks.js";
import { Countdowns } from "./deadline.js";

let nextId = 0;
const uniqueId = (prefix) => `${prefix}-${++nextId}`;

const EXPIRED_TEXT = "Nobody answered in time.";

/** Why the server refused a reply (`external_event_result.reason`), for people. */
const REJECTED_TEXT = {
  expired: "Too late: nobody answered in time, so this answer was not used.",
  stale: "Not used: this was answered already.",
  mismatch: "Not used: the tool call changed since you saw it.",
  not_running: "Not used: the agent is no longer waiting for this answer.",
  not_allowed: "Not used: the server does not take this reply from a page.",
};
const REJECTED_DEFAULT = "Not delivered: the agent is no longer waiting for this answer.";

const OPEN_STATES = new Set(["open", "sending"]);

function button(label, { value = "", tone = "" } = {}) {
  const node = element("button", `button ${tone}`.trim(), label);
  node.type = "submit";
  node.value = value;
  return node;
}

function answerText(answer) {
  return Array.isArray(answer) ? answer.map(String).join(", ") : String(answer ?? "");
}

/**
 * What a reply said, for people: from a reply's payload (`kind` `approval` or
 * `ask_user`) or a tool result's `attributes.reply`.
 */
export function replySummary(kind, reply) {
  if (reply?.expired) {
    return EXPIRED_TEXT;
  }
  if (kind === "elicitation" || reply?.source === "mcp") {
    if ((reply?.action ?? "accept") === "accept") {
      const answer = reply?.answer ?? reply?.content ?? {};
      if (typeof answer !== "object" || Array.isArray(answer)) {
        return `You answered: ${answerText(answer)}`;
      }
      const fields = Object.entries(answer).map(([key, value]) => `${key}: ${value}`);
      return fields.length ? `You answered: ${fields.join(", ")}` : "You accepted.";
    }
    return reply?.action === "decline" ? "You declined." : "You cancelled.";
  }
  if (kind === "approval") {
    if (reply?.approved === true) {
      return "You approved this.";
    }
    return reply?.approved === false ? "You denied this." : "You answered.";
  }
  return `You answered: ${answerText(reply?.answer)}`;
}

/** The question an approval asks about `tool`, as the server words it. */
export function approvalQuestion(tool) {
  return `Allow ${tool} to run with these arguments?`;
}

export class ReplyWidgets {
  /**
   * @param {(name: string, payload: object) => boolean} sendExternalEvent
   * @param {{onAnswered?: () => void}} hooks `onAnswered` runs when a widget that had the
   *   keyboard stops taking input.
   */
  constructor(sendExternalEvent, { onAnswered = () => {} } = {}) {
    this.sendExternalEvent = sendExternalEvent;
    this.onAnswered = onAnswered;
    this.widgets = new Map();
    this.countdowns = new Countdowns();
  }

  has(toolCallId) {
    return this.widgets.has(toolCallId);
  }

  isOpen(toolCallId) {
    return OPEN_STATES.has(this.widgets.get(toolCallId)?.state);
  }

  /** Whether any widget (of `requestId`, when given) still waits for the user. */
  anyOpen(requestId = null) {
    return [...this.widgets.values()].some(
      (widget) => widget.state === "open" && (requestId === null || widget.requestId === requestId),
    );
  }

  /** A question from the `ask_user` tool: options as buttons, checkboxes, or free text. */
  askUser(payload, { requestId = null } = {}) {
    const options = Array.isArray(payload.options) ? payload.options.map(String) : [];
    const multiple = Boolean(payload.allow_multiple) && options.length > 0;
    const { form, body, actions } = this.frame("ask", "The agent asks", payload.question);

    if (options.length === 0) {
      const inputId = uniqueId("answer");
      const label = element("label", "visually-hidden", "Your answer");
      label.htmlFor = inputId;
      const input = element("textarea", "widget__input");
      input.id = inputId;
      input.rows = 2;
      input.name = "answer";
      input.addEventListener("keydown", (event) => {
        if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
          event.preventDefault();
          form.requestSubmit();
        }
      });
      body.append(label, input);
      actions.append(button("Send answer", { tone: "button--primary" }));
    } else if (multiple) {
      const group = element("fieldset", "widget__choices");
      group.append(element("legend", "visually-hidden", "Choose one or more"));
      for (const option of options) {
        const label = element("label", "widget__choice");
        const box = element("input");
        box.type = "checkbox";
        box.name = "answer";
        box.value = option;
        label.append(box, document.createTextNode(` ${option}`));
        group.append(label);
      }
      body.append(group);
      actions.append(button("Send answer", { tone: "button--primary" }));
    } else {
      actions.setAttribute("role", "group");
      actions.setAttribute("aria-label", "Choose one");
      for (const option of options) {
        actions.append(button(option, { value: option, tone: "button--choice" }));
      }
    }

    form.addEventListener("submit", (event) => {
      event.preventDefault();
      let answer;
      if (options.length === 0) {
        answer = form.elements.answer.value.trim();
        if (!answer) {
          this.say(form, "Type an answer first.");
          return;
        }
      } else if (multiple) {
        answer = [...form.querySelectorAll("input[name=answer]:checked")].map((box) => box.value);
        if (answer.length === 0) {
          this.say(form, "Choose at least one option.");
          return;
        }
      } else {
        answer = event.submitter?.value ?? "";
      }
      const reply = { tool_call_id: payload.tool_call_id, answer };
      this.submit(payload.tool_call_id, payload.response_event || "ask_user_response", reply);
    });
    return this.register(payload, form, "ask_user", requestId);
  }

  /** A request to run a tool that needs the user's consent. */
  approval(payload, { requestId = null } = {}) {
    const tool = String(payload.tool ?? "a tool");
    const question = payload.question || approvalQuestion(tool);
    const { form, body, actions } = this.frame("approval", "Approval needed", question);
    form.tabIndex = -1;
    const args = element("pre", "widget__arguments");
    args.append(element("code", "", JSON.stringify(payload.arguments ?? {}, null, 2)));
    body.append(element("p", "widget__tool", `Tool: ${tool}`), args);
    actions.append(
      button("Approve", { value: "approve", tone: "button--primary" }),
      button("Deny", { value: "deny", tone: "button--danger" }),
    );
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const reply = { tool_call_id: payload.tool_call_id, approved: event.submitter?.value === "approve" };
      if (typeof payload.digest === "string") {
        // Binds the approval to the tool and arguments shown (docs/protocol.md).
        reply.digest = payload.digest;
      }
      this.submit(payload.tool_call_id, payload.response_event || "approval_response", reply);
    });
    return this.register(payload, form, "approval", requestId);
  }

  /**
   * A question an MCP server asks during a tool call: one input per field of its
   * requested schema (a flat object of strings, numbers, booleans and enums), then
   * Accept, Decline or Cancel. The reply is `ask_user_response` `{tool_call_id, action,
   * answer}` (`answer`: the fields, when accepted).
   */
  elicitation(payload, { requestId = null } = {}) {
    const schema = payload.requested_schema ?? {};
    const properties = schema.properties ?? {};
    const required = new Set(Array.isArray(schema.required) ? schema.required : []);
    const kicker = `${payload.server ?? "An MCP server"} asks`;
    const { form, body, actions } = this.frame("ask", kicker, payload.question ?? payload.message);
    const fields = [];
    for (const [name, field] of Object.entries(properties)) {
      const inputId = uniqueId("field");
      const label = element("label", "widget__field", String(field.title ?? name));
      label.htmlFor = inputId;
      let input;
      if (Array.isArray(field.enum)) {
        input = element("select", "widget__input");
        for (const option of field.enum) {
          const node = element("option", "", String(option));
          node.value = String(option);
          input.append(node);
        }
      } else {
        input = element("input", "widget__input");
        input.type = field.type === "boolean" ? "checkbox" : field.type === "string" ? "text" : "number";
        if (field.type === "integer") {
          input.step = "1";
        }
      }
      input.id = inputId;
      input.name = name;
      input.required = required.has(name) && field.type !== "boolean";
      if (field.default !== undefined) {
        if (input.type === "checkbox") {
          input.checked = Boolean(field.default);
        } else {
          input.value = String(field.default);
        }
      }
      body.append(label, input);
      if (field.description) {
        body.append(element("p", "widget__hint", String(field.description)));
      }
      fields.push({ name, field, input });
    }
    actions.append(
      button("Accept", { value: "accept", tone: "button--primary" }),
      button("Decline", { value: "decline" }),
      button("Cancel", { value: "cancel" }),
    );
    form.noValidate = true;
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const action = event.submitter?.value ?? "accept";
      const reply = { tool_call_id: payload.tool_call_id, action };
      if (action === "accept") {
        const content = {};
        for (const { name, field, input } of fields) {
          if (input.type === "checkbox") {
            content[name] = input.checked;
          } else if (input.value.trim() === "") {
            if (input.required) {
              this.say(form, `Fill in ${field.title ?? name} first.`);
              input.focus();
              return;
            }
          } else if (field.type === "number" || field.type === "integer") {
            content[name] = Number(input.value);
          } else {
            content[name] = input.value;
          }
        }
        reply.answer = content;
      }
      this.submit(payload.tool_call_id, payload.response_event || "ask_user_response", reply);
    });
    return this.register(payload, form, "elicitation", requestId);
  }

  /**
   * A widget that was answered (or not) before this page saw it, rebuilt from history:
   * the call it belongs to and the tool result's `attributes.reply`.
   */
  settledFromHistory(call, reply, requestId = null) {
    const args = call.arguments ?? {};
    if (reply.source === "mcp") {
      const form = this.elicitation({ tool_call_id: call.id, question: reply.question ?? "" }, { requestId });
      this.resolve(call.id, reply);
      return form;
    }
    const form =
      reply.kind === "approval"
        ? this.approval(
            { tool_call_id: call.id, tool: call.name, arguments: args, question: approvalQuestion(call.name) },
            { requestId },
          )
        : this.askUser(
            {
              tool_call_id: call.id,
              question: args.question ?? reply.question ?? "",
              options: args.options ?? null,
              allow_multiple: args.allow_multiple ?? false,
            },
            { requestId },
          );
    this.resolve(call.id, reply);
    return form;
  }

  // --- outcomes ----------------------------------------------------------------------

  /**
   * The server's verdict (`external_event_result`) on this page's reply to `toolCallId`.
   * `internal`: the server could not record the reply, so it delivered nothing; the widget
   * takes input again.
   */
  settle(toolCallId, acceptedBy, reason = null) {
    const widget = this.widgets.get(toolCallId);
    if (!widget || widget.state !== "sending") {
      return;
    }
    if (reason === "internal") {
      this.setState(widget, "open");
      for (const control of widget.form.querySelectorAll("button, input, textarea")) {
        control.disabled = false;
      }
      this.say(widget.form, "The server could not record this answer, so it was not sent. Try again.");
      return;
    }
    if (Array.isArray(acceptedBy) && acceptedBy.length > 0) {
      this.answered(widget, widget.reply);
    } else {
      this.close(widget, "rejected", REJECTED_TEXT[reason] ?? REJECTED_DEFAULT);
    }
  }

  /** A reply to `toolCallId` was accepted (`reply_accepted`): from any tab. */
  accepted(toolCallId, payload) {
    const widget = this.widgets.get(toolCallId);
    if (widget && (OPEN_STATES.has(widget.state) || widget.state === "rejected")) {
      this.answered(widget, payload);
    }
  }

  /** The call's result says how it was answered (`attributes.reply`), or that nobody did. */
  resolve(toolCallId, reply) {
    const widget = this.widgets.get(toolCallId);
    if (!widget || !reply || typeof reply !== "object") {
      return;
    }
    if (reply.expired) {
      if (widget.state !== "expired") {
        this.close(widget, "expired", EXPIRED_TEXT);
      }
    } else if (widget.state !== "answered") {
      this.answered(widget, reply);
    }
  }

  /** Close every widget still waiting (of the runs `requestIds`, when given): they ended. */
  closeOpen(state, text, { requestIds = null } = {}) {
    for (const widget of this.widgets.values()) {
      if (OPEN_STATES.has(widget.state) && (requestIds === null || requestIds.has(widget.requestId))) {
        this.close(widget, state, text);
      }
    }
  }

  /** Forget the widgets whose elements left the page. */
  forgetDetached() {
    for (const [id, widget] of this.widgets) {
      if (!widget.form.isConnected) {
        widget.countdown?.stop();
        this.widgets.delete(id);
      }
    }
  }

  /** Forget all widgets (their elements are being thrown away). */
  reset() {
    for (const widget of this.widgets.values()) {
      widget.countdown?.stop();
    }
    this.widgets.clear();
  }

  // --- building blocks ---------------------------------------------------------------

  frame(kind, kicker, question) {
    const form = element("form", `widget widget--${kind}`);
    form.dataset.state = "open";
    const questionId = uniqueId("question");
    form.setAttribute("aria-labelledby", questionId);
    form.append(element("p", "widget__kicker", kicker));
    const questionText = element("p", "widget__question", String(question ?? ""));
    questionText.id = questionId;
    const body = element("div", "widget__body");
    const actions = element("div", "widget__actions");
    const status = element("p", "widget__status");
    status.setAttribute("role", "status");
    form.append(questionText, body, actions, status);
    return { form, body, actions };
  }

  register(payload, form, kind, requestId) {
    const toolCallId = payload.tool_call_id;
    form.dataset.toolCallId = toolCallId ?? "";
    const widget = { form, kind, requestId, state: "open", reply: null, countdown: null };
    this.widgets.set(toolCallId, widget);
    widget.countdown = this.countdowns.start(payload.expires_at, () => {
      if (widget.state === "open") {
        this.close(widget, "expired", EXPIRED_TEXT);
      }
    });
    if (widget.countdown) {
      form.querySelector(".widget__actions").after(widget.countdown.element);
    }
    return form;
  }

  submit(toolCallId, name, reply) {
    const widget = this.widgets.get(toolCallId);
    if (!widget || widget.state !== "open") {
      return;
    }
    if (!this.sendExternalEvent(name, reply)) {
      this.say(widget.form, "Not connected. Try again when the connection is back.");
      return;
    }
    widget.reply = reply;
    this.setState(widget, "sending");
    this.say(widget.form, "Sending…");
  }

  /** Answered with `reply`; an approval says which way (`data-outcome`: its colour). */
  answered(widget, reply) {
    if (widget.kind === "approval" && typeof reply?.approved === "boolean") {
      widget.form.dataset.outcome = reply.approved ? "approved" : "denied";
    }
    this.close(widget, "answered", replySummary(widget.kind, reply));
  }

  close(widget, state, text) {
    this.setState(widget, state);
    widget.countdown?.stop();
    widget.countdown?.element.remove();
    widget.countdown = null;
    this.say(widget.form, text);
  }

  setState(widget, state) {
    // Its own tree's: in a widget's shadow root, the document's is the widget element.
    const hadFocus = widget.form.contains(widget.form.getRootNode().activeElement ?? null);
    widget.state = state;
    widget.form.dataset.state = state;
    if (state !== "open") {
      for (const control of widget.form.querySelectorAll("button, input, textarea, select")) {
        control.disabled = true;
      }
      if (hadFocus) {
        this.onAnswered();
      }
    }
  }

  say(form, text) {
    form.querySelector(".widget__status").textContent = text;
  }
}
