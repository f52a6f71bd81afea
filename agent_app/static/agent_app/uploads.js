/**
 * The composer's chips and their uploads (`AttachmentTray` in `attachments.js`), loaded
 * when the first file is picked, dropped or pasted: each file is checked against the
 * site's limits (`upload_check.js`), gets a chip, and is uploaded at once.
 */
import { element } from "./dom.js";
import { fileProblem, sizeText } from "./upload_check.js";

const isImage = (mediaType) => typeof mediaType === "string" && mediaType.startsWith("image/");

/** Upload each of `files` (File objects) to `tray`. */
export function addFiles(tray, files) {
  for (const file of files) {
    const problem = fileProblem(file, tray.limits);
    if (problem) {
      settle(tray, addChip(tray, file.name, file.size, null), "refused", null, problem);
      continue;
    }
    const item = addChip(tray, file.name, file.size, isImage(file.type) ? URL.createObjectURL(file) : null);
    upload(tray, item, file);
  }
}

/** Put references back as ready chips (a message the server refused). */
export function restoreRefs(tray, refs) {
  for (const ref of refs) {
    const item = addChip(tray, ref.name, ref.size, isImage(ref.media_type) ? `${ref.url}?thumbnail=1` : null);
    settle(tray, item, "ready", ref);
  }
}

/** A chip for a file, uploading until `settle` says otherwise. */
function addChip(tray, name, size, preview) {
  const chip = element("li", "attachment attachment--chip");
  if (preview) {
    const image = element("img", "attachment__thumb");
    image.src = preview;
    image.alt = "";
    chip.append(image);
  }
  const about = element("span", "attachment__about");
  about.append(element("span", "attachment__name", name), element("span", "attachment__size muted", sizeText(size)));
  const progress = element("progress", "attachment__progress");
  progress.max = 100;
  progress.value = 0;
  progress.setAttribute("aria-label", `Uploading ${name}`);
  const status = element("span", "attachment__status");
  status.setAttribute("role", "status");
  const remove = element("button", "button button--quiet button--small attachment__remove", "Remove");
  remove.type = "button";
  remove.setAttribute("aria-label", `Remove ${name}`);
  about.append(progress, status);
  chip.append(about, remove);
  const item = { chip, state: "uploading", ref: null, request: null, preview };
  remove.addEventListener("click", () => {
    item.request?.abort();
    tray.drop(item);
  });
  chip.dataset.state = "uploading";
  tray.items.push(item);
  tray.list.append(chip);
  tray.list.hidden = false;
  tray.onChange();
  return item;
}

/** Send `file`, its chip showing the progress. */
function upload(tray, item, file) {
  const body = new FormData();
  body.append("file", file, file.name);
  if (tray.assistant) {
    body.append("assistant", tray.assistant);
  }
  const request = (item.request = new XMLHttpRequest());
  request.open("POST", tray.uploadUrl);
  request.setRequestHeader("X-CSRFToken", tray.csrfToken);
  request.setRequestHeader("Accept", "application/json");
  request.upload.addEventListener("progress", (event) => {
    if (event.lengthComputable) {
      item.chip.querySelector("progress").value = Math.round((100 * event.loaded) / event.total);
    }
  });
  request.addEventListener("load", () => {
    let answer = {};
    try {
      answer = JSON.parse(request.responseText);
    } catch {
      answer = {};
    }
    if (request.status === 201 && answer.id) {
      settle(tray, item, "ready", answer);
    } else {
      settle(tray, item, "refused", null, answer.message || `The upload failed (HTTP ${request.status}).`);
    }
  });
  request.addEventListener("error", () => settle(tray, item, "refused", null, "The upload failed: the connection was lost."));
  request.send(body);
}

/** The chip of a file the server took (`ready`, with its reference) or refused. */
function settle(tray, item, state, ref, reason = "") {
  item.state = state;
  item.ref = ref;
  item.request = null;
  item.chip.dataset.state = state;
  item.chip.querySelector("progress").hidden = true;
  item.chip.querySelector(".attachment__status").textContent = state === "refused" ? reason : "";
  if (state === "refused") {
    item.chip.querySelector(".attachment__thumb")?.remove(); // not an image the server took
  }
  tray.onChange();
}
