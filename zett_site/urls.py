"""Site URLs: the admin, and the chat pages of ``agent_app``."""

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("", include("agent_app.urls")),
]
