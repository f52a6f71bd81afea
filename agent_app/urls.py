"""Page URLs of the chat app; the WebSocket route lives in ``agent_app.routing``."""

from django.urls import path

from agent_app import views

app_name = "agent_app"

urlpatterns = [
    path("", views.session_list, name="session_list"),
    path("s/<uuid:session_id>/", views.chat, name="chat"),
]
