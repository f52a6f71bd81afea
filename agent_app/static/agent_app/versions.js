/**
 * "‹ 2/3 ›" on a message you edited or had answered again: a history item whose turn has
 * versions carries `versions: {index, count}` (docs/protocol.md), and its bubble gets
 * this switcher. What pressing it does is `switcher.js`'s.
 */
import { element } from "./blocks.js";

/** Put the "‹ index/count ›" switcher on `bubble` (replacing one it has). */
export function showVersions(bubble, versions) {
  bubble.querySelector(".msg__versions")?.remove();
  const count = Number(versions?.count);
  const index = Number(versions?.index);
  if (!(count > 1 && index >= 1 && index <= count)) {
    delete bubble.dataset.versions;
    return;
  }
  bubble.dataset.versions = `${index}/${count}`;
  const nav = element("span", "msg__versions");
  nav.setAttribute("role", "group");
  nav.setAttribute("aria-label", `Version ${index} of ${count}`);
  const previous = switchButton("‹", "Previous version", index - 1);
  const next = switchButton("›", "Next version", index + 1);
  previous.disabled = index <= 1;
  next.disabled = index >= count;
  const label = element("span", "msg__versions-count", `${index}/${count}`);
  label.setAttribute("aria-hidden", "true");
  nav.append(previous, label, next);
  const head = bubble.querySelector(".msg__head");
  const time = head.querySelector(".msg__time");
  if (time) {
    time.after(nav);
  } else {
    head.append(nav);
  }
}

function switchButton(text, accessibleName, index) {
  const button = element("button", "button button--quiet button--small msg__versions-step", text);
  button.type = "button";
  button.dataset.index = String(index);
  button.setAttribute("aria-label", accessibleName);
  return button;
}
