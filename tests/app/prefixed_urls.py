"""A host project's URLs for the tests: the chat app mounted under a prefix of its own."""

from django.contrib.auth import views as auth_views
from django.urls import include, path

urlpatterns = [
    path("signin/", auth_views.LoginView.as_view(), name="signin"),
    path("support/chat/", include("agent_app.urls")),
    path("", include("agent_app.health_urls")),
]
