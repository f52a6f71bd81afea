/**
 * What the composer checks before it sends, said as the text is typed (Send stays disabled
 * meanwhile), not after: the server's limit on a message (32 KiB of UTF-8) and a text of
 * only spaces.
 */

const MAX_CONTENT_BYTES = 32 * 1024;
const BLANK_HINT = "Only spaces: type a message to send.";

/**
 * Why the composer's text cannot be sent, for people ("" when it can; null when nothing
 * is typed, which needs no words): said as it is typed, with Send disabled, not after.
 * `withFiles`: uploaded files wait to be sent, and a message needs text to carry them.
 */
export function composerProblem(content, { withFiles = false } = {}) {
  if (content === "") {
    return withFiles ? "Type a message to send with the files." : null;
  }
  if (!content.trim()) {
    return BLANK_HINT;
  }
  // A UTF-16 unit is at most three UTF-8 bytes: a text under a third of the limit fits.
  if (content.length * 3 > MAX_CONTENT_BYTES) {
    const bytes = new TextEncoder().encode(content).length;
    if (bytes > MAX_CONTENT_BYTES) {
      return `This is ${Math.ceil(bytes / 1024)} KiB; the limit is 32 KiB. Shorten it to send.`;
    }
  }
  return "";
}
