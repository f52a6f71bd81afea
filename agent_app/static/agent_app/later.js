/**
 * Parts of the chat that only some chats use, loaded with the first frame that needs them
 * (`gate.js` holds that frame, and those after it, until the part is here): the question
 * and approval widgets, paging back through a long history, switching between versions of
 * a turn, the token budget meter. Each `needs…` test says which frames need a part.
 *
 * `later()` makes the stand-in the page holds meanwhile (`laterWidgets` and the others
 * below, with the arguments of the class they stand for). Until the part is loaded, each
 * member named in `idle` answers as the part would with nothing to do (no widget is open,
 * no page is loading); any other member is an error, as the gate should have loaded the
 * part first.
 */
import { FrameGate } from "./gate.js";
import { lazyModule } from "./lazy.js";

function items(frame) {
  return [frame.history, frame.messages].flatMap((list) => (Array.isArray(list) ? list : []));
}

const isObject = (value) => typeof value === "object" && value !== null;

/** A frame that shows a question or an approval: live, waiting, or from history. */
export function asksSomeone(frame) {
  const event = frame.event;
  if (event?.type === "custom" && (event.name === "ask_user" || event.name === "approval_requested")) {
    return true;
  }
  if (Array.isArray(frame.pending) && frame.pending.length > 0) {
    return true;
  }
  return items(frame).some((item) => isObject(item?.attributes?.reply) || isObject(item?.attributes?.mcp_question));
}

/** A frame that starts paging: the newest page of a longer history, or a switched path. */
export function needsPaging(frame) {
  return frame.has_more_history === true || frame.type === "branch_switched";
}

/** A frame that shows a turn with versions, or switches one. */
export function needsSwitcher(frame) {
  return frame.type === "branch_switched" || items(frame).some((item) => Number(item?.versions?.count) > 1);
}

/** A frame that says what is left of the person's token budget, or that it is used up. */
export function needsBudget(frame) {
  return frame.type === "budget" || frame.code === "budget_exceeded" || frame.status === "budget_exceeded";
}

/**
 * A stand-in for the class `name` of the module at `path`, made with `args` by `load()`
 * (then `ready(real)` runs). Until then the members of `idle` answer.
 */
export function later(path, name, args, idle, ready = () => {}) {
  const module = lazyModule(path);
  const part = {
    real: null,
    get loaded() {
      return part.real !== null;
    },
    async load() {
      const loaded = await module.get();
      if (part.real === null) {
        part.real = new loaded[name](...args);
        ready(part.real);
      }
      return part.real;
    },
  };
  return new Proxy(part, {
    get(target, key) {
      if (key in target || typeof key === "symbol" || key === "then") {
        return target[key];
      }
      if (target.real !== null) {
        const value = target.real[key];
        return typeof value === "function" ? value.bind(target.real) : value;
      }
      if (!(key in idle)) {
        throw new TypeError(`${name}.${key} was used before ${path} was loaded`);
      }
      return idle[key];
    },
  });
}

const quiet = (names) => Object.fromEntries(names.map((name) => [name, () => {}]));

/** `ReplyWidgets` (`widgets.js`): none is open or known until the first question. */
export function laterWidgets(...args) {
  return later("widgets.js", "ReplyWidgets", args, {
    has: () => false,
    isOpen: () => false,
    anyOpen: () => false,
    ...quiet(["settle", "accepted", "resolve", "closeOpen", "forgetDetached", "reset"]),
  });
}

/** `HistoryPaging` (`paging.js`), told once loaded which messages were shown last. */
export function laterPaging(...args) {
  let shown = null;
  const idle = {
    loading: false,
    oldest: null,
    reset: (...page) => (shown = page),
    ...quiet(["received", "linkDropped", "refused"]),
  };
  return later("paging.js", "HistoryPaging", args, idle, (real) => shown && real.reset(...shown));
}

/** `VersionSwitcher` (`switcher.js`): no switch is on its way until one is shown. */
export function laterSwitcher(...args) {
  return later("switcher.js", "VersionSwitcher", args, { pending: null, ...quiet(["refresh", "refused"]) });
}

/** `BudgetMeter` (`budget.js`): hidden, counting nothing, until a budget is known. */
export function laterBudget(...args) {
  return later("budget.js", "BudgetMeter", args, quiet(["spent"]));
}

/** A gate on `client` that loads each of these parts with the first frame that needs it. */
export function gateFor(client, { widgets, paging, versions, budget }) {
  const gate = new FrameGate(client);
  gate.need(asksSomeone, widgets);
  gate.need(needsPaging, paging);
  gate.need(needsSwitcher, versions);
  gate.need(needsBudget, budget);
  return gate;
}
