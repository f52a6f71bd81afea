"""Security headers on every response: a strict Content-Security-Policy, and the rest.

The pages run no inline script and no inline style (configuration reaches the scripts
through ``json_script``, which is data), so the policy can allow scripts, styles, images
and fonts from this origin only, sockets to this host, and nothing else: injected markup
could neither run code nor load anything from elsewhere, nor frame the page. The socket's
``ws://``/``wss://`` origin is named as well, for browsers whose ``'self'`` does not cover
websockets. ``ZETT_CONTENT_SECURITY_POLICY`` replaces the policy (empty: none is sent);
a response that has its own policy keeps it.

With ``DEBUG`` on, Django's own error pages (the technical 404 and 500, and the CSRF
failure page) are styled by an inline ``<style>``: those responses, and only those, get
the policy with ``'unsafe-inline'`` added to ``style-src`` (never to scripts), so a
developer sees them as Django draws them and the browser logs no violation. Without
``DEBUG`` the app's own templates answer (``templates/404.html``, ``500.html``), which
need nothing inline.

``X-Content-Type-Options: nosniff`` and ``Referrer-Policy: same-origin`` are what
Django's ``SecurityMiddleware`` sends by default; they are set here too (unless present),
so a site that configured that middleware differently still sends them.
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils.deprecation import MiddlewareMixin

from agent_app import conf

__all__ = ["DEFAULT_POLICY", "SecurityHeadersMiddleware", "policy_for"]

DEFAULT_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
    "font-src 'self'; connect-src 'self' {sockets}; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)


#: What every page Django draws itself under DEBUG carries (technical 404/500, CSRF 403).
_DJANGO_PAGE_MARK = b'<meta name="robots" content="NONE,NOARCHIVE">'


def _is_django_debug_page(response: HttpResponse) -> bool:
    return (
        settings.DEBUG
        and response.status_code >= 400
        and not getattr(response, "streaming", False)
        and response.get("Content-Type", "").startswith("text/html")
        and _DJANGO_PAGE_MARK in response.content[:2000]
    )


def policy_for(request: HttpRequest) -> str:
    """The policy of a response to ``request`` (empty: send none)."""
    configured = conf.ZETT_CONTENT_SECURITY_POLICY
    if configured is not None:
        return str(configured)
    host = request.get_host()
    return DEFAULT_POLICY.format(sockets=f"ws://{host} wss://{host}")


class SecurityHeadersMiddleware(MiddlewareMixin):
    """Adds the headers above to every response (``MIDDLEWARE``, after ``SecurityMiddleware``).

    A ``MiddlewareMixin``, like Django's own: it runs without a thread hop under ASGI.
    """

    def process_response(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        if "Content-Security-Policy" not in response:
            policy = policy_for(request)
            if policy and _is_django_debug_page(response):
                policy = policy.replace("style-src 'self'", "style-src 'self' 'unsafe-inline'")
            if policy:
                response["Content-Security-Policy"] = policy
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("Referrer-Policy", "same-origin")
        return response
