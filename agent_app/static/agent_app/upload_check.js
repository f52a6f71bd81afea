/**
 * A file checked in the browser before it is uploaded, against the site's limits
 * (`{maxBytes, types}`, from the page's configuration): one over the size limit, or of a
 * type the site never takes, is refused at once, with the reason the server would give,
 * and no byte of it is sent. The server checks every upload all the same; a type the
 * browser cannot tell (an empty `file.type`, or text, which the server reads to decide)
 * is left to it.
 */

/** Bytes for people, as the server writes them: "512 B", "12 KB", "19.4 MB", "10 MB". */
export function sizeText(size) {
  if (size < 1024) {
    return `${size} B`;
  }
  if (size < 1024 * 1024) {
    return `${Math.round(size / 1024)} KB`;
  }
  return `${(size / (1024 * 1024)).toFixed(1).replace(/\.0$/, "")} MB`;
}

/** Why `file` would be refused under `limits`, or "" when it may go. */
export function fileProblem(file, limits) {
  if (!limits) {
    return "";
  }
  const name = file.name || "The file";
  if (file.size === 0) {
    return `“${name}” is empty.`;
  }
  if (Number.isFinite(limits.maxBytes) && file.size > limits.maxBytes) {
    return `“${name}” is ${sizeText(file.size)}; files can be at most ${sizeText(limits.maxBytes)}.`;
  }
  const types = Array.isArray(limits.types) ? limits.types : null;
  const type = (file.type || "").toLowerCase();
  if (types && type && !type.startsWith("text/") && !types.includes(type)) {
    return `“${name}” is not a kind of file this chat takes.`;
  }
  return "";
}
