"""The fixtures of the browser tests, loaded by each ``test_browser*.py`` as a plugin
(``pytest_plugins = ["tests.app.browser.browser_fixtures"]``), so all of them share the live
servers for the whole run (and one headless Chromium per file): the demo model, the
scripted model, the demo model with tight limits (``tight_server``) and a host project
with the widget (``widget_host``), each started only
when a test asks for it. The helpers they use are in
``browser_support.py``; the tests import those, never this module (a plugin module that a
test imported first could not have its asserts rewritten).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.app.browser.browser_support import (
    ARTIFACTS,
    CHROMIUM,
    CHROMIUM_ARGS,
    TIGHT_HISTORY_PAGE,
    TIGHT_REPLY_TIMEOUT,
    WAIT_MS,
    WIDE,
    WIDGET_TOOL_TIMEOUT,
    LiveServer,
    PageProbe,
    serve,
    unavailable,
)

try:
    from playwright.sync_api import Browser, Page, sync_playwright
except ImportError:  # pragma: no cover - depends on the machine
    sync_playwright = None


@pytest.fixture(scope="session")
def daphne_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """The app as users run it by default: the offline demo model."""
    with serve(tmp_path_factory.mktemp("demo"), "demo", "demo") as server:
        yield server


@pytest.fixture(scope="session")
def scripted_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """The app on ``browser_model.BrowserScriptModel``: reasoning, cut-offs, failures."""
    model = "tests.app.browser.browser_model:browser_script_model"
    with serve(tmp_path_factory.mktemp("scripted"), "scripted", model) as server:
        yield server


@pytest.fixture(scope="session")
def tight_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """The demo model with tight limits: questions and approvals expire after
    ``TIGHT_REPLY_TIMEOUT`` seconds, and the ``session`` frame carries only the newest
    ``TIGHT_HISTORY_PAGE`` messages, so deadlines and paging can be seen in a test."""
    env = {
        "ZETT_REPLY_TIMEOUT": str(TIGHT_REPLY_TIMEOUT),
        "ZETT_HISTORY_PAGE": str(TIGHT_HISTORY_PAGE),
    }
    with serve(tmp_path_factory.mktemp("tight"), "tight", "demo", env) as server:
        yield server


@pytest.fixture(scope="session")
def widget_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A host project with zett's widget in its own pages (``tests/app/widget_host``), on
    the scripted model; its host-page tools wait ``WIDGET_TOOL_TIMEOUT`` seconds."""
    work = tmp_path_factory.mktemp("widget")
    env = {
        "DJANGO_SETTINGS_MODULE": "tests.app.widget_host.settings",
        "ZETT_BROWSER_TOOL_TIMEOUT": str(WIDGET_TOOL_TIMEOUT),
        "DJANGO_MEDIA_ROOT": str(work / "media"),  # the widget's uploads
    }
    model = "tests.app.browser.browser_model:browser_script_model"
    with serve(work, "widget", model, env) as server:
        yield server


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Chromium for one test file. Per file, not per run: Playwright's sync API keeps an
    event loop running while it is started, and pytest-asyncio's tests in the files after
    the browser tests need none to be."""
    if sync_playwright is None:
        unavailable("Playwright for Python is not installed")
    if not CHROMIUM.exists():
        unavailable(f"{CHROMIUM} is missing (apt-get install -y chromium)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def probe() -> PageProbe:
    return PageProbe()


@pytest.fixture
def page(browser: Browser, probe: PageProbe, request: pytest.FixtureRequest) -> Iterator[Page]:
    """A page in a fresh context; ``request.param`` may set width, height, color_scheme,
    and ``touch`` (a phone: a touch screen, a coarse pointer)."""
    layout = {**WIDE, "color_scheme": "light", **getattr(request, "param", {})}
    touch = bool(layout.get("touch", False))
    context = browser.new_context(
        viewport={"width": layout["width"], "height": layout["height"]},
        has_touch=touch,
        is_mobile=touch,
        locale="en-US",
        timezone_id="UTC",
    )
    context.set_default_timeout(WAIT_MS)
    page = context.new_page()
    page.emulate_media(color_scheme=layout["color_scheme"])
    page.on("pageerror", lambda error: probe.errors.append(str(error)))
    page.on(
        "console",
        lambda message: probe.errors.append(message.text) if message.type == "error" else None,
    )

    def watch(socket) -> None:
        socket.on("framereceived", lambda payload: probe.frames.append(json.loads(payload)))

    page.on("websocket", watch)

    def refuse_dialog(dialog) -> None:
        probe.dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", refuse_dialog)
    yield page
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"), full_page=True)
    context.close()
    errors = probe.unforgiven()
    assert errors == [], f"the page logged errors: {errors}"
    assert probe.dialogs == [], f"the page opened dialogs: {probe.dialogs}"
