"""URLs of the HTTP API, included by ``agent_app.urls`` under ``api/``."""

from django.urls import path, re_path

from agent_app.api import agui, feedback, rest, runs

urlpatterns = [
    re_path(
        r"^ag-ui/threads/(?P<thread_id>[^/]+)/events/?$", agui.thread_events, name="agui_events"
    ),
    re_path(
        r"^ag-ui/(?P<assistant_id>[a-z0-9_-]+)/capabilities/?$",
        agui.capabilities_of,
        name="agui_capabilities",
    ),
    re_path(r"^ag-ui/(?P<assistant_id>[a-z0-9_-]+)/?$", agui.run, name="agui_run"),
    path("chats/", rest.chats, name="api_chats"),
    path("chats/<str:session_id>/", rest.chat, name="api_chat"),
    path("chats/<str:session_id>/messages/", rest.messages, name="api_messages"),
    path("chats/<str:session_id>/cancel/", rest.cancel, name="api_cancel"),
    path("chats/<str:session_id>/runs/", runs.runs, name="api_runs"),
    path("chats/<str:session_id>/runs/<str:request_id>/", runs.run, name="api_run"),
    path("messages/<int:message_id>/feedback/", feedback.feedback, name="api_feedback"),
]
