/**
 * Light, dark or the system's: the person's choice, remembered in this browser
 * (localStorage `zett-theme`: "light" or "dark"; nothing stored means the system's).
 *
 * A classic script loaded in the page's <head> before the body, so `data-zett-theme` is on
 * <html> before anything is painted: a reload in the dark never flashes light. (The site's
 * CSP allows no inline script, hence this small file.) chat.css and page.css pick their
 * colours from it. Stylesheets that exist in a light and a dark version for the system's
 * setting (`media="(prefers-color-scheme: …)"`, the code highlighter's) follow the choice
 * too.
 *
 * Every `[data-zett-theme-control]` of the page (a <select> of system, light and dark,
 * hidden until this script runs) shows and sets the choice; other tabs follow at once.
 * Widgets whose own theme is `auto` follow the page's choice (widget.js).
 */
(() => {
  const KEY = "zett-theme";
  const root = document.documentElement;

  function stored() {
    try {
      const value = localStorage.getItem(KEY);
      return value === "light" || value === "dark" ? value : "system";
    } catch {
      return "system"; // storage refused (private mode): the system's
    }
  }

  /** Switch the system-dependent stylesheets to the chosen scheme's (or back). */
  function fitSheets(choice) {
    const links = document.querySelectorAll(
      'link[rel="stylesheet"][media*="prefers-color-scheme"], link[data-zett-scheme-media]',
    );
    for (const link of links) {
      link.dataset.zettSchemeMedia ??= link.media;
      const media = link.dataset.zettSchemeMedia;
      const scheme = media.includes("dark") ? "dark" : "light";
      link.media = choice === "system" ? media : choice === scheme ? "all" : "not all";
    }
  }

  function apply(choice) {
    if (choice === "system") {
      delete root.dataset.zettTheme;
    } else {
      root.dataset.zettTheme = choice;
    }
    fitSheets(choice);
    for (const select of document.querySelectorAll("[data-zett-theme-control] select")) {
      select.value = choice;
    }
  }

  function choose(choice) {
    try {
      if (choice === "system") {
        localStorage.removeItem(KEY);
      } else {
        localStorage.setItem(KEY, choice);
      }
    } catch {
      // not remembered; this page still shows it
    }
    apply(choice);
  }

  function wire() {
    for (const control of document.querySelectorAll("[data-zett-theme-control]")) {
      const select = control.querySelector("select");
      select?.addEventListener("change", () => choose(select.value));
      control.hidden = false;
    }
    apply(stored());
  }

  apply(stored());
  window.addEventListener("storage", (event) => {
    if (event.key === KEY || event.key === null) {
      apply(stored());
    }
  });
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", wire);
  } else {
    wire();
  }
})();
