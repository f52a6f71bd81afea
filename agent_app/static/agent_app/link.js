/**
 * The link indicator in the top bar: Connecting…, Connected, "Offline, retrying in N s"
 * (counting down to the next attempt, with Retry now), or Disconnected when the server
 * refused the chat for good.
 *
 * The visible label counts down each second and is hidden from screen readers; the
 * status region is the one place the link's state is read out, told only when the state
 * changes (once per change, never a number every second).
 */
import { LinkState } from "./connection.js";

export class LinkIndicator {
  /**
   * @param {{link: HTMLElement, label: HTMLElement, status: HTMLElement, retry: HTMLElement}} ui
   * @param {import("./notices.js").Notices} notices
   */
  constructor(ui, notices) {
    this.ui = ui;
    this.notices = notices;
    this.timer = null;
  }

  show(status) {
    const { link, label, status: spoken, retry } = this.ui;
    link.dataset.state = status.state;
    retry.hidden = status.state !== LinkState.WAITING;
    clearTimeout(this.timer);
    this.timer = null;
    switch (status.state) {
      case LinkState.CONNECTING:
        label.textContent = "Connecting…";
        break;
      case LinkState.OPEN:
        label.textContent = "Connected";
        spoken.textContent = "Connected";
        this.notices.dismiss("link");
        this.notices.dismiss("offline");
        break;
      case LinkState.WAITING:
        spoken.textContent = "Offline. Retrying shortly.";
        this.countDown(Date.now() + status.delayMs);
        break;
      case LinkState.REFUSED:
        label.textContent = "Disconnected";
        spoken.textContent = "Disconnected";
        this.notices.show("The server closed this chat and will not reopen it.", {
          key: "link",
          detail: status.reason || `(code ${status.code})`,
        });
        break;
      default:
        break;
    }
  }

  /** "Offline, retrying in N s", rewritten each time N changes until `deadline`. */
  countDown(deadline) {
    const left = deadline - Date.now();
    const seconds = Math.ceil(left / 1000);
    this.ui.label.textContent = seconds > 0 ? `Offline, retrying in ${seconds} s` : "Offline, retrying…";
    if (seconds > 0) {
      this.timer = setTimeout(() => this.countDown(deadline), left - (seconds - 1) * 1000);
    }
  }
}
