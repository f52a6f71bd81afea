/**
 * Files attached to a message: the composer's chips, and the files shown in the transcript.
 *
 * The interface, for the chat page and for any other client (the widget):
 *
 *   const tray = new AttachmentTray(composer, { uploadUrl, assistant, csrfToken, onChange });
 *     Adds an "Attach files" button and a list of chips to the `composer` element (a form),
 *     and takes files picked with the button, dropped on the composer or pasted into it.
 *     Each file is uploaded at once (`POST uploadUrl`, field `file`), its chip showing a
 *     thumbnail and the progress; a refused file keeps its chip with the server's reason
 *     until it is removed. `onChange()` is called whenever a chip changes.
 *   tray.busy           true while an upload is still running (wait before sending).
 *   tray.ready          true while an uploaded file waits to be sent.
 *   tray.take()         the references `{id, name, media_type, size, url}` of the uploaded
 *                       files, for the `user_message` frame; their chips go (refused chips stay).
 *   tray.restore(refs)  puts references back as chips (a message the server refused).
 *   attachmentTray(composer, options)  the same, or a tray that holds nothing when
 *                       `options.uploadUrl` is empty (a client that takes no files).
 *   renderAttachments(parent, refs)  shows a message's files (image thumbnails, links to the
 *                       others) in `parent`, e.g. a message bubble.
 *
 * Only the server's references travel in frames; the bytes go once, by HTTP. Every name is
 * inserted as text; thumbnails are the app's own download URLs with `?thumbnail=1` (scaled
 * down by the server), or a local `blob:` preview while the upload runs.
 */

import { element } from "./blocks.js";
import { lazyModule } from "./lazy.js";
import { sizeText } from "./upload_check.js";

/** The chips and the uploads themselves, from the first file on. */
const uploads = lazyModule("uploads.js");

export { sizeText };

const MEDIA_ACCEPTED = "image/png,image/jpeg,image/gif,image/webp,application/pdf,text/plain,text/markdown,text/csv,application/json,.md,.markdown,.csv,.json,.txt";

const isImage = (mediaType) => typeof mediaType === "string" && mediaType.startsWith("image/");
/** An image's thumbnail: the download view scales a large image down. */
const thumbnailUrl = (ref) => `${ref.url}?thumbnail=1`;

/** A message's files, in `parent` (nothing for none). */
export function renderAttachments(parent, refs) {
  if (!Array.isArray(refs) || refs.length === 0) {
    return null;
  }
  const list = element("ul", "attachments attachments--message");
  list.setAttribute("aria-label", refs.length === 1 ? "Attached file" : `${refs.length} attached files`);
  for (const ref of refs) {
    const item = element("li", "attachment");
    const link = element("a", "attachment__link");
    link.href = ref.url;
    link.target = "_blank";
    link.rel = "noopener";
    if (isImage(ref.media_type)) {
      const image = element("img", "attachment__thumb");
      image.src = thumbnailUrl(ref);
      image.alt = ref.name;
      image.loading = "lazy";
      link.append(image);
    } else {
      link.append(element("span", "attachment__name", ref.name), element("span", "attachment__size muted", sizeText(ref.size ?? 0)));
    }
    item.append(link);
    list.append(item);
  }
  parent.append(list);
  return list;
}

/** Stands in for a tray where no upload URL was given: nothing to attach, nothing to send. */
const NO_TRAY = Object.freeze({ busy: false, ready: false, take: () => [], restore: () => {} });

/** The composer's tray, or `NO_TRAY` without `uploadUrl`. */
export function attachmentTray(composer, options) {
  return options.uploadUrl ? new AttachmentTray(composer, options) : NO_TRAY;
}

export class AttachmentTray {
  /**
   * @param {HTMLFormElement} composer
   * @param {{uploadUrl: string, assistant?: string, csrfToken?: string, onChange?: () => void}} options
   */
  constructor(composer, { uploadUrl, assistant = "", csrfToken = "", onChange = () => {}, limits = null }) {
    this.uploadUrl = uploadUrl;
    /** `{maxBytes, types}`: a file outside them is refused before it is sent (upload_check.js). */
    this.limits = limits;
    this.assistant = assistant;
    this.csrfToken = csrfToken || document.querySelector('meta[name="csrf-token"]')?.content || "";
    this.onChange = onChange;
    /** @type {{chip: HTMLElement, state: string, ref: object|null, request: XMLHttpRequest|null}[]} */
    this.items = [];
    this.list = element("ul", "attachments attachments--composer");
    this.list.setAttribute("aria-label", "Files to send");
    this.list.hidden = true;
    this.picker = element("input", "attachments__picker");
    this.picker.type = "file";
    this.picker.multiple = true;
    this.picker.accept = MEDIA_ACCEPTED;
    this.picker.hidden = true;
    this.picker.setAttribute("aria-hidden", "true");
    this.picker.tabIndex = -1;
    const button = element("button", "button button--quiet button--small attachments__attach", "Attach files");
    button.type = "button";
    button.addEventListener("click", () => this.picker.click());
    this.picker.addEventListener("change", () => {
      this.add(this.picker.files);
      this.picker.value = "";
    });
    const actions = composer.querySelector(".composer__actions") ?? composer;
    actions.prepend(button, this.picker);
    actions.before(this.list);
    this.listen(composer);
  }

  listen(composer) {
    composer.addEventListener("dragover", (event) => {
      if (event.dataTransfer?.types?.includes("Files")) {
        event.preventDefault();
        composer.dataset.dropping = "true";
      }
    });
    composer.addEventListener("dragleave", () => delete composer.dataset.dropping);
    composer.addEventListener("drop", (event) => {
      delete composer.dataset.dropping;
      if (event.dataTransfer?.files?.length) {
        event.preventDefault();
        this.add(event.dataTransfer.files);
      }
    });
    composer.addEventListener("paste", (event) => {
      const files = event.clipboardData?.files;
      if (files?.length) {
        event.preventDefault(); // a pasted screenshot is a file, not text
        this.add(files);
      }
    });
  }

  get busy() {
    return this.items.some((item) => item.state === "uploading");
  }

  /** Whether a file is uploaded and waiting to be sent. */
  get ready() {
    return this.items.some((item) => item.state === "ready");
  }

  /** Upload each of `files` (a FileList or an array of File; `uploads.js`, loaded for the first). */
  add(files) {
    const list = Array.from(files ?? []); // now: a picker's or a drop's list empties after the event
    if (list.length > 0) {
      uploads.get().then(({ addFiles }) => addFiles(this, list), (error) => console.warn("Could not attach files:", error));
    }
  }

  take() {
    const ready = this.items.filter((item) => item.state === "ready");
    for (const item of ready) {
      this.drop(item);
    }
    return ready.map((item) => item.ref);
  }

  restore(refs) {
    if (refs?.length) {
      uploads.get().then(({ restoreRefs }) => restoreRefs(this, refs));
    }
  }

  drop(item) {
    this.items.splice(this.items.indexOf(item), 1);
    item.chip.remove();
    if (item.preview?.startsWith("blob:")) {
      URL.revokeObjectURL(item.preview);
    }
    this.list.hidden = this.items.length === 0;
    this.onChange();
  }
}
