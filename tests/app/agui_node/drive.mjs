// The stock AG-UI client (`@ag-ui/client`) against a live zett server, through the shipped
// re-attach helper. `node drive.mjs <scenario>` with ZETT_URL, ZETT_TOKEN, ZETT_THREAD
// set; prints one JSON line of what the client saw. The helper is the static file the app
// ships, copied beside node_modules by the test (its bare import needs this folder's
// packages).
import { ZettHttpAgent } from "./agui-reattach.js";

const url = `${process.env.ZETT_URL}/api/ag-ui/${process.env.ZETT_ASSISTANT ?? "demo"}/`;
const headers = { Authorization: `Bearer ${process.env.ZETT_TOKEN}` };
const threadId = process.env.ZETT_THREAD;

function recorder() {
  const seen = { types: [], text: "", interrupts: [], errors: [] };
  const subscriber = {
    onEvent({ event }) {
      seen.types.push(event.type === "CUSTOM" ? `CUSTOM:${event.name}` : event.type);
    },
    onTextMessageContentEvent({ event }) {
      seen.text += event.delta;
    },
    onRunFinishedEvent({ event }) {
      if (event.outcome?.type === "interrupt") {
        seen.interrupts.push(...event.outcome.interrupts);
      }
    },
    onRunErrorEvent({ event }) {
      seen.errors.push(event.code ?? event.message);
    },
  };
  return { seen, subscriber };
}

function say(agent, text) {
  agent.addMessage({ id: `m-${Math.random().toString(16).slice(2)}`, role: "user", content: text });
}

async function interrupt() {
  // A run that asks for approval ends in an interrupt; the stock resume answers it.
  const agent = new ZettHttpAgent({ url, headers, threadId });
  const first = recorder();
  say(agent, "save a note: buy oat milk");
  await agent.runAgent({}, first.subscriber);
  const [asked] = first.seen.interrupts;
  const second = recorder();
  await agent.runAgent(
    { resume: [{ interruptId: asked.id, status: "resolved", payload: { approved: true } }] },
    second.subscriber,
  );
  return { first: first.seen, second: second.seen, pending: agent.pendingInterrupts.length };
}

async function reattach() {
  // The stream is dropped after the first words; the helper re-attaches and reads the rest.
  const agent = new ZettHttpAgent({ url, headers, threadId });
  const first = recorder();
  let dropped = false;
  first.subscriber.onTextMessageContentEvent = ({ event }) => {
    first.seen.text += event.delta;
    if (!dropped && first.seen.text.length > 0) {
      dropped = true;
      agent.abortRun();
    }
  };
  say(agent, "what is 1/3 + 1/6?");
  await agent.runAgent({}, first.subscriber);
  const droppedAt = agent.lastEventId;
  const rest = recorder();
  await agent.reattach({}, rest.subscriber);
  const assistant = agent.messages.filter((m) => m.role === "assistant").map((m) => m.content);
  return { droppedAt, first: first.seen, rest: rest.seen, lastEventId: agent.lastEventId, assistant };
}

async function delegate() {
  // The front desk asks billing (a sub-run); billing's approval is an interrupt of the
  // chat's run; the stock resume answers it and the front desk answers with billing's.
  const agent = new ZettHttpAgent({ url, headers, threadId });
  const first = recorder();
  say(agent, "Refund 7");
  await agent.runAgent({}, first.subscriber);
  const [asked] = first.seen.interrupts;
  const second = recorder();
  await agent.runAgent(
    { resume: [{ interruptId: asked.id, status: "resolved", payload: { approved: true } }] },
    second.subscriber,
  );
  return { first: first.seen, second: second.seen, pending: agent.pendingInterrupts.length };
}

const scenarios = { interrupt, reattach, delegate };
const result = await scenarios[process.argv[2]]();
process.stdout.write(`${JSON.stringify(result)}\n`);
