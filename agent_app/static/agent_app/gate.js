/**
 * Frames that need code the page has not loaded yet wait for it, and so does every frame
 * after them: they are applied in the order they came, once it is here.
 *
 * Parts of the chat (the reply widgets, paging back through history, switching versions)
 * are loaded only when a chat uses them (`lazy.js`). Each is a stand-in with `loaded` and
 * `load()`, registered with the test that says a frame needs it (`need`). Only a frame
 * that needs a part not loaded yet waits, so a chat that never uses a part never fetches
 * it, and one that does waits for it once.
 */

export class FrameGate {
  /** @param {{on: (type: string, fn: (frame: object) => void) => void}} client */
  constructor(client) {
    this.client = client;
    /** @type {[(frame: object) => boolean, {loaded: boolean, load: () => Promise<any>}][]} */
    this.parts = [];
    /** The frames waiting, in order, each with the function that applies it; or null. */
    this.held = null;
    /** An "open" status waiting for its `session` frame, and who is told of statuses. */
    this.opened = null;
    this.statusHandler = () => {};
  }

  /** `part` must be loaded before a frame for which `needs(frame)` is true is applied. */
  need(needs, part) {
    this.parts.push([needs, part]);
  }

  /** `client.on(type, handler)`, with the frames going through this gate. */
  on(type, handler) {
    this.client.on(type, (frame) =>
      this.apply(frame, () => {
        if (type === "session") {
          this.showOpened();
        }
        handler(frame);
      }),
    );
  }

  /**
   * `client.on("status", handler)`, except that "open" (which comes with a `session`
   * frame, just before it) is handed on with that frame, which may wait: so the chat never
   * says it is connected while what it shows is still empty.
   */
  onStatus(handler) {
    this.statusHandler = handler;
    this.client.on("status", (status) => {
      this.opened = status.state === "open" ? status : null;
      if (this.opened === null) {
        handler(status);
      }
    });
  }

  showOpened() {
    if (this.opened) {
      const status = this.opened;
      this.opened = null;
      this.statusHandler(status);
    }
  }

  apply(frame, apply) {
    if (this.held !== null) {
      this.held.push([frame, apply]);
      return;
    }
    const loads = this.parts.filter(([needs, part]) => !part.loaded && needs(frame)).map(([, part]) => part.load());
    if (loads.length > 0) {
      this.held = [[frame, apply]];
      Promise.allSettled(loads).then((outcomes) => this.release(outcomes));
      return;
    }
    run(apply);
  }

  /**
   * Apply the frame that waited for the parts (a part that failed to load shows that it
   * is missing), then the frames after it, each through the gate again: one of them may
   * need a part the first did not.
   */
  release(outcomes) {
    for (const outcome of outcomes) {
      if (outcome.status === "rejected") {
        console.warn("Could not load a part of the chat:", outcome.reason);
      }
    }
    const [[, first], ...rest] = this.held;
    this.held = null;
    run(first);
    for (const [frame, apply] of rest) {
      this.apply(frame, apply);
    }
  }
}

/** Apply one frame; an error in it is reported and does not stop the frames after it. */
function run(apply) {
  try {
    apply();
  } catch (error) {
    reportError(error);
  }
}
