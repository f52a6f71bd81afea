"""Site URLs: the admin, the health check, signing in and out, and the chat pages of
``agent_app``.

Signing in and out are Django's own views (``django.contrib.auth.views``) with the site's
templates in ``templates/registration/``: any user can sign in there, staff or not.
"""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from agent_app.telemetry.health import healthz

urlpatterns = [
    path("admin/", admin.site.urls),
    path("healthz", healthz, name="healthz"),
    path(
        "accounts/login/",
        auth_views.LoginView.as_view(redirect_authenticated_user=True),
        name="login",
    ),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", include("agent_app.urls")),
]
