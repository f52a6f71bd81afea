"""``{% load zett %}{% zett_chat assistant="support" %}``: a whole chat inside any page.

The tag renders one widget (``agent_app/widget.html``): an element whose open shadow root
holds the chat's parts and styles, and the module script that mounts it
(``agent_app/static/agent_app/widget.js``). Why a shadow root: the host page's CSS (a
framework's rules for ``button`` or ``h2``) cannot restyle the chat, the chat's CSS and ids
cannot reach the host's elements, and several widgets on a page each keep their own ids.
Only custom properties cross the boundary, on purpose: they are the theming interface.

Rendering it gives an anonymous visitor their browser id, as the chat page does, so the
widget's socket is theirs. With ``ZETT_REQUIRE_LOGIN`` a visitor who is not signed in gets
a sign-in link instead of a chat.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from django import template
from django.conf import settings
from django.middleware.csrf import get_token
from django.shortcuts import resolve_url
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.crypto import salted_hmac
from django.utils.safestring import SafeString

from agent_app import conf
from agent_app.assistants import UnknownAssistant, registry
from agent_app.attachments.limits import page_limits
from agent_app.guard.access import Person, person_of_request
from agent_app.websocket.script_prefix import socket_prefix

__all__ = ["zett_chat", "zett_visitor"]

register = template.Library()

#: What ``height`` may be: a number (pixels) or one CSS length.
_LENGTH = re.compile(r"\d+(\.\d+)?(px|rem|em|vh|dvh|svh|%)")
_THEMES = ("auto", "light", "dark")
#: The words a host may replace (``texts={...}`` in a view's context, or ``placeholder=``).
TEXT_KEYS = frozenset(
    {"messageLabel", "placeholder", "steerLabel", "steerPlaceholder", "send", "steer", "stop"}
)


def _height(value: Any) -> str | None:
    if value in (None, ""):
        return None
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return f"{value}px"
    text = str(value).strip()
    if text.isdigit():
        return f"{text}px"
    if not _LENGTH.fullmatch(text):
        raise template.TemplateSyntaxError(
            f"zett_chat height must be a number of pixels or a CSS length such as 30rem, "
            f"got {value!r}"
        )
    return text


def _chat_id(value: Any) -> str | None:
    if value in (None, ""):
        return None
    try:
        return str(uuid.UUID(str(value)))
    except ValueError:
        raise template.TemplateSyntaxError(
            f"zett_chat chat must be a chat id (a UUID), got {value!r}"
        ) from None


def _texts(value: Any, placeholder: str | None) -> dict[str, str]:
    texts: dict[str, str] = {}
    if value:
        if not isinstance(value, dict) or not set(value) <= TEXT_KEYS:
            raise template.TemplateSyntaxError(
                f"zett_chat texts must be a dict with keys among {sorted(TEXT_KEYS)}, got {value!r}"
            )
        texts.update({key: str(text) for key, text in value.items()})
    if placeholder:
        texts["placeholder"] = str(placeholder)
    return texts


def _storage_key(assistant_id: str, person: Person) -> str:
    """What the browser remembers the widget's chat under: per assistant and per person,
    so another account in the same browser never reopens this one's chat."""
    who = f"user:{person.user_id}" if person.user_id else f"browser:{person.browser_key}"
    return f"{assistant_id}:{salted_hmac('zett.widget', who).hexdigest()[:16]}"


#: Stands for the chat's id in ``attachmentsUrl``: the widget picks the id in the browser.
_CHAT_PLACEHOLDER = uuid.UUID(int=0)


def _attachments_url() -> str:
    """The upload URL of any chat, with ``{chat}`` where its id goes (``widget.js``)."""
    url = reverse("agent_app:attachment_upload", kwargs={"session_id": _CHAT_PLACEHOLDER})
    return url.replace(str(_CHAT_PLACEHOLDER), "{chat}")


def _request(context: template.Context, tag: str) -> Any:
    request = context.get("request")
    if request is None:
        raise template.TemplateSyntaxError(
            f"{tag} needs the request in the template context: render the template "
            "with render(request, ...) and keep django.template.context_processors.request"
        )
    return request


@register.simple_tag(takes_context=True)
def zett_visitor(context: template.Context) -> str:
    """Renders nothing; lets this page's visitor open zett's sockets from its own script.

    For a page that uses ``client.js`` (``mount`` or ``ZettClient``) without a
    ``zett_chat``: an anonymous visitor gets their browser id, as ``zett_chat`` and
    zett's pages give it, so the socket is theirs.
    """
    person_of_request(_request(context, "zett_visitor"))
    return ""


@register.simple_tag(takes_context=True)
def zett_chat(
    context: template.Context,
    assistant: str | None = None,
    chat: Any = None,
    height: Any = None,
    launcher: bool = False,
    title: str | None = None,
    theme: str = "auto",
    launcher_label: str = "Chat with us",
    placeholder: str | None = None,
    texts: dict[str, str] | None = None,
) -> SafeString:
    """Render a chat with ``assistant`` (default: ``ZETT_DEFAULT_ASSISTANT``).

    ``chat``: an existing chat's id (else a new one the browser remembers); ``height``:
    pixels or a CSS length; ``launcher``: a floating button that opens the chat; ``title``:
    the heading (default: the assistant's name); ``theme``: ``auto`` (the system's),
    ``light`` or ``dark``; ``placeholder`` / ``texts``: the composer's words.
    """
    try:
        chosen = registry.resolve(assistant or None)
    except UnknownAssistant as unknown:
        raise template.TemplateSyntaxError(f"zett_chat: {unknown}") from None
    if theme not in _THEMES:
        ok = ", ".join(_THEMES)
        raise template.TemplateSyntaxError(f"zett_chat theme must be one of {ok}, got {theme!r}")
    request = _request(context, "zett_chat")
    person = person_of_request(request)
    if person is None:
        return render_to_string(
            "agent_app/widget_sign_in.html",
            {"login_url": resolve_url(settings.LOGIN_URL), "next": request.get_full_path()},
        )
    config = {
        "assistant": chosen.id,
        "handoff": chosen.handoff,
        "chatId": _chat_id(chat),
        "socketPrefix": socket_prefix(),
        "storageKey": _storage_key(chosen.id, person),
        "height": _height(height),
        "theme": theme,
        "texts": _texts(texts, placeholder),
        # Files go by HTTP, as on the chat page, with the CSRF token; checked first in the page.
        "attachmentsUrl": _attachments_url(),
        "attachmentLimits": page_limits(),
        "csrfToken": get_token(request),
    }
    return render_to_string(
        "agent_app/widget.html",
        {
            "assistant": chosen,
            "allowed": chosen.has_permission(request.user),
            "config": config,
            "launcher": bool(launcher),
            "launcher_label": launcher_label,
            "title": title or chosen.display_name,
        },
        request=request,
    )


@register.simple_tag
def zett_brand() -> str:
    """``ZETT_BRAND``: the name zett's pages show (titles, the list's heading, the sidebar)."""
    return str(conf.ZETT_BRAND)
