/**
 * The staff inbox stays live: every few seconds it reads its lists as JSON and redraws
 * them (the server renders the first view; this keeps it current without a reload).
 */
const config = JSON.parse(document.getElementById("inbox-config").textContent);

const EMPTY = {
  people: "Nobody is waiting for a person.",
  down: "No answer is rated 👎.",
  waiting: "No approval or question waits long.",
};

function describe(name, item) {
  if (name === "people") {
    return [item.staff ? `${item.staff} answers` : "waiting", item.reason || ""];
  }
  if (name === "down") {
    return ["", (item.comment || item.answer || "").slice(0, 120)];
  }
  return ["", `${item.kind} · ${item.tool}`];
}

function draw(name, items) {
  const list = document.querySelector(`[data-list="${name}"]`);
  if (!list) return;
  const rows = items.map((item) => {
    const row = document.createElement("li");
    row.className = "inbox__item";
    row.dataset.session = item.session_id;
    const link = document.createElement("a");
    link.href = item.url;
    link.textContent = item.title;
    row.append(link);
    const [badge, note] = describe(name, item);
    if (badge) {
      const span = document.createElement("span");
      span.className = item.staff ? "inbox__badge" : "inbox__badge inbox__badge--wait";
      span.textContent = badge;
      row.append(" ", span);
    }
    if (note) {
      const span = document.createElement("span");
      span.className = "muted";
      span.textContent = note;
      row.append(" ", span);
    }
    return row;
  });
  if (!rows.length) {
    const row = document.createElement("li");
    row.className = "muted inbox__empty";
    row.textContent = EMPTY[name];
    rows.push(row);
  }
  list.replaceChildren(...rows);
}

async function refresh() {
  const params = new URLSearchParams();
  if (config.show) params.set("show", config.show);
  if (config.assistant) params.set("assistant", config.assistant);
  try {
    const response = await fetch(`${config.jsonUrl}&${params}`, { credentials: "same-origin" });
    if (response.ok) {
      const lists = await response.json();
      for (const name of Object.keys(EMPTY)) draw(name, lists[name] || []);
      document.body.dataset.inboxRefreshed = String(Date.now());
    }
  } catch {
    // Offline for a moment: the next round tries again.
  }
  setTimeout(refresh, config.refreshSeconds * 1000);
}

setTimeout(refresh, config.refreshSeconds * 1000);
