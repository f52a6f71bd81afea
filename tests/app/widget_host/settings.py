"""A host project for the widget's browser tests: the example site's settings, with a
URLconf, templates and static files of its own (its own base.html, element ids and a
CSS-framework-like stylesheet), so the widget is tried inside a page that is not zett's."""

from pathlib import Path

from zett_site.settings import *  # noqa: F403
from zett_site.settings import TEMPLATES

HERE = Path(__file__).resolve().parent

ROOT_URLCONF = "tests.app.widget_host.urls"
TEMPLATES[0]["DIRS"] = [HERE / "templates", *TEMPLATES[0]["DIRS"]]
STATICFILES_DIRS = [HERE / "static"]
ZETT_ASSISTANTS = [
    "tests.app.widget_host.assistants.Shopper",
    "tests.app.widget_host.assistants.Second",
    "tests.app.widget_host.assistants.Support",
]
#: zett's pages here are framed by the host's layout and carry its name.
ZETT_BRAND = "Test shop help"
