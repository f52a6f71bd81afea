"""Page URLs of the chat app; the WebSocket route lives in ``agent_app.routing``.

Signing in and out are Django's own views (``django.contrib.auth.views``) with the
templates in ``templates/registration/``: any user can sign in there, staff or not.
"""

from django.contrib.auth import views as auth_views
from django.urls import path

from agent_app import views

app_name = "agent_app"

urlpatterns = [
    path("", views.session_list, name="session_list"),
    path("s/<uuid:session_id>/", views.chat, name="chat"),
    path("s/<uuid:session_id>/rename/", views.rename, name="rename"),
    path("s/<uuid:session_id>/delete/", views.delete, name="delete"),
    path(
        "accounts/login/",
        auth_views.LoginView.as_view(redirect_authenticated_user=True),
        name="login",
    ),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
]
