"""Page URLs of the chat app, to ``include()`` under any prefix; the WebSocket route lives in
``agent_app.routing``.

Signing in and out are the project's business: the pages link to ``settings.LOGIN_URL``
and post to ``ZETT_LOGOUT_URL``.
"""

from django.urls import path

from agent_app import views
from agent_app.telemetry.view import metrics_view

app_name = "agent_app"

urlpatterns = [
    path("", views.session_list, name="session_list"),
    path("s/<uuid:session_id>/", views.chat, name="chat"),
    path("s/<uuid:session_id>/rename/", views.rename, name="rename"),
    path("s/<uuid:session_id>/delete/", views.delete, name="delete"),
    path("metrics", metrics_view, name="metrics"),
]
