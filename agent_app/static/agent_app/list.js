/**
 * The chat list page: Rename and Delete on each row (`chats.js`). The list itself, its
 * search and its pages are plain HTML from the server; this script only adds the actions.
 */
import { announce } from "./copy.js";
import { confirmDelete, renameInline } from "./chats.js";

for (const actions of document.querySelectorAll("[data-chat-actions]")) {
  const row = actions.closest("li");
  const link = row.querySelector(".session-links__link");
  const rename = actions.querySelector('[data-action="rename"]');
  const remove = actions.querySelector('[data-action="delete"]');
  rename.hidden = false;

  rename.addEventListener("click", () => {
    actions.hidden = true;
    renameInline({
      shown: link,
      current: actions.dataset.title,
      url: actions.dataset.renameUrl,
      onRenamed: (title) => {
        const shown = link.querySelector(".session-links__title");
        shown.textContent = title;
        shown.title = title;
        actions.dataset.title = title;
        rename.setAttribute("aria-label", `Rename ${title}`);
        remove.setAttribute("aria-label", `Delete ${title}`);
        announce(`Renamed to ${title}.`);
      },
      onClose: () => {
        actions.hidden = false;
        rename.focus();
      },
    });
  });

  remove.addEventListener("click", (event) => {
    event.preventDefault();
    confirmDelete({
      title: actions.dataset.title,
      url: actions.dataset.deleteUrl,
      waiting: "waiting" in actions.dataset,
      onDeleted: () => {
        const next = row.nextElementSibling ?? row.previousElementSibling;
        const list = row.parentElement;
        row.remove();
        if (list.children.length === 0) {
          const empty = document.createElement("p");
          empty.className = "muted";
          empty.textContent = "No chats here any more.";
          list.replaceWith(empty);
        }
        announce("The chat was deleted.");
        (next?.querySelector(".session-links__link") ?? document.getElementById("chat-search"))?.focus();
      },
      onClose: () => remove.focus(),
    });
  });
}
