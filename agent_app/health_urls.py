"""``/healthz`` on its own, to ``include()`` at the root of a host project (a load balancer
usually probes ``/healthz``): ``path("", include("agent_app.health_urls"))``.
``agent_app.urls`` serves it too, under the chat app's own prefix."""

from django.urls import path

from agent_app.telemetry.health import healthz

urlpatterns = [path("healthz", healthz, name="zett_healthz")]
