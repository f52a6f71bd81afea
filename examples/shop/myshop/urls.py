"""The shop's pages (one with the chat in it), Django's sign-in views, and zett's chat
pages under /help/."""

from django.contrib import admin
from django.urls import include, path
from shop import views

urlpatterns = [
    path("", views.home, name="home"),
    path("shoes/", views.product, name="product"),
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("help/", include("agent_app.urls")),
]
