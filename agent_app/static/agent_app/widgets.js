/**
 * The two widgets through which the user answers a paused agent: ask-user and approval.
 *
 * Each widget is keyed by the tool call it answers. Submitting sends an `external_event`
 * frame and marks the widget "sending"; the server's `external_event_result` for that
 * tool call settles it: accepted → answered (controls stay disabled, the choice is shown),
 * rejected (`accepted_by: []`) → expired, because nothing is waiting any more. When a run
 * ends every widget still open expires the same way. If the frame cannot be sent (the link
 * is down) the widget stays open so the user can try again. Once a reply is sent its
 * controls are disabled, so `onAnswered` hands the keyboard back (to the composer) rather
 * than leaving focus on a disabled button, which browsers drop to `<body>`.
 */

let nextId = 0;
const uniqueId = (prefix) => `${prefix}-${++nextId}`;

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) {
    node.className = className;
  }
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

function button(label, { value = "", tone = "" } = {}) {
  const node = element("button", `button ${tone}`.trim(), label);
  node.type = "submit";
  node.value = value;
  return node;
}

export class ReplyWidgets {
  /**
   * @param {(name: string, payload: object) => boolean} sendExternalEvent
   * @param {{onAnswered?: () => void}} hooks `onAnswered` runs once a reply has been sent.
   */
  constructor(sendExternalEvent, { onAnswered = () => {} } = {}) {
    this.sendExternalEvent = sendExternalEvent;
    this.onAnswered = onAnswered;
    this.widgets = new Map();
  }

  /** A question from the `ask_user` tool: options as buttons, checkboxes, or free text. */
  askUser(payload) {
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
      const shown = Array.isArray(answer) ? answer.join(", ") : answer;
      this.submit(payload.tool_call_id, form, payload.response_event || "ask_user_response", {
        tool_call_id: payload.tool_call_id,
        answer,
      }, `You answered: ${shown}`);
    });
    return this.register(payload.tool_call_id, form);
  }

  /** A request to run a tool that needs the user's consent. */
  approval(payload) {
    const tool = String(payload.tool ?? "a tool");
    const question = payload.question || `Allow ${tool} to run?`;
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
      const approved = event.submitter?.value === "approve";
      this.submit(payload.tool_call_id, form, payload.response_event || "approval_response", {
        tool_call_id: payload.tool_call_id,
        approved,
      }, approved ? "You approved this." : "You denied this.");
    });
    return this.register(payload.tool_call_id, form);
  }

  /** Apply the server's verdict on the reply to `toolCallId`. */
  settle(toolCallId, acceptedBy) {
    const widget = this.widgets.get(toolCallId);
    if (!widget || widget.state !== "sending") {
      return;
    }
    if (Array.isArray(acceptedBy) && acceptedBy.length > 0) {
      widget.state = "answered";
      widget.form.dataset.state = "answered";
      this.say(widget.form, widget.summary);
    } else {
      this.expire(widget, "Not delivered: the agent is no longer waiting for this answer.");
    }
  }

  /**
   * The agent went on with `toolCallId`, so someone answered it: another window of this
   * chat, if this widget is still open.
   */
  answeredElsewhere(toolCallId) {
    const widget = this.widgets.get(toolCallId);
    if (widget?.state === "open") {
      widget.state = "answered";
      widget.form.dataset.state = "answered";
      this.disable(widget.form);
      this.say(widget.form, "Answered in another window.");
    }
  }

  /** Close every widget still waiting, e.g. because the run ended. */
  expireOpen(reason = "The agent stopped waiting for this answer.") {
    for (const widget of this.widgets.values()) {
      if (widget.state === "open" || widget.state === "sending") {
        this.expire(widget, reason);
      }
    }
  }

  /** Forget all widgets (their elements are being thrown away). */
  reset() {
    this.widgets.clear();
  }

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

  register(toolCallId, form) {
    this.widgets.set(toolCallId, { form, state: "open", summary: "" });
    return form;
  }

  submit(toolCallId, form, name, payload, summary) {
    const widget = this.widgets.get(toolCallId);
    if (!widget || widget.state !== "open") {
      return;
    }
    if (!this.sendExternalEvent(name, payload)) {
      this.say(form, "Not connected. Try again when the connection is back.");
      return;
    }
    widget.state = "sending";
    widget.summary = summary;
    form.dataset.state = "sending";
    const hadFocus = form.contains(document.activeElement);
    this.disable(form);
    this.say(form, "Sending…");
    if (hadFocus) {
      this.onAnswered();
    }
  }

  expire(widget, reason) {
    widget.state = "expired";
    widget.form.dataset.state = "expired";
    this.disable(widget.form);
    this.say(widget.form, reason);
  }

  disable(form) {
    for (const control of form.querySelectorAll("button, input, textarea")) {
      control.disabled = true;
    }
  }

  say(form, text) {
    form.querySelector(".widget__status").textContent = text;
  }
}
