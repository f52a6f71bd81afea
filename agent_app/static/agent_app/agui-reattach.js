/**
 * Re-attaching for the stock AG-UI client (`@ag-ui/client`): `ZettHttpAgent`.
 *
 * The stock `HttpAgent` runs, streams and resumes interrupts, but it has no way back into a
 * run whose stream dropped: its SSE parser drops the events' ids, and its `connect` is not
 * implemented. This subclass keeps the id of the last complete event it received (from
 * any of its streams) and implements `connect` as zett's re-attach endpoint,
 * `GET api/ag-ui/threads/<threadId>/events` with `Last-Event-ID`, so the stock
 * `connectAgent()` (or `reattach()`, its short name) continues the run where the stream
 * broke: nothing lost, nothing repeated.
 *
 *     import { ZettHttpAgent } from "./agui-reattach.js";
 *     const agent = new ZettHttpAgent({ url: "/api/ag-ui/demo/", headers, threadId });
 *     try { await agent.runAgent(); } catch { await agent.reattach(); }
 *
 * It imports `@ag-ui/client` (1.0), so it is meant for a bundler or Node, not for a
 * `<script>` tag as is. `eventsUrl` defaults to the thread's events URL beside `url`.
 */
import { HttpAgent, runHttpRequest, transformHttpEventStream } from "@ag-ui/client";

/** Each complete event's `id:` of an SSE body, to `onId`, as the bytes pass through. */
function watchIds(response, onId) {
  if (!response.body || !(response.headers.get("content-type") ?? "").startsWith("text/event-stream")) {
    return response;
  }
  const decoder = new TextDecoder();
  let partial = "";
  let pending = null;
  const lines = new TransformStream({
    transform(chunk, controller) {
      partial += decoder.decode(chunk, { stream: true });
      const complete = partial.split(/\r\n|\r|\n/);
      partial = complete.pop();
      for (const line of complete) {
        if (line === "") {
          if (pending !== null) {
            onId(pending); // the event is complete: its id counts as seen
          }
          pending = null;
        } else if (line.startsWith("id:")) {
          pending = line.slice(3).replace(/^ /, "");
        }
      }
      controller.enqueue(chunk);
    },
  });
  return new Response(response.body.pipeThrough(lines), {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  });
}

export class ZettHttpAgent extends HttpAgent {
  constructor(config) {
    super(config);
    /** The id of the last complete event received, or null before any. */
    this.lastEventId = config.lastEventId ?? null;
    this.eventsUrl = config.eventsUrl ?? null;
    this.watchFetch(this.fetch);
  }

  /** Send every request through `fetchOnce`, noting the ids of the events it streams. */
  watchFetch(fetchOnce) {
    this.fetch = async (url, init) => watchIds(await fetchOnce(url, init), (id) => (this.lastEventId = id));
    this.fetch.unwatched = fetchOnce;
  }

  /** The thread's re-attach URL: `<…>/api/ag-ui/threads/<threadId>/events`. */
  threadEventsUrl() {
    if (this.eventsUrl) {
      return this.eventsUrl;
    }
    const base = new URL(this.url, globalThis.location?.href ?? "http://localhost/");
    const events = new URL(`../threads/${encodeURIComponent(this.threadId)}/events`, base.href.replace(/\/?$/, "/"));
    return /^[a-z]+:/i.test(this.url) ? events.href : events.pathname;
  }

  /** The stock `connectAgent` reads this: the rest of the thread's active run. */
  connect() {
    const headers = { ...this.headers, Accept: "text/event-stream" };
    if (this.lastEventId !== null) {
      headers["Last-Event-ID"] = String(this.lastEventId);
    }
    const init = { method: "GET", headers, signal: this.abortController.signal };
    return transformHttpEventStream(
      runHttpRequest(() => this.fetch(this.threadEventsUrl(), init)),
      this.debugLogger,
    );
  }

  /** Re-attach to the run after a dropped stream (`connectAgent` by a clearer name). */
  reattach(parameters, subscriber) {
    this.abortController = parameters?.abortController ?? new AbortController();
    return this.connectAgent(parameters, subscriber);
  }

  clone() {
    const copy = super.clone();
    copy.lastEventId = this.lastEventId;
    copy.eventsUrl = this.eventsUrl;
    copy.watchFetch(this.fetch.unwatched);
    return copy;
  }
}
