"""Page URLs of the chat app and its HTTP API (``agent_app.api.urls``), to ``include()``
under any prefix; the WebSocket route lives in ``agent_app.routing``.

Signing in and out are the project's business: the pages link to ``settings.LOGIN_URL``
and post to ``ZETT_LOGOUT_URL``.
"""

from django.urls import include, path

from agent_app import export, views
from agent_app.telemetry.health import healthz
from agent_app.telemetry.view import metrics_view
from agent_app.views import attachments as attachment_views
from agent_app.views import people as people_views

app_name = "agent_app"

urlpatterns = [
    path("", views.session_list, name="session_list"),
    path("s/<uuid:session_id>/", views.chat, name="chat"),
    path("s/<uuid:session_id>/rename/", views.rename, name="rename"),
    path("s/<uuid:session_id>/delete/", views.delete, name="delete"),
    path("s/<uuid:session_id>/export.md", export.export_markdown, name="export_markdown"),
    path("s/<uuid:session_id>/export.json", export.export_json, name="export_json"),
    path(
        "s/<uuid:session_id>/attachments/",
        attachment_views.upload,
        name="attachment_upload",
    ),
    path(
        "s/<uuid:session_id>/attachments/<uuid:attachment_id>/",
        attachment_views.download,
        name="attachment",
    ),
    # Staff (``agent_app.staff_chat``): chats that need a person, 👎 answers, long waits.
    path("inbox/", people_views.inbox_page, name="inbox"),
    path("inbox/<uuid:session_id>/", people_views.inbox_chat, name="inbox_chat"),
    path("metrics", metrics_view, name="metrics"),
    # For a load balancer (agent_app.health_urls mounts it at the site's root instead).
    path("healthz", healthz, name="healthz"),
    # The HTTP API (AG-UI streams, the JSON API for programs): docs/http-api.md.
    path("api/", include("agent_app.api.urls")),
]
