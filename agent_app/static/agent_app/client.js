/**
 * zett's JavaScript client, what pages import: one chat's socket as a small API
 * (`ZettClient`, `zett_client.js`), and the whole chat UI mounted into any element
 * (`mount`, `mount.js`). docs/client.md documents both.
 */
export * from "./zett_client.js";
export { mount } from "./mount.js";
