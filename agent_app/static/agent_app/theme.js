/**
 * The light/dark choice on <html> before the page is painted: a classic script in <head>
 * (no inline script under the CSP). How it works: `templates/agent_app/_theme.html`.
 */
(() => {
  const KEY = "zett-theme";
  const root = document.documentElement;
  const all = (selector) => document.querySelectorAll(selector);

  function stored() {
    try {
      const value = localStorage.getItem(KEY);
      return value === "light" || value === "dark" ? value : "system";
    } catch {
      return "system"; // storage refused (private mode)
    }
  }

  function apply(choice) {
    if (choice === "system") {
      delete root.dataset.zettTheme;
    } else {
      root.dataset.zettTheme = choice;
    }
    // Stylesheets for the system's scheme follow the choice.
    for (const link of all('link[rel="stylesheet"][media*="prefers-color-scheme"], link[data-zett-scheme-media]')) {
      const media = (link.dataset.zettSchemeMedia ??= link.media);
      const scheme = media.includes("dark") ? "dark" : "light";
      link.media = choice === "system" ? media : choice === scheme ? "all" : "not all";
    }
    for (const select of all("[data-zett-theme-control] select")) {
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
    for (const control of all("[data-zett-theme-control]")) {
      const select = control.querySelector("select");
      select?.addEventListener("change", () => choose(select.value));
      control.hidden = false;
    }
    apply(stored());
  }

  apply(stored());
  addEventListener("storage", (event) => (event.key === KEY || event.key === null) && apply(stored()));
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", wire);
  } else {
    wire();
  }
})();
