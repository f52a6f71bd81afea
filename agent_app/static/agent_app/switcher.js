/**
 * Switching between the versions of a turn (docs/protocol.md: `switch_version`,
 * `branch_switched`).
 *
 * Pressing ‹ or › of a switcher (`versions.js`) sends `switch_version`; nothing changes
 * until the server's `branch_switched` arrives, in this tab and every other one: the page
 * then drops what it shows from the switched turn on and draws the path the frame brings,
 * with no reload, and the switched turn stays where it was on the screen. The switchers
 * work only while nothing runs (`refresh`), as the server refuses a switch then (`busy`).
 * A new version that `edit` or `regenerate` made is drawn by its run (`run_started`): its
 * `branch_switched` only puts the switcher on the message.
 */
import { renderHistory } from "./history.js";
import { showVersions } from "./versions.js";

export class VersionSwitcher {
  /**
   * @param {import("./transcript.js").Transcript} transcript
   * @param {(frame: object) => boolean} send Sends a frame; false when the link is down.
   */
  constructor(transcript, send) {
    this.transcript = transcript;
    this.send = send;
    this.enabled = true;
    /** The position whose switch is on its way (its buttons wait), or null. */
    this.pending = null;
    transcript.root.addEventListener("click", (event) => {
      const button = event.target.closest?.(".msg__versions-step");
      const bubble = button?.closest(".msg--user");
      if (!button || !bubble || button.disabled || bubble.dataset.position === undefined) {
        return;
      }
      const position = Number(bubble.dataset.position);
      if (this.send({ type: "switch_version", position, index: Number(button.dataset.index) })) {
        this.pending = position;
        this.refresh(this.enabled); // its buttons wait (and so lose the keyboard) …
      }
    });
  }

  /** Offer the switchers (when `enabled`: nothing runs and no switch is on its way). */
  refresh(enabled) {
    this.enabled = enabled;
    for (const nav of this.transcript.root.querySelectorAll(".msg__versions")) {
      const [previous, , next] = nav.children;
      const [index, count] = (nav.closest(".msg--user").dataset.versions ?? "1/1").split("/").map(Number);
      const open = enabled && this.pending === null;
      previous.disabled = !open || index <= 1;
      next.disabled = !open || index >= count;
    }
  }

  /** The server refused the switch (`busy`, `bad_frame`): the switchers work again. */
  refused() {
    if (this.pending !== null) {
      this.pending = null;
      this.refresh(this.enabled);
    }
  }

  /**
   * A `branch_switched` frame: show the new path from `frame.position` on (`draw`). The
   * switched turn keeps its place on the screen, and the keyboard stays on its switcher.
   */
  switched(frame, parts) {
    const root = this.transcript.root;
    const before = this.bubbleAt(frame.position);
    const top = before?.getBoundingClientRect().top ?? null;
    // … which the switcher of the switched turn gets back, when this page switched it.
    const refocus = this.pending === frame.position;
    this.pending = null;
    this.draw(frame, parts);
    const after = this.bubbleAt(frame.position);
    if (after && top !== null) {
      root.scrollTop += after.getBoundingClientRect().top - top;
    }
    this.refresh(this.enabled);
    if (after && refocus) {
      const step = [...after.querySelectorAll(".msg__versions-step")].find((button) => !button.disabled);
      step?.focus({ preventScroll: true });
    }
  }

  /**
   * Draw the path of `frame`. With a run live (the frame of its new version) only the
   * switcher changes; a path too long for the frame (`has_more`) is drawn as a fresh
   * page, the rest paged in above. `parts`: the page's `runs` map, its `paging`, and
   * whether a run is `live`.
   */
  draw(frame, { runs, paging, live }) {
    const messages = Array.isArray(frame.messages) ? frame.messages : [];
    for (const run of frame.runs ?? []) {
      runs.set(run.request_id, run);
    }
    if (live) {
      const bubble = this.bubbleAt(frame.position);
      if (bubble && messages[0]?.position === frame.position) {
        showVersions(bubble, messages[0].versions);
      }
      return;
    }
    if (frame.has_more) {
      this.transcript.clear();
    } else {
      this.transcript.dropFrom(frame.position);
    }
    renderHistory(this.transcript, messages, runs, { sink: this.transcript.root });
    this.transcript.removeRetryButtons({ keepLast: true });
    if (frame.has_more || paging.oldest === null || paging.oldest >= frame.position) {
      // Nothing older than the switched turn is shown: paging starts again above it.
      paging.reset(frame.has_more || frame.position > 0, messages);
    }
  }

  bubbleAt(position) {
    return this.transcript.items.find(
      (node) => node.matches(".msg--user") && Number(node.dataset.position) === position,
    );
  }
}
