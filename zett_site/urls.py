"""Site URLs: the admin, the health check, and the chat pages of ``agent_app``."""

from django.contrib import admin
from django.urls import include, path

from agent_app.health import healthz

urlpatterns = [
    path("admin/", admin.site.urls),
    path("healthz", healthz, name="healthz"),
    path("", include("agent_app.urls")),
]
